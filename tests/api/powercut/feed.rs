//! The change feed's readers across power cuts of the district: a school following it (on
//! another disk, through a relay that keeps the district's address) and a webhook receiver.
//! No one may have been told of a revision that the cut took back: each revision delivered is
//! still in the feed, the same, and the school's cursor is never ahead of the district's feed
//! (it goes on following, and ends with the district's catalogue).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cuts::{feed_replays_to, titles, Outcome, Rng, Round, SingleWrites, Style, Workload, TOKEN};
use crate::process::{Relay, Server, Starting};

/// A webhook receiver: answers every POST 200 and keeps its body.
pub struct Receiver {
    pub url: String,
    pub received: Arc<Mutex<Vec<Value>>>,
}

impl Receiver {
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let kept = received.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let kept = kept.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    // Requests on the connection, one after another (keep-alive).
                    loop {
                        let mut length = None;
                        let mut line = String::new();
                        loop {
                            line.clear();
                            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            if line == "\r\n" {
                                break;
                            }
                            if let Some((name, value)) = line.split_once(':') {
                                if name.eq_ignore_ascii_case("content-length") {
                                    length = value.trim().parse::<usize>().ok();
                                }
                            }
                        }
                        let mut body = vec![0; length.unwrap_or(0)];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        if let Ok(doc) = serde_json::from_slice::<Value>(&body) {
                            kept.lock().unwrap().push(doc);
                        }
                        let mut out = &conn;
                        if out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Receiver { url, received }
    }
}

/// Single writes on the district, with a school following it and a webhook delivering its
/// revisions.
pub struct Followed {
    writes: SingleWrites,
    relay: Relay,
    school: Server,
    receiver: Receiver,
}

impl Followed {
    /// `district`: the district's database, on the power-cut disk; `school`: the school's, on
    /// another disk.
    pub fn new(district: &str, school: &str) -> Followed {
        let receiver = Receiver::start();
        // The district's new database, as its server's first start makes it (`coursed webhook`
        // makes none).
        let options = coursed::store::Options::new(district, coursed::store::Durability::Full);
        drop(coursed::store::Db::open(&options).expect("the district's database"));
        let added = std::process::Command::new(env!("CARGO_BIN_EXE_coursed"))
            .args(["webhook", "add", "--url", &receiver.url, "--database", district])
            .output()
            .unwrap();
        assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
        // Nothing listens there yet: the school waits, and follows once the district starts.
        let relay = Relay::start("127.0.0.1:9");
        let upstream = format!("http://127.0.0.1:{}", relay.port);
        let school =
            Starting::spawn(&["--database", school, "--token", TOKEN, "--follow", &upstream, "--follow-token", TOKEN])
                .ready()
                .expect("the school starts");
        Followed { writes: SingleWrites::new(Style::Mixed), relay, school, receiver }
    }
}

impl Workload for Followed {
    type Log = Vec<Outcome>;

    fn started(&self, server: &Server) {
        self.relay.point_to(&server.addr);
    }

    fn client(&self, round: &Round, c: usize, name: &str, rng: Rng) -> Vec<Outcome> {
        self.writes.client(round, c, name, rng)
    }

    fn verify(&mut self, server: &Server, logs: Vec<Vec<Outcome>>, round: usize) {
        self.writes.verify(server, logs, round);
        let listed: BTreeMap<String, String> = titles(server);
        let head = feed_replays_to(server, &listed, round);
        // Every revision a webhook delivered is still in the feed, as delivered.
        let delivered = self.receiver.received.lock().unwrap().clone();
        for doc in &delivered {
            let id = doc["data"]["id"].as_str().expect("a revision's id");
            let (status, now) = server.call("GET", &format!("/v1/revisions/{id}"), TOKEN, None);
            assert_eq!(status, 200, "cut {round}: revision {id} was delivered, and the cut took it back: {now}");
            for member in ["action", "number", "at", "changes"] {
                assert_eq!(
                    now["data"]["attributes"][member], doc["data"]["attributes"][member],
                    "cut {round}: revision {id} was delivered otherwise than the feed now holds it"
                );
            }
        }
        // The school goes on following, never ahead, and catches up.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (_, ready) = self.school.call("GET", "/readyz", TOKEN, None);
            let follow = &ready["follow"];
            // Unreachable for a while (the district was down) is expected; stopped is not.
            assert_ne!(follow["state"], "stopped", "cut {round}: the school stopped following: {follow}");
            let cursor: u64 = follow["cursor"].as_str().and_then(|c| c.parse().ok()).unwrap_or(0);
            assert!(
                cursor <= head,
                "cut {round}: the school's cursor {cursor} is ahead of the district's feed ({head})"
            );
            if cursor == head {
                break;
            }
            assert!(Instant::now() < deadline, "cut {round}: the school did not catch up: {follow}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let school: BTreeMap<String, String> = titles(&self.school);
        assert_eq!(school, listed, "cut {round}: the school's catalogue is the district's");
        eprintln!("cut {round}: {} revisions delivered, school at {head}", delivered.len());
    }

    fn acked(logs: &[Vec<Outcome>]) -> usize {
        SingleWrites::acked(logs)
    }
}

/// The last place of the feed its readers are served.
fn served_head(server: &Server) -> u64 {
    let (mut path, mut last) = ("/v1/revisions?page[size]=1000".to_owned(), 0);
    loop {
        let (status, body) = server.call("GET", &path, TOKEN, None);
        assert_eq!(status, 200, "{body}");
        let data = body["data"].as_array().unwrap();
        if data.is_empty() {
            return last;
        }
        last = data.last().unwrap()["meta"]["cursor"].as_str().unwrap().parse().unwrap();
        path = format!("/v1/revisions?page[size]=1000&page[after]={last}");
    }
}

fn subjects(server: &Server) -> u64 {
    let (_, body) = server.call("GET", "/v1/subjects?page[size]=1", TOKEN, None);
    body["meta"]["page"]["total"].as_u64().unwrap()
}

/// A write committed and readable but whose sync the disk has not finished is not yet in the
/// feed: the power may still take it back, and its place would then go to another revision.
pub fn served_only_once_on_the_disk(machine: &super::cuts::Machine) {
    let disk = machine.disk;
    let server = machine.start();
    let body = |t: &str| serde_json::json!({"data": {"type": "subjects", "attributes": {"title": t}}});
    assert_eq!(server.call("POST", "/v1/subjects", TOKEN, Some(&body("kept"))).0, 201);
    let head = served_head(&server);
    let wal = format!("{}-wal", machine.sqlite.as_deref().unwrap());
    disk.hold_next_sync(std::path::Path::new(&wal).file_name().unwrap().to_str().unwrap());
    let addr = server.addr.clone();
    let writing =
        std::thread::spawn(move || crate::process::try_call(&addr, "POST", "/v1/subjects", TOKEN, Some(&body("held"))));
    assert!(disk.wait_held(Duration::from_secs(10)), "the write's sync reached the disk");
    // Committed: readable to anyone who reads the catalogue.
    let deadline = Instant::now() + Duration::from_secs(10);
    while subjects(&server) < 2 {
        assert!(Instant::now() < deadline, "the held write was never committed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(served_head(&server), head, "a revision not yet on the disk was served in the feed");
    // The power goes before the sync ends: the write never was, and no reader heard of it.
    machine.cut(Some(server));
    let answer = writing.join().unwrap();
    assert!(answer.as_ref().is_none_or(|(status, _)| *status != 201), "the held write was acknowledged: {answer:?}");
    let server = machine.start();
    assert_eq!((subjects(&server), served_head(&server)), (1, head));
}
