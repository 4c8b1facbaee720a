//! Slow and idle clients against the real server on port 0: a head that comes too slowly, an
//! idle keep-alive connection, a slow body, and the cap on open connections, each with its
//! limits set small; and the keep-alive client that none of it may disturb.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{on_both, TestApp, TOKEN};
use coursed::server::Limits;

/// `coursed::serve` in this test's runtime; stopped when dropped.
struct Running {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

async fn serve(t: TestApp, limits: Limits, body_timeout: Duration) -> (TestApp, Running) {
    let t = t.configured(|app| {
        app.connections = limits;
        app.body_timeout = body_timeout;
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(coursed::serve(listener, t.app.clone(), async move {
        let _ = stopped.await;
    }));
    (t, Running { addr, stop: Some(stop), task })
}

/// Runs `client` (blocking I/O, on a thread of its own) against the server of `t` with these
/// limits, then stops the server.
async fn against(t: TestApp, limits: Limits, body_timeout: Duration, client: impl FnOnce(SocketAddr) + Send + 'static) {
    let (_t, server) = serve(t, limits, body_timeout).await;
    let addr = server.addr;
    tokio::task::spawn_blocking(move || client(addr)).await.unwrap();
    server.stop().await;
}

impl Running {
    /// Stops the server; returns how long it took to finish.
    async fn stop(mut self) -> Duration {
        let started = Instant::now();
        let _ = self.stop.take().unwrap().send(());
        (&mut self.task).await.unwrap();
        started.elapsed()
    }
}

const SECOND: Duration = Duration::from_secs(1);

fn limits(header: u64, idle: u64, max: usize) -> Limits {
    Limits {
        header_timeout: Duration::from_millis(header),
        idle_timeout: Duration::from_millis(idle),
        max_connections: max,
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn head(method: &str, path: &str, extra: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\
         Accept: application/vnd.api+json\r\n{extra}\r\n"
    )
}

/// Reads one response (head and `Content-Length` body): status, head, body.
fn response(s: &mut TcpStream) -> (u16, String, String) {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).expect("a response"), 1, "closed before a response: {raw:?}");
        raw.push(byte[0]);
    }
    let head = String::from_utf8(raw).unwrap();
    let length = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0);
    let mut body = vec![0; length];
    s.read_exact(&mut body).unwrap();
    let status = head[9..12].parse().unwrap();
    (status, head, String::from_utf8(body).unwrap())
}

fn get(s: &mut TcpStream, path: &str) -> u16 {
    s.write_all(head("GET", path, "").as_bytes()).unwrap();
    response(s).0
}

/// How long until the server closes `s` (reading whatever comes first).
fn closed_after(s: &mut TcpStream, since: Instant) -> Duration {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return since.elapsed(),
            Ok(_) => {}
        }
    }
}

