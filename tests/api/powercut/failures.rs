//! When the disk fails instead of the power: writes and syncs that fail with EIO or ENOSPC,
//! injected at the file system. A write the disk refused gets a 503 and changes nothing; after
//! a failed sync, coursed trusts nothing it wrote since (Linux may have dropped those pages and
//! will report the next sync a success), so it writes nothing more, says why until it is
//! restarted, and a restart (even after a power cut) finds every acknowledged write.

use std::time::Duration;

use serde_json::{json, Value};

use super::cuts::{content, sqlite_checks, TOKEN};
use super::{Names, Op, PowerCut};
use crate::process::{Server, Starting};

fn start(database: &str) -> Server {
    Starting::spawn(&["--database", database, "--token", TOKEN]).ready().expect("coursed starts")
}

/// Creates a subject of `size` bytes of content: (status, body).
fn create(server: &Server, title: &str, size: usize) -> (u16, Value) {
    let body = json!({"data": {"type": "subjects", "attributes": {"title": title, "content": content(title, size)}}});
    server.call("POST", "/v1/subjects", TOKEN, Some(&body))
}

fn readyz(server: &Server) -> (u16, Value) {
    server.call("GET", "/readyz", TOKEN, None)
}

/// Every id in `acked` is served with its title.
fn all_there(server: &Server, acked: &[(String, String)]) {
    for (id, title) in acked {
        let (status, body) = server.call("GET", &format!("/v1/subjects/{id}"), TOKEN, None);
        assert_eq!(status, 200, "acknowledged subject {id} lost: {body}");
        assert_eq!(body["data"]["attributes"]["title"], json!(title));
    }
}

#[test]
fn a_write_the_disk_refuses_gets_a_503_and_the_next_one_goes_through() {
    let Some(disk) = PowerCut::mount() else { return };
    let database = disk.path().join("course.db").to_str().unwrap().to_owned();
    let server = start(&database);
    let mut acked = Vec::new();
    let (status, body) = create(&server, "before", 500);
    assert_eq!(status, 201, "{body}");
    acked.push((body["data"]["id"].as_str().unwrap().to_owned(), "before".to_owned()));
    for (errno, name) in [(libc::ENOSPC, "full"), (libc::EIO, "failing")] {
        disk.fail(Op::Write, "course.db-wal", errno, 1);
        let (status, body) = create(&server, name, 500);
        assert_eq!(status, 503, "a write the disk refused ({name}): {body}");
        assert_eq!(body["errors"][0]["code"], "unavailable", "{body}");
        let (status, body) = create(&server, &format!("after {name}"), 500);
        assert_eq!(status, 201, "the next write goes through: {body}");
        acked.push((body["data"]["id"].as_str().unwrap().to_owned(), format!("after {name}")));
    }
    assert_eq!(disk.counts().faults, 2, "both faults were met");
    let (status, body) = server.call("GET", "/v1/subjects?page[size]=100", TOKEN, None);
    assert_eq!((status, body["meta"]["page"]["total"].as_u64()), (200, Some(3)), "the refused writes left nothing");
    drop(server);
    disk.cut();
    let server = start(&database);
    all_there(&server, &acked);
}

