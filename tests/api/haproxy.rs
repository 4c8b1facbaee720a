//! The example HAProxy front (`config/haproxy.cfg`): HAProxy accepts it, sends requests to the
//! replicas that are ready, and answers a JSON:API 503 with `Retry-After` when none is. Runs
//! where HAProxy is installed (CI installs it; COURSED_REQUIRE_HAPROXY=1 fails instead of
//! skipping).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::assert_valid_jsonapi;
use crate::process::{db_path, Server};

const TOKEN: &str = "4b8e2f9a1c7d3e6f0a5b9c2d8e1f4a7b";

/// The haproxy binary, if any.
fn haproxy() -> Option<String> {
    let found = ["haproxy", "/usr/sbin/haproxy"]
        .into_iter()
        .find(|p| Command::new(p).arg("-v").output().is_ok_and(|o| o.status.success()));
    if found.is_none() {
        assert!(std::env::var("COURSED_REQUIRE_HAPROXY").is_err(), "haproxy is required but not installed");
        eprintln!("no haproxy: the HAProxy example is not tested");
    }
    found.map(str::to_owned)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// HAProxy running the example, killed when dropped.
struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One GET through the proxy: status, headers (lower case) and body.
fn get(port: u16, path: &str) -> Option<(u16, String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: courses.example\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, head.to_ascii_lowercase(), body.to_owned()))
}

fn until(port: u16, status: u16) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match get(port, "/v1/subjects") {
            Some((got, head, body)) if got == status => return (head, body),
            other => assert!(Instant::now() < deadline, "never {status}: last {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_example_haproxy_front_serves_ready_replicas_and_a_json_api_503_when_none_is() {
    let Some(haproxy) = haproxy() else { return };
    let dir = tempfile::tempdir().unwrap();
    let errorfile = concat!(env!("CARGO_MANIFEST_DIR"), "/config/haproxy-503.http");
    let server = Server::start(&["--database", &db_path(dir.path()), "--token", TOKEN]);
    let front = free_port();
    let example = include_str!("../../config/haproxy.cfg");
    for expected in ["/etc/haproxy/errors/coursed-503.http", "bind :8080", "127.0.0.1:8081", "log /dev/log local0"] {
        assert!(example.contains(expected), "the example changed: update this test ({expected})");
    }
    // Here: the error file from the repository, ports of the test's own, no syslog.
    let config = example
        .replace("/etc/haproxy/errors/coursed-503.http", errorfile)
        .replace("bind :8080", &format!("bind 127.0.0.1:{front}"))
        .replace("127.0.0.1:8081", &server.addr)
        .replace("127.0.0.1:8082", &format!("127.0.0.1:{}", free_port()))
        .replace("127.0.0.1:8083", &format!("127.0.0.1:{}", free_port()))
        .replace("log /dev/log local0", "");
    let cfg = dir.path().join("haproxy.cfg");
    std::fs::write(&cfg, config).unwrap();
    let check = Command::new(&haproxy).args(["-c", "-f", cfg.to_str().unwrap()]).output().unwrap();
    assert!(check.status.success(), "haproxy -c: {}", String::from_utf8_lossy(&check.stderr));

    let _proxy = Proxy(
        Command::new(&haproxy)
            .args(["-f", cfg.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    until(front, 200);
    // Every replica out (as when their database is down): HAProxy's own 503 is a JSON:API one.
    drop(server);
    let (head, body) = until(front, 503);
    assert!(head.contains("content-type: application/vnd.api+json\r\n"), "{head}");
    assert!(head.contains("retry-after: "), "{head}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_valid_jsonapi(&doc);
    assert_eq!(doc["errors"][0]["status"], "503", "{doc}");
}
