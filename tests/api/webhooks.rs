//! Webhooks, on both engines: added, listed, tested, resumed and removed by the command;
//! delivered to real HTTP receivers (here, in the test: healthy, failing, slow and dead ones)
//! by the servers' deliveries: every revision a webhook's filter keeps, signed, at least once,
//! in feed order, one at a time across servers, never slowed by another webhook's receiver.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{on_both, TestApp};
use coursed::priority::Saturation;
use coursed::webhooks::deliver::{self, Settings};

/// What a receiver answers its `n`-th request (from 0): a status, after a delay.
type Behaviour = dyn Fn(usize) -> (u16, Duration) + Send + Sync;

/// One request a receiver took.
#[derive(Debug, Clone)]
struct Got {
    headers: Vec<(String, String)>,
    body: Value,
    raw: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> &str {
        self.headers.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
    }
}

/// An HTTP receiver on a port of its own, answering as its behaviour says, one thread a
/// connection; it notes whether two requests were ever in flight at once.
struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<Got>>>,
    behaviour: Arc<Mutex<Arc<Behaviour>>>,
    overlapped: Arc<AtomicBool>,
}

impl Receiver {
    fn start(behaviour: impl Fn(usize) -> (u16, Duration) + Send + Sync + 'static) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got: Arc<Mutex<Vec<Got>>> = Arc::default();
        let behaviour: Arc<Mutex<Arc<Behaviour>>> = Arc::new(Mutex::new(Arc::new(behaviour)));
        let overlapped = Arc::new(AtomicBool::new(false));
        let (g, b, o) = (got.clone(), behaviour.clone(), overlapped.clone());
        let (in_flight, seen) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (g, b, o, in_flight, seen) = (g.clone(), b.clone(), o.clone(), in_flight.clone(), seen.clone());
                std::thread::spawn(move || {
                    if in_flight.fetch_add(1, Ordering::SeqCst) > 0 {
                        o.store(true, Ordering::SeqCst);
                    }
                    let taken = read_request(&conn);
                    let n = seen.fetch_add(1, Ordering::SeqCst);
                    let behaviour = b.lock().unwrap().clone();
                    let (status, delay) = behaviour(n);
                    if let Some(request) = taken {
                        g.lock().unwrap().push(request);
                    }
                    std::thread::sleep(delay);
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    let mut conn = conn;
                    let _ = write!(conn, "HTTP/1.1 {status} Answer\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                });
            }
        });
        Receiver { port, got, behaviour, overlapped }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks/coursed", self.port)
    }

    fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    fn behave(&self, behaviour: impl Fn(usize) -> (u16, Duration) + Send + Sync + 'static) {
        *self.behaviour.lock().unwrap() = Arc::new(behaviour);
    }
}

fn read_request(conn: &TcpStream) -> Option<Got> {
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? <= 2 {
            break;
        }
        let (k, v) = line.trim_end().split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let length: usize = headers.iter().find(|(k, _)| k == "content-length")?.1.parse().ok()?;
    let mut raw = vec![0; length];
    reader.read_exact(&mut raw).ok()?;
    let body = serde_json::from_slice(&raw).ok()?;
    Some(Got { headers, body, raw })
}

/// Paced for tests: looked for every 20 ms, tried again after 100 ms to 400 ms, 1 s to answer.
fn quick() -> Settings {
    Settings {
        timeout: Duration::from_secs(1),
        first_wait: Duration::from_millis(100),
        longest_wait: Duration::from_millis(400),
        give_up_after: Duration::from_secs(3600),
        every: Duration::from_millis(20),
        lease: Duration::from_secs(5),
        // The machine running the tests is often saturated: deliveries give way only where a
        // test says so.
        give_way_for: Duration::from_secs(60),
        saturation: Saturation::given(false),
    }
}