/// Whether `s` is still open: nothing to read, no end, within a short wait.
fn still_open(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let open = matches!(s.read(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    open
}

#[track_caller]
fn assert_between(took: Duration, low: Duration, high: Duration) {
    assert!(took >= low && took <= high, "took {took:?}, expected between {low:?} and {high:?}");
}

on_both!(a_client_that_sends_its_head_too_slowly_is_disconnected_at_the_header_timeout);
async fn a_client_that_sends_its_head_too_slowly_is_disconnected_at_the_header_timeout() {
    against(TestApp::new().await, limits(400, 10_000, 100), SECOND, |addr| {
        // One header line every 100 ms: the head is never complete.
        let mut slow = connect(addr);
        let started = Instant::now();
        let mut dripping = slow.try_clone().unwrap();
        let drip = std::thread::spawn(move || {
            let _ = dripping.write_all(b"GET /v1/subjects HTTP/1.1\r\nHost: localhost\r\n");
            for i in 0..100 {
                std::thread::sleep(Duration::from_millis(100));
                if dripping.write_all(format!("X-Slow-{i}: 1\r\n").as_bytes()).is_err() {
                    break;
                }
            }
        });
        assert_between(closed_after(&mut slow, started), Duration::from_millis(380), 2 * SECOND);
        drip.join().unwrap();

        // A connection that says nothing, one that opens HTTP/2 and makes no request, and one
        // that sends part of a second head after a first request.
        let mut silent = connect(addr);
        let mut h2 = connect(addr);
        h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").unwrap();
        let mut second = connect(addr);
        assert_eq!(get(&mut second, "/v1/subjects"), 200);
        second.write_all(b"GET /v1/subjects HTTP/1.1\r\n").unwrap();
        let started = Instant::now();
        for s in [&mut silent, &mut h2, &mut second] {
            assert_between(closed_after(s, started), Duration::from_millis(350), 2 * SECOND);
        }
    })
    .await;
}

on_both!(an_idle_keep_alive_connection_is_closed_at_the_idle_timeout_and_does_not_hold_up_a_stop);
async fn an_idle_keep_alive_connection_is_closed_at_the_idle_timeout_and_does_not_hold_up_a_stop() {
    let (_t, server) = serve(TestApp::new().await, limits(10_000, 400, 100), SECOND).await;
    let addr = server.addr;
    let mut kept = tokio::task::spawn_blocking(move || {
        let mut idle = connect(addr);
        assert_eq!(get(&mut idle, "/v1/subjects"), 200);
        let answered = Instant::now();
        assert_between(closed_after(&mut idle, answered), Duration::from_millis(380), 2 * SECOND);
        // Another one, left open while the server stops.
        let mut kept = connect(addr);
        assert_eq!(get(&mut kept, "/v1/modules"), 200);
        kept
    })
    .await
    .unwrap();
    assert!(server.stop().await < SECOND, "an idle connection held up the stop");
    let mut buf = [0u8; 16];
    assert!(matches!(kept.read(&mut buf), Ok(0) | Err(_)), "the idle connection is closed at the stop");
}

on_both!(a_keep_alive_client_and_a_slow_upload_are_not_cut_by_the_header_or_idle_timeout);
async fn a_keep_alive_client_and_a_slow_upload_are_not_cut_by_the_header_or_idle_timeout() {
    let t = TestApp::new().await;
    let subject = t.subject("S", None).await;
    against(t, limits(200, 300, 100), 5 * SECOND, move |addr| {
        // Eight requests 100 ms apart on one connection: longer in all than either timeout.
        let mut client = connect(addr);
        for _ in 0..8 {
            assert_eq!(get(&mut client, &format!("/v1/subjects/{subject}")), 200);
            std::thread::sleep(Duration::from_millis(100));
        }
        // A body sent over 800 ms, in pieces 100 ms apart: the request is in flight all along.
        let body = json!({"data": {"type": "modules", "attributes": {"title": "Slow"}}}).to_string();
        let extra = format!("Content-Type: application/vnd.api+json\r\nContent-Length: {}\r\n", body.len());
        client.write_all(head("POST", "/v1/modules", &extra).as_bytes()).unwrap();
        for piece in body.as_bytes().chunks(body.len().div_ceil(8)) {
            std::thread::sleep(Duration::from_millis(100));
            client.write_all(piece).unwrap();
        }
        let (status, _, answer) = response(&mut client);
        assert_eq!(status, 201, "{answer}");
        assert_eq!(get(&mut client, "/v1/modules"), 200);
    })
    .await;
}

on_both!(a_body_slower_than_the_body_timeout_is_answered_408_and_its_connection_closed);
async fn a_body_slower_than_the_body_timeout_is_answered_408_and_its_connection_closed() {
    against(TestApp::new().await, limits(10_000, 10_000, 100), Duration::from_millis(300), |addr| {
        let mut client = connect(addr);
        let extra = "Content-Type: application/vnd.api+json\r\nContent-Length: 1000\r\n";
        client.write_all(head("POST", "/v1/modules", extra).as_bytes()).unwrap();
        client.write_all(br#"{"data": {"#).unwrap();
        let started = Instant::now();
        let (status, head, body) = response(&mut client);
        assert_between(started.elapsed(), Duration::from_millis(280), 2 * SECOND);
        assert_eq!(status, 408, "{body}");
        assert!(head.to_ascii_lowercase().contains("connection: close"), "{head}");
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        crate::helpers::assert_valid_jsonapi(&doc);
        assert_eq!(doc["errors"][0]["status"], "408");
        assert!(closed_after(&mut client, started) < 3 * SECOND);
    })
    .await;
}

on_both!(at_the_cap_a_new_client_is_served_by_closing_the_oldest_connection_that_serves_no_request);
async fn at_the_cap_a_new_client_is_served_by_closing_the_oldest_connection_that_serves_no_request() {
    // Timeouts far beyond the test: only the cap makes room.
    against(TestApp::new().await, limits(60_000, 60_000, 3), 60 * SECOND, |addr| {
        // Three connections, each answered once (so surely accepted), in this order: one idle,
        // two that then send part of a head and stall.
        let mut idle = connect(addr);
        assert_eq!(get(&mut idle, "/v1/subjects"), 200);
        let mut slow: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = connect(addr);
                assert_eq!(get(&mut s, "/v1/subjects"), 200);
                s.write_all(b"GET /v1/subjects HTTP/1.1\r\nHost: localhost\r\n").unwrap();
                s
            })
            .collect();
        // A new client is served at once; the oldest of them made room.
        let started = Instant::now();
        let mut fresh = connect(addr);
        assert_eq!(get(&mut fresh, "/v1/modules"), 200);
        assert!(started.elapsed() < 2 * SECOND);
        assert!(closed_after(&mut idle, started) < 2 * SECOND);
        // The next new one takes the place of the next oldest.
        let mut another = connect(addr);
        assert_eq!(get(&mut another, "/v1/modules"), 200);
        assert!(closed_after(&mut slow[0], started) < 2 * SECOND);
        assert!(still_open(&mut slow[1]) && still_open(&mut fresh) && still_open(&mut another));
    })
    .await;
}

on_both!(at_the_cap_a_connection_that_never_made_a_request_makes_room_before_an_idle_keep_alive_client);
async fn at_the_cap_a_connection_that_never_made_a_request_makes_room_before_an_idle_keep_alive_client() {
    against(TestApp::new().await, limits(60_000, 60_000, 2), 60 * SECOND, |addr| {
        // A client served once and idle since, then a connection that only ever sends part of a
        // head: it waited less, but it never asked anything.
        let mut client = connect(addr);
        assert_eq!(get(&mut client, "/v1/subjects"), 200);
        let mut silent = connect(addr);
        silent.write_all(b"GET /v1/subjects HTTP/1.1\r\n").unwrap();
        // Past the 20 ms in which a new connection is not closed to make room.
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let mut fresh = connect(addr);
        assert_eq!(get(&mut fresh, "/v1/modules"), 200);
        assert!(closed_after(&mut silent, started) < 2 * SECOND);
        assert_eq!(get(&mut client, "/v1/subjects"), 200, "the keep-alive client kept its place");
    })
    .await;
}

on_both!(when_every_connection_serves_a_request_a_new_one_waits_for_the_first_answered);
async fn when_every_connection_serves_a_request_a_new_one_waits_for_the_first_answered() {
    against(TestApp::new().await, limits(60_000, 60_000, 2), 60 * SECOND, |addr| {
        // Two uploads in flight (the server asked for their bodies: 100 Continue).
        let body = json!({"data": {"type": "modules", "attributes": {"title": "Upload"}}}).to_string();
        let extra = format!(
            "Content-Type: application/vnd.api+json\r\nContent-Length: {}\r\nExpect: 100-continue\r\n",
            body.len()
        );
        let mut uploads: Vec<TcpStream> = (0..2)
            .map(|_| {
                let mut s = connect(addr);
                s.write_all(head("POST", "/v1/modules", &extra).as_bytes()).unwrap();
                assert_eq!(response(&mut s).0, 100);
                s
            })
            .collect();
        let mut waiting = connect(addr);
        waiting.write_all(head("GET", "/v1/modules", "").as_bytes()).unwrap();
        // The first upload answered, its connection makes room for the one waiting.
        uploads[0].write_all(body.as_bytes()).unwrap();
        assert_eq!(response(&mut uploads[0]).0, 201);
        assert_eq!(response(&mut waiting).0, 200);
        assert!(closed_after(&mut uploads[0], Instant::now()) < 2 * SECOND);
        // The other was never cut.
        uploads[1].write_all(body.as_bytes()).unwrap();
        assert_eq!(response(&mut uploads[1]).0, 201);
    })
    .await;
}

on_both!(a_client_that_stops_reading_its_responses_is_disconnected_at_the_idle_timeout);
async fn a_client_that_stops_reading_its_responses_is_disconnected_at_the_idle_timeout() {
    against(TestApp::new().await, limits(10_000, 300, 100), SECOND, |addr| {
        // 300 pipelined requests for the OpenAPI document (about 200 KB each): far more than the
        // sockets' buffers hold, so writing stalls while the client reads nothing.
        let mut client = connect(addr);
        let pipelined = "GET /v1/openapi.json HTTP/1.1\r\nHost: localhost\r\n\r\n".repeat(300);
        client.write_all(pipelined.as_bytes()).unwrap();
        let document = 150_000;
        std::thread::sleep(Duration::from_secs(2));
        // Reading at last: the server gave up long before the 300th answer.
        let (mut received, mut buf) = (0, vec![0u8; 1 << 16]);
        while let Ok(n @ 1..) = client.read(&mut buf) {
            received += n;
        }
        assert!(received < 200 * document, "received {received} bytes: every answer was kept waiting");
    })
    .await;
}
