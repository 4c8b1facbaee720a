//! The change feed, live: `GET /v1/revisions/stream` as server-sent events from the real server
//! (both engines), read by a plain HTTP/1.1 client that decodes the chunked body.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::engines::on_both;
use crate::helpers::{TestApp, TOKEN};

/// An open stream: the socket and what was read of its body, decoded.
struct Stream {
    socket: TcpStream,
    /// The body so far, chunked encoding removed.
    text: String,
    raw: Vec<u8>,
    pub head: String,
}

/// One event as sent.
#[derive(Debug)]
struct Event {
    id: i64,
    data: Value,
}

impl Stream {
    fn open(addr: SocketAddr, query: &str, last_event_id: Option<i64>) -> Stream {
        let mut socket = TcpStream::connect(addr).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let resume = last_event_id.map(|id| format!("Last-Event-ID: {id}\r\n")).unwrap_or_default();
        let req = format!(
            "GET /v1/revisions/stream{query} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\
             Accept: text/event-stream\r\n{resume}\r\n"
        );
        socket.write_all(req.as_bytes()).unwrap();
        let mut s = Stream { socket, text: String::new(), raw: Vec::new(), head: String::new() };
        s.read_until(|s| !s.head.is_empty(), Duration::from_secs(10));
        s
    }