/// Deliveries take only CPU time that requests leave: their thread (every one in this process:
/// tests run side by side), once started, is in the idle scheduling class.
fn assert_deliveries_run_in_the_idle_class() {
    let classes = || -> Vec<(String, i32)> {
        let tasks = std::fs::read_dir("/proc/self/task").unwrap().flatten();
        let named = tasks.filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|comm| comm.trim() == "coursed-webhook")
        });
        named
            .map(|t| {
                let tid: libc::pid_t = t.file_name().to_string_lossy().parse().unwrap();
                // SAFETY: a thread id of this process; no pointers.
                (tid.to_string(), unsafe { libc::sched_getscheduler(tid) })
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seen = classes();
        if !seen.is_empty() && seen.iter().all(|(_, policy)| *policy == libc::SCHED_IDLE) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "threads delivering webhooks, and their classes: {seen:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn deliveries(t: &TestApp, settings: Settings) -> deliver::Deliveries {
    deliver::spawn(t.app.db.clone(), coursed::render::Base::new("http", "localhost:8080").unwrap(), settings).unwrap()
}

/// `coursed webhook ARGS --database DB`: success, stdout, stderr.
fn webhook(t: &TestApp, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .arg("webhook")
        .args(args)
        .args(["--database", &t.database])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Adds a webhook: its id and secret.
fn add(t: &TestApp, url: &str, more: &[&str]) -> (String, String) {
    let mut args = vec!["add", "--url", url];
    args.extend(more);
    let (ok, out, err) = webhook(t, &args);
    assert!(ok, "webhook add failed: {err}");
    let mut lines = out.lines();
    (lines.next().unwrap().to_owned(), lines.next().unwrap().to_owned())
}

/// Waits (up to 15 s) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "waited 15 s for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn ok(_: usize) -> (u16, Duration) {
    (204, Duration::ZERO)
}

/// The feed places of what a receiver got, in the order it got them.
fn cursors(got: &[Got]) -> Vec<i64> {
    got.iter().map(|g| g.body["data"]["meta"]["cursor"].as_str().unwrap().parse().unwrap()).collect()
}

on_both!(every_change_is_posted_signed_in_feed_order);
async fn every_change_is_posted_signed_in_feed_order() {
    let t = TestApp::new().await;
    t.module("Before the webhook").await;
    let r = Receiver::start(ok);
    let (id, secret) = add(&t, &r.url(), &[]);
    assert!(secret.starts_with("whsec_"), "{secret}");
    let running = deliveries(&t, quick());
    assert_deliveries_run_in_the_idle_class();
    let m = t.module("Plants").await;
    let s = t.subject("Leaves", Some(&m)).await;
    let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "Green leaves"}}});
    t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
    t.delete(&format!("/v1/subjects/{s}")).await.assert_status(204);
    until("four deliveries", || r.got().len() >= 4).await;
    let got = r.got();
    assert_eq!(got.len(), 4, "what was written before the webhook is not sent");
    let actions: Vec<&str> = got.iter().map(|g| g.body["data"]["attributes"]["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["create", "create", "update", "delete"]);
    let places = cursors(&got);
    assert!(places.windows(2).all(|w| w[0] < w[1]), "{places:?}");
    for g in &got {
        assert_eq!(g.header("content-type"), "application/vnd.api+json");
        assert_eq!(g.header("webhook-id"), g.body["data"]["id"].as_str().unwrap());
        let timestamp: i64 = g.header("webhook-timestamp").parse().unwrap();
        assert!((timestamp - coursed::time::now_ms() / 1000).abs() < 60);
        let expected = coursed::webhooks::sign(&secret, g.header("webhook-id"), timestamp, &g.raw).unwrap();
        assert_eq!(g.header("webhook-signature"), expected);
        crate::helpers::assert_valid_jsonapi(&g.body);
    }
    assert_eq!(
        got[2].body["data"]["attributes"]["changes"]["title"],
        json!({"before": "Leaves", "after": "Green leaves"})
    );
    // The list says where it is (once the last delivery is recorded, just after its answer).
    until("the list caught up", || webhook(&t, &["list"]).1.contains("4 delivered")).await;
    let (ok, listed, _) = webhook(&t, &["list"]);
    assert!(ok);
    assert!(listed.contains(&id) && listed.contains(&r.url()), "{listed}");
    assert!(
        listed.contains("state: active") && listed.contains("4 delivered") && listed.contains("answered 204"),
        "{listed}"
    );
    assert!(!listed.contains(&secret), "the list never shows the secret");
    drop(running);
}

on_both!(a_filter_keeps_its_types_and_actions_and_moves_past_the_rest);
async fn a_filter_keeps_its_types_and_actions_and_moves_past_the_rest() {
    let t = TestApp::new().await;
    let r = Receiver::start(ok);
    add(&t, &r.url(), &["--types", "subjects", "--actions", "delete,restore"]);
    let running = deliveries(&t, quick());
    let m = t.module("Kept out").await;
    let s = t.subject("Deleted", Some(&m)).await;
    t.chapter("Kept out too", &s, 0).await;
    t.delete(&format!("/v1/subjects/{s}")).await.assert_status(204);
    until("the subject's deletion", || !r.got().is_empty()).await;
    let feed = t.get("/v1/revisions?page[size]=1000").await;
    let head = feed.data().last().unwrap()["meta"]["cursor"].as_str().unwrap().to_owned();
    // Everything after it is examined too: the cursor reaches the feed's end.
    until("the cursor at the feed's end", || {
        let (_, listed, _) = webhook(&t, &["list"]);
        listed.contains(&format!("cursor {head};"))
    })
    .await;
    let got = r.got();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body["data"]["attributes"]["action"], "delete");
    assert_eq!(got[0].body["data"]["relationships"]["resource"]["data"]["type"], "subjects");
    drop(running);
}