/// After a failed sync of `file` (met while writing subjects of `size` bytes), writes stop
/// with a 503 that says why, reads go on, `/readyz` says why; a restart after a power cut
/// finds every acknowledged write and a sound file, and writes again.
fn after_a_failed_sync_nothing_more_is_written(file: &str, size: usize) {
    let Some(disk) = PowerCut::mount_with(Names::Strict) else { return };
    let database = disk.path().join("course.db").to_str().unwrap().to_owned();
    let server = start(&database);
    let mut acked = Vec::new();
    disk.fail(Op::Sync, file, libc::EIO, 1);
    let mut refused = None;
    for i in 0..400 {
        let title = format!("subject {i}");
        match create(&server, &title, size) {
            (201, body) => acked.push((body["data"]["id"].as_str().unwrap().to_owned(), title)),
            (status, body) => {
                refused = Some((status, body));
                break;
            }
        }
    }
    let (status, body) = refused.expect("the failed sync stopped the writes");
    assert_eq!(disk.counts().faults, 1, "the failed sync was met");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["errors"][0]["code"], "storage_failed", "{body}");
    // Stopped: every write is refused, saying why; reads go on; /readyz tells the balancer.
    for _ in 0..3 {
        let (status, body) = create(&server, "refused", 10);
        assert_eq!((status, body["errors"][0]["code"].as_str()), (503, Some("storage_failed")), "{body}");
    }
    let (status, _) = server.call("GET", "/v1/subjects?page[size]=1", TOKEN, None);
    assert_eq!(status, 200, "reads go on");
    let (status, body) = readyz(&server);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "failed", "{body}");
    assert!(body["reason"].as_str().is_some_and(|r| r.contains("sync")), "{body}");
    // Stopped as an operator would (its close must not checkpoint what it no longer trusts),
    // and the power cut before the restart: only what reached the disk counts.
    server.signal("-TERM");
    let log: Vec<String> = server.stderr.lock().unwrap().try_iter().collect();
    server.wait(Duration::from_secs(30));
    assert!(log.iter().any(|l| l.contains("ERROR") && l.contains("sync")), "the log says why: {log:?}");
    disk.cut();
    let server = start(&database);
    all_there(&server, &acked);
    let (status, body) = create(&server, "after the restart", 10);
    assert_eq!(status, 201, "a restart writes again: {body}");
    server.signal("-TERM");
    server.wait(Duration::from_secs(30));
    sqlite_checks(&database);
}

#[test]
fn a_failed_sync_of_the_wal_stops_the_writes_until_a_restart() {
    after_a_failed_sync_nothing_more_is_written("course.db-wal", 500);
}

#[test]
fn a_failed_sync_of_a_checkpoint_stops_the_writes_until_a_restart() {
    // Subjects of 150 KB: the writer's checkpoint, whose sync fails, comes within a hundred.
    after_a_failed_sync_nothing_more_is_written("course.db", 150_000);
}

/// PostgreSQL's own answer to a failed sync: it stops every process and recovers from its WAL
/// (a PANIC); coursed answers 503 meanwhile, and goes on once it is back, with every
/// acknowledged write, even after a power cut.
pub fn postgres_recovers_from_a_failed_sync(machine: &super::cuts::Machine) {
    let disk = machine.disk;
    let server = machine.start();
    let mut acked = Vec::new();
    for i in 0..5 {
        let (status, body) = create(&server, &format!("before {i}"), 100);
        assert_eq!(status, 201, "{body}");
        acked.push((body["data"]["id"].as_str().unwrap().to_owned(), format!("before {i}")));
    }
    disk.fail(Op::Sync, "", libc::EIO, 1);
    let (mut refused, mut after) = (0, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    for i in 0.. {
        let title = format!("during {i}");
        let body = json!({"data": {"type": "subjects", "attributes": {"title": &title}}});
        match crate::process::try_call(&server.addr, "POST", "/v1/subjects", TOKEN, Some(&body)) {
            Some((201, body)) => {
                acked.push((body["data"]["id"].as_str().unwrap().to_owned(), title));
                if disk.counts().faults == 1 {
                    after += 1;
                    if after == 5 {
                        break;
                    }
                }
            }
            Some((503, _)) => refused += 1,
            other => {
                std::thread::sleep(Duration::from_millis(500));
                let log: Vec<String> = server.stderr.lock().unwrap().try_iter().collect();
                panic!("a write while PostgreSQL recovers: {other:?}; log: {log:#?}")
            }
        }
        assert!(std::time::Instant::now() < deadline, "PostgreSQL never came back ({refused} refused)");
    }
    assert!(refused > 0, "the failed sync stopped PostgreSQL for a while");
    all_there(&server, &acked);
    machine.cut(Some(server));
    let server = machine.start();
    all_there(&server, &acked);
}