    /// Reads until `done` holds or `limit` passes; false when it did not.
    fn read_until(&mut self, done: impl Fn(&Stream) -> bool, limit: Duration) -> bool {
        let started = Instant::now();
        let mut buf = [0u8; 8192];
        while !done(self) {
            if started.elapsed() > limit {
                return false;
            }
            match self.socket.read(&mut buf) {
                Ok(0) => return done(self),
                Ok(n) => {
                    self.raw.extend_from_slice(&buf[..n]);
                    self.decode();
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return done(self),
            }
        }
        true
    }

    /// Moves complete chunks from `raw` into `text`.
    fn decode(&mut self) {
        if self.head.is_empty() {
            let Some(end) = find(&self.raw, b"\r\n\r\n") else { return };
            self.head = String::from_utf8_lossy(&self.raw[..end]).into_owned();
            self.raw.drain(..end + 4);
        }
        loop {
            let Some(line) = find(&self.raw, b"\r\n") else { return };
            let size = usize::from_str_radix(std::str::from_utf8(&self.raw[..line]).unwrap().trim(), 16).unwrap();
            if self.raw.len() < line + 2 + size + 2 {
                return;
            }
            self.text.push_str(std::str::from_utf8(&self.raw[line + 2..line + 2 + size]).unwrap());
            self.raw.drain(..line + 2 + size + 2);
        }
    }

    fn events(&self) -> Vec<Event> {
        self.text
            .split("\n\n")
            .filter(|block| block.contains("event: revision"))
            .map(|block| {
                let field = |name: &str| {
                    block.lines().find_map(|l| l.strip_prefix(name)).unwrap_or_else(|| panic!("no {name} in {block:?}"))
                };
                Event { id: field("id: ").parse().unwrap(), data: serde_json::from_str(field("data: ")).unwrap() }
            })
            .collect()
    }

    /// Waits for `n` events in all.
    fn wait_events(&mut self, n: usize, limit: Duration) -> Vec<Event> {
        let got = self.read_until(|s| s.events().len() >= n, limit);
        assert!(got, "{} of {n} events within {limit:?}; body so far: {:?}", self.events().len(), self.text);
        self.events()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The server of `t` on port 0, its stop, and its task.
async fn serve(t: &TestApp) -> (SocketAddr, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(coursed::serve(listener, t.app.clone(), async move {
        let _ = stopped.await;
    }));
    (addr, stop, task)
}

/// Runs blocking client code off the async threads.
async fn client<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

on_both!(each_new_revision_arrives_with_its_cursor_and_a_reconnect_resumes_without_a_gap);
async fn each_new_revision_arrives_with_its_cursor_and_a_reconnect_resumes_without_a_gap() {
    let t = TestApp::new().await;
    let earlier = t.module("Before the stream").await;
    let (addr, stop, task) = serve(&t).await;
    let mut s = client(move || Stream::open(addr, "", None)).await;
    assert!(s.head.starts_with("HTTP/1.1 200"), "{}", s.head);
    let head = s.head.to_ascii_lowercase();
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(head.contains("cache-control: no-store"), "{head}");
    // Without a cursor: only what commits after it opened.
    let m = t.module("After").await;
    let (s, events) = client(move || {
        let e = s.wait_events(1, Duration::from_secs(5));
        (s, e)
    })
    .await;
    assert!(s.text.starts_with("retry: 1000\n\n"), "{:?}", s.text);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data["type"], "revisions");
    assert_eq!(events[0].data["relationships"]["resource"]["data"]["id"], m.as_str());
    assert_eq!(events[0].data["meta"]["cursor"], events[0].id.to_string());
    let first = events[0].id;
    // The stream goes away; writes go on; a reconnect with Last-Event-ID gets each of them.
    drop(s.socket);
    let mut written = Vec::new();
    for i in 0..3 {
        written.push(t.subject(&format!("While away {i}"), Some(&m)).await);
    }
    let mut s = client(move || Stream::open(addr, "", Some(first))).await;
    let later = t.chapter("Live", &written[0], 1).await;
    let events = client(move || s.wait_events(4, Duration::from_secs(5))).await;
    let ids: Vec<&str> =
        events.iter().map(|e| e.data["relationships"]["resource"]["data"]["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [written[0].as_str(), &written[1], &written[2], &later]);
    let cursors: Vec<i64> = events.iter().map(|e| e.id).collect();
    assert_eq!(cursors, [first + 1, first + 2, first + 3, first + 4], "consecutive, none missed");
    // ?after=0 replays from the start; filter[type] keeps a type.
    let mut all = client(move || Stream::open(addr, "?after=0&filter[type]=modules", None)).await;
    let events = client(move || all.wait_events(2, Duration::from_secs(5))).await;
    let ids: Vec<&str> =
        events.iter().map(|e| e.data["relationships"]["resource"]["data"]["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [earlier.as_str(), &m]);
    // What the stream refuses.
    let bad = client(move || Stream::open(addr, "?after=x", None)).await;
    assert!(bad.head.starts_with("HTTP/1.1 400"), "{}", bad.head);
    let bad = client(move || Stream::open(addr, "?sort=id", None)).await;
    assert!(bad.head.starts_with("HTTP/1.1 400"), "{}", bad.head);
    // Stopping the server ends its streams at once instead of waiting out the drain.
    let mut open = client(move || Stream::open(addr, "", None)).await;
    let started = Instant::now();
    let _ = stop.send(());
    task.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "stopped in {:?}", started.elapsed());
    let ended = client(move || open.read_until(|_| false, Duration::from_secs(2))).await;
    assert!(!ended);
}

on_both!(a_quiet_stream_gets_heartbeats_outlives_the_idle_limit_and_streams_are_capped);
async fn a_quiet_stream_gets_heartbeats_outlives_the_idle_limit_and_streams_are_capped() {
    let t = TestApp::new().await.configured(|app| {
        let mut streams = coursed::app::Streams::new(1);
        streams.heartbeat = Duration::from_millis(200);
        app.streams = std::sync::Arc::new(streams);
        app.connections.idle_timeout = Duration::from_millis(500);
    });
    let (addr, stop, task) = serve(&t).await;
    let mut s = client(move || Stream::open(addr, "", None)).await;
    // Longer than the idle limit: heartbeats keep coming, the stream stays open.
    let (s2, beats) = client(move || {
        s.read_until(|_| false, Duration::from_millis(1500));
        let beats = s.text.matches(": \n\n").count();
        (s, beats)
    })
    .await;
    assert!(beats >= 3, "{beats} heartbeats: {:?}", s2.text);
    let mut s = s2;
    // Past the cap: 503 with Retry-After.
    let second = client(move || Stream::open(addr, "", None)).await;
    assert!(second.head.starts_with("HTTP/1.1 503"), "{}", second.head);
    assert!(second.head.to_ascii_lowercase().contains("retry-after: 5"), "{}", second.head);
    // The open one still delivers.
    let m = t.module("Still live").await;
    let events = client(move || s.wait_events(1, Duration::from_secs(5))).await;
    assert_eq!(events[0].data["relationships"]["resource"]["data"]["id"], m.as_str());
    let _ = stop.send(());
    task.await.unwrap();
}

/// A change made through one replica reaches a stream of another within a second.
#[tokio::test]
async fn a_write_on_one_replica_reaches_a_stream_on_another_within_a_second() {
    crate::engines::Engine::Postgres
        .run(async {
            let (a, b) = TestApp::pair().await;
            let (addr, stop, task) = serve(&b).await;
            let mut s = client(move || Stream::open(addr, "", None)).await;
            let started = Instant::now();
            let body = json!({"data": {"type": "modules", "attributes": {"title": "Through A"}}});
            let r = a.write("POST", "/v1/modules", body).await;
            r.assert_status(201);
            let id = r.id();
            let events = client(move || s.wait_events(1, Duration::from_secs(5))).await;
            let took = started.elapsed();
            assert_eq!(events[0].data["relationships"]["resource"]["data"]["id"], id.as_str());
            assert!(took < Duration::from_secs(1), "took {took:?}");
            let _ = stop.send(());
            task.await.unwrap();
        })
        .await
}

on_both!(a_filtered_stream_gets_heartbeats_while_other_types_change);
async fn a_filtered_stream_gets_heartbeats_while_other_types_change() {
    let t = TestApp::new().await.configured(|app| {
        let mut streams = coursed::app::Streams::new(4);
        streams.heartbeat = Duration::from_millis(300);
        app.streams = std::sync::Arc::new(streams);
    });
    let s = t.subject("Busy", None).await;
    let (addr, stop, task) = serve(&t).await;
    let mut stream = client(move || Stream::open(addr, "?filter[type]=modules", None)).await;
    // Chapters change all the time; the stream sends none of them, and still beats.
    let reading = tokio::task::spawn_blocking(move || {
        stream.read_until(|_| false, Duration::from_millis(1500));
        stream
    });
    let started = Instant::now();
    let mut i = 0;
    while started.elapsed() < Duration::from_millis(1500) {
        t.chapter(&format!("C{i}"), &s, i).await;
        i += 1;
    }
    let stream = reading.await.unwrap();
    assert!(i > 10, "{i} chapters written");
    assert!(stream.events().is_empty(), "{:?}", stream.text);
    let beats = stream.text.matches(": \n\n").count();
    assert!(beats >= 3, "{beats} heartbeats in 1.5 s at one per 0.3 s while other types changed");
    let _ = stop.send(());
    task.await.unwrap();
}