on_both!(a_failing_receiver_gets_each_revision_again_until_it_takes_it_in_order);
async fn a_failing_receiver_gets_each_revision_again_until_it_takes_it_in_order() {
    let t = TestApp::new().await;
    // 500, 500, no answer in time, then 200 for good.
    let r = Receiver::start(|n| match n {
        0 | 1 => (500, Duration::ZERO),
        2 => (200, Duration::from_millis(1500)),
        _ => (200, Duration::ZERO),
    });
    let (id, _) = add(&t, &r.url(), &[]);
    let running = deliveries(&t, quick());
    for title in ["One", "Two", "Three"] {
        t.module(title).await;
    }
    until("three revisions taken", || r.got().len() >= 6).await;
    let got = r.got();
    let ids: Vec<&str> = got.iter().map(|g| g.header("webhook-id")).collect();
    // The first was sent four times (at least once), then each of the others once, in order.
    assert_eq!(ids[..4], [ids[0]; 4]);
    assert_eq!(ids.len(), 6, "{ids:?}");
    let places = cursors(&got[3..]);
    assert!(places.windows(2).all(|w| w[0] < w[1]), "{places:?}");
    until("the list caught up", || webhook(&t, &["list"]).1.contains("3 delivered")).await;
    let (_, listed, _) = webhook(&t, &["list"]);
    assert!(listed.contains(&id) && listed.contains("0 failures in a row"), "{listed}");
    drop(running);
}

on_both!(a_dead_or_slow_receiver_holds_up_no_other_webhook);
async fn a_dead_or_slow_receiver_holds_up_no_other_webhook() {
    let t = TestApp::new().await;
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("http://{}/gone", dead.local_addr().unwrap());
    drop(dead);
    let slow = Receiver::start(|_| (200, Duration::from_secs(30)));
    let healthy = Receiver::start(ok);
    add(&t, &dead_url, &[]);
    add(&t, &slow.url(), &[]);
    add(&t, &healthy.url(), &[]);
    let running = deliveries(&t, quick());
    let started = Instant::now();
    for title in ["A", "B", "C"] {
        t.module(title).await;
    }
    let writes = started.elapsed();
    until("the healthy receiver's three", || healthy.got().len() == 3).await;
    assert!(started.elapsed() < Duration::from_secs(5), "the healthy webhook waited {:?}", started.elapsed());
    assert!(writes < Duration::from_secs(2), "writes took {writes:?}");
    until("both failures recorded", || {
        let (_, listed, _) = webhook(&t, &["list"]);
        listed.contains("cannot connect") && listed.contains("no answer within 1 s")
    })
    .await;
    drop(running);
}

