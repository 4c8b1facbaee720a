//! Slow and idle clients against the real server on port 0: a head that comes too slowly, an
//! idle keep-alive connection, a slow body, and the cap on open connections, each with its
//! limits set small; and the keep-alive client that none of it may disturb. The clients and
//! their checks are here; the deadlines' tests in `timeouts.rs`, the cap's in `cap.rs`, what
//! cannot be parsed and which host a request names in `malformed.rs`.

mod cap;
mod h2;
mod malformed;
mod proxy;
mod timeouts;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{on_both, TestApp, TOKEN};
use coursed::app::Limits;

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