on_both!(a_webhook_failing_for_long_is_marked_failing_until_resumed);
async fn a_webhook_failing_for_long_is_marked_failing_until_resumed() {
    let t = TestApp::new().await;
    let r = Receiver::start(|_| (503, Duration::ZERO));
    let (id, _) = add(&t, &r.url(), &[]);
    let running = deliveries(&t, Settings { give_up_after: Duration::from_millis(500), ..quick() });
    t.module("Never taken").await;
    until("the webhook marked failing", || webhook(&t, &["list"]).1.contains("FAILING")).await;
    // No more attempts once it is failing.
    let tried = r.got().len();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(r.got().len(), tried);
    r.behave(ok);
    let (ok, _, err) = webhook(&t, &["resume", &id]);
    assert!(ok, "{err}");
    until("the revision delivered after resume", || r.got().len() > tried).await;
    until("active again", || webhook(&t, &["list"]).1.contains("state: active")).await;
    drop(running);
}

on_both!(two_servers_deliver_one_webhook_one_request_at_a_time_in_order);
async fn two_servers_deliver_one_webhook_one_request_at_a_time_in_order() {
    let t = TestApp::new().await;
    let replica = t.replica(Duration::from_secs(5)).await;
    let r = Receiver::start(|_| (200, Duration::from_millis(15)));
    add(&t, &r.url(), &[]);
    let (one, two) = (deliveries(&t, quick()), deliveries(&replica, quick()));
    for n in 0..20 {
        if n % 2 == 0 { &t } else { &replica }.module(&format!("Module {n}")).await;
    }
    until("twenty deliveries", || r.got().len() >= 20).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let got = r.got();
    assert_eq!(got.len(), 20, "each exactly once");
    let places = cursors(&got);
    assert!(places.windows(2).all(|w| w[0] < w[1]), "{places:?}");
    assert!(!r.overlapped.load(Ordering::SeqCst), "two requests of one webhook were in flight at once");
    drop((one, two));
}

on_both!(the_command_checks_what_it_is_given_and_tests_a_receiver);
async fn the_command_checks_what_it_is_given_and_tests_a_receiver() {
    let t = TestApp::new().await;
    for (args, says) in [
        (vec!["add", "--url", "ftp://lms.example/x"], "http:// or https://"),
        (vec!["add", "--url", "https://user:pw@lms.example/x"], "password"),
        (vec!["add", "--url", "http://lms.example/x", "--types", "lessons"], "not a type"),
        (vec!["add", "--url", "http://lms.example/x", "--actions", "insert"], "not an action"),
        (vec!["remove", "0190a6e4-0000-7000-8000-000000000000"], "no webhook"),
        (vec!["resume", "nothing"], "no webhook"),
        (vec!["test", "nothing"], "no webhook"),
    ] {
        let (ok, _, err) = webhook(&t, &args);
        assert!(!ok && err.contains(says), "{args:?}: {err}");
    }
    let r = Receiver::start(ok);
    let (id, secret) = add(&t, &r.url(), &[]);
    let (ok, out, err) = webhook(&t, &["test", &id]);
    assert!(ok && out.contains("answered 204"), "{out}{err}");
    let got = r.got();
    assert_eq!(got[0].body["meta"]["test"], true);
    let timestamp: i64 = got[0].header("webhook-timestamp").parse().unwrap();
    let signed = coursed::webhooks::sign(&secret, got[0].header("webhook-id"), timestamp, &got[0].raw).unwrap();
    assert_eq!(got[0].header("webhook-signature"), signed);
    r.behave(|_| (410, Duration::ZERO));
    let (ok, _, err) = webhook(&t, &["test", &id]);
    assert!(!ok && err.contains("answered 410"), "{err}");
    let (ok, _, err) = webhook(&t, &["remove", &id]);
    assert!(ok, "{err}");
    assert!(webhook(&t, &["list"]).1.contains("no webhooks"));
}

on_both!(a_stopped_server_gives_its_leases_up_and_another_goes_on_at_once);
async fn a_stopped_server_gives_its_leases_up_and_another_goes_on_at_once() {
    let t = TestApp::new().await;
    let replica = t.replica(Duration::from_secs(5)).await;
    let r = Receiver::start(|_| (200, Duration::from_millis(5)));
    add(&t, &r.url(), &[]);
    // A long lease: only giving it up lets the other server take over within the test.
    let first = deliveries(&t, Settings { lease: Duration::from_secs(120), ..quick() });
    t.module("Delivered by the first").await;
    until("the first delivery", || r.got().len() == 1).await;
    drop(first);
    let _second = deliveries(&replica, Settings { lease: Duration::from_secs(120), ..quick() });
    let started = Instant::now();
    replica.module("Delivered by the second").await;
    until("the second delivery", || r.got().len() == 2).await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let places = cursors(&r.got());
    assert!(places[0] < places[1]);
}

on_both!(revisions_pruned_before_their_delivery_are_passed_over);
async fn revisions_pruned_before_their_delivery_are_passed_over() {
    let t = TestApp::new().await;
    let r = Receiver::start(|_| (503, Duration::ZERO));
    let (id, _) = add(&t, &r.url(), &[]);
    let running = deliveries(&t, quick());
    t.module("Pruned before it was taken").await;
    until("a failed attempt", || !r.got().is_empty()).await;
    drop(running);
    let prune = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["history", "prune", "--before", "2999-01-01", "--database", &t.database])
        .output()
        .unwrap();
    assert!(prune.status.success(), "{}", String::from_utf8_lossy(&prune.stderr));
    let tried = r.got().len();
    r.behave(ok);
    assert!(webhook(&t, &["resume", &id]).0);
    let _running = deliveries(&t, quick());
    t.module("Written after the prune").await;
    until("the next revision", || r.got().len() > tried).await;
    let got = r.got();
    let titles: Vec<&Value> =
        got[tried..].iter().map(|g| &g.body["data"]["attributes"]["changes"]["title"]["after"]).collect();
    assert_eq!(titles, [&json!("Written after the prune")], "the pruned revision is not sent");
}

on_both!(while_requests_want_every_core_deliveries_wait_for_up_to_their_limit);
async fn while_requests_want_every_core_deliveries_wait_for_up_to_their_limit() {
    let t = TestApp::new().await;
    let r = Receiver::start(ok);
    add(&t, &r.url(), &[]);
    let saturation = Saturation::given(false);
    let running = deliveries(&t, Settings { saturation: saturation.clone(), ..quick() });
    t.module("Delivered at once").await;
    until("the first delivery", || r.got().len() == 1).await;

    // Saturated: nothing is sent, however long it lasts (up to the limit, here 60 s)...
    saturation.set(true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    t.module("Waits").await;
    t.module("Waits too").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(r.got().len(), 1, "sent while requests wanted every core");
    // ... and everything, in order, once requests leave some CPU time.
    saturation.set(false);
    until("the two that waited", || r.got().len() == 3).await;
    let titles: Vec<Value> =
        r.got().iter().map(|g| g.body["data"]["attributes"]["changes"]["title"]["after"].clone()).collect();
    assert_eq!(titles, [json!("Delivered at once"), json!("Waits"), json!("Waits too")]);
    drop(running);

    // A saturation that outlasts the limit holds deliveries up no longer than that.
    let running = deliveries(
        &t,
        Settings { saturation: saturation.clone(), give_way_for: Duration::from_millis(1500), ..quick() },
    );
    saturation.set(true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    t.module("Sent after the limit").await;
    until("the delivery after the limit", || r.got().len() == 4).await;
    let waited = asked.elapsed();
    assert!(waited >= Duration::from_millis(1000), "sent after {waited:?}, while saturated for less than the limit");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    drop(running);
}
