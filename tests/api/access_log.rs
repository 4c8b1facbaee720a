//! The access log: one line per request with the route's template, never the raw path, the
//! query, the token or a body; on by default at `info`, written out when the server stops.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::helpers::{on_both, Engine, TestApp, TOKEN};
use crate::process::{new_subject, Starting};
use coursed::app::AccessLog;

/// A sink the test can read.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// The lines written so far, emptied.
    fn take(&self) -> Vec<String> {
        let bytes = std::mem::take(&mut *self.0.lock().unwrap());
        String::from_utf8(bytes).unwrap().lines().map(str::to_owned).collect()
    }
}

/// The `key=value` fields of an access line, after checking its shape.
#[track_caller]
fn fields(line: &str) -> Vec<(String, String)> {
    let (time, rest) = line.split_once(' ').unwrap();
    assert!(time.ends_with('Z') && time.len() == 24, "{line}");
    let rest = rest.strip_prefix("[INFO] access ").unwrap_or_else(|| panic!("not an access line: {line}"));
    let fields: Vec<(String, String)> =
        rest.split(' ').map(|f| f.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())).expect(line)).collect();
    let keys: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["method", "route", "status", "ms", "bytes", "caller"], "{line}");
    assert!(fields[3].1.parse::<f64>().is_ok_and(|ms| ms >= 0.0), "{line}");
    fields
}

on_both!(each_request_is_logged_with_its_route_template_and_the_token_name_never_the_token_or_ids);
async fn each_request_is_logged_with_its_route_template_and_the_token_name_never_the_token_or_ids() {
    let sink = Captured::default();
    let log = Arc::new(AccessLog::new(Box::new(sink.clone())));
    let t = TestApp::new().await.configured(|app| app.access_log = Some(log.clone()));
    let m = t.module("M").await;
    let s = t.subject("S", Some(&m)).await;
    log.flush();
    sink.take();

    let mut sent = Vec::new();
    for (method, path) in [
        ("GET", format!("/v1/subjects/{s}?include=module&fields[modules]=title")),
        ("GET", format!("/v1/modules/{m}/relationships/subjects")),
        ("HEAD", format!("/v1/subjects/{s}/chapters")),
        ("OPTIONS", "/v1/subjects".to_owned()),
        ("GET", format!("/v1/subjects/{s}/nothing")),
        ("GET", "/v1/nowhere".to_owned()),
    ] {
        let (status, _, body) = t.exchange(t.req(method, &path)).await;
        sent.push((status.as_u16(), body.len()));
    }
    // Health checks, which a load balancer sends every few seconds, are left out.
    for path in ["/healthz", "/readyz"] {
        assert_eq!(t.exchange(t.req("GET", path)).await.0, 200);
    }
    let secret_title = "A title only the body holds";
    let created = t
        .write("POST", "/v1/modules", json!({"data": {"type": "modules", "attributes": {"title": secret_title}}}))
        .await;
    created.assert_status(201);
    sent.push((201, created.body.to_string().len()));
    let (status, _, body) =
        t.exchange(t.req("GET", "/v1/modules").header("authorization", "Bearer not-the-token")).await;
    sent.push((status.as_u16(), body.len()));
    // A token kept in the database is logged by its own name.
    let database = t.database.clone();
    let named =
        tokio::task::spawn_blocking(move || crate::tokens::create(&database, "teacher-laptop", "read")).await.unwrap();
    let (status, _, body) =
        t.exchange(t.req("GET", &format!("/v1/modules/{m}")).header("authorization", format!("Bearer {named}"))).await;
    sent.push((status.as_u16(), body.len()));
    log.flush();

    let lines = sink.take();
    let expected = [
        ("GET", "/v1/subjects/{id}", 200, "config"),
        ("GET", "/v1/modules/{id}/relationships/subjects", 200, "config"),
        ("HEAD", "/v1/subjects/{id}/chapters", 200, "config"),
        ("OPTIONS", "/v1/subjects", 204, "-"),
        ("GET", "-", 404, "config"),
        ("GET", "-", 404, "config"),
        ("POST", "/v1/modules", 201, "config"),
        ("GET", "-", 401, "-"),
        ("GET", "/v1/modules/{id}", 200, "teacher-laptop"),
    ];
    assert_eq!(lines.len(), expected.len(), "{lines:#?}");
    for ((line, (method, route, status, caller)), (sent_status, sent_bytes)) in lines.iter().zip(expected).zip(sent) {
        let f = fields(line);
        assert_eq!((f[0].1.as_str(), f[1].1.as_str(), f[5].1.as_str()), (method, route, caller), "{line}");
        assert_eq!(f[2].1, status.to_string(), "{line}");
        assert_eq!(sent_status, status, "{line}");
        if method != "HEAD" {
            assert_eq!(f[4].1, sent_bytes.to_string(), "{line}");
        } else {
            assert_eq!(f[4].1, "0", "{line}");
        }
    }
    let all = lines.join("\n");
    let created_id = created.id();
    for secret in [TOKEN, "not-the-token", &named, &s, &m, &created_id, "include", "fields", secret_title, "nowhere"] {
        assert!(!all.contains(secret), "{secret:?} in the access log:\n{all}");
    }
}

/// Starts the binary on a fresh database of the running test's engine with `args`, makes a
/// few requests, stops it with SIGTERM and returns what it wrote on stderr.
fn stderr_of_a_session(args: &[&str]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let database = Engine::current().fresh_database(dir.path());
    let args = [&["--database", &database, "--token", "binary-token"], args].concat();
    let mut starting = Starting::spawn(&args);
    let stderr = std::mem::replace(&mut starting.stderr, std::sync::mpsc::channel().1);
    let server = starting.ready().unwrap();
    for path in ["/healthz", "/readyz"] {
        assert_eq!(server.call("GET", path, "", None).0, 200);
    }
    let (status, body) = server.call("POST", "/v1/subjects", "binary-token", Some(&new_subject("Logged")));
    assert_eq!(status, 201);
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(server.call("GET", &format!("/v1/subjects/{id}"), "binary-token", None).0, 200);
    assert_eq!(server.call("GET", "/v1/subjects", "wrong", None).0, 401);
    server.signal("-TERM");
    assert!(server.wait(Duration::from_secs(15)).success());
    let lines: Vec<String> = std::iter::from_fn(|| stderr.recv_timeout(Duration::from_secs(5)).ok()).collect();
    (lines.join("\n"), id)
}

on_both!(
    the_binary_logs_every_request_but_health_checks_by_default_at_info_down_to_the_last_at_a_stop_and_none_when_off
);
async fn the_binary_logs_every_request_but_health_checks_by_default_at_info_down_to_the_last_at_a_stop_and_none_when_off(
) {
    let (stderr, id) = stderr_of_a_session(&["--log-level", "info"]);
    let access: Vec<&str> = stderr.lines().filter(|l| l.contains(" access ")).collect();
    assert_eq!(access.len(), 3, "{stderr}");
    let routes: Vec<(String, String, String)> =
        access.iter().map(|l| fields(l)).map(|f| (f[1].1.clone(), f[2].1.clone(), f[5].1.clone())).collect();
    let expected = [("/v1/subjects", "201", "config"), ("/v1/subjects/{id}", "200", "config"), ("-", "401", "-")];
    for (got, want) in routes.iter().zip(expected) {
        assert_eq!((got.0.as_str(), got.1.as_str(), got.2.as_str()), want, "{stderr}");
    }
    assert!(!stderr.contains("binary-token") && !stderr.contains(&id), "{stderr}");

    // `--access-log all` logs the health checks too.
    let (stderr, _) = stderr_of_a_session(&["--log-level", "info", "--access-log", "all"]);
    let routes: Vec<String> =
        stderr.lines().filter(|l| l.contains(" access ")).map(|l| fields(l)[1].1.clone()).collect();
    assert_eq!(routes, ["/healthz", "/readyz", "/v1/subjects", "/v1/subjects/{id}", "-"], "{stderr}");

    for quiet in [&["--log-level", "info", "--access-log", "off"][..], &["--log-level", "warn"]] {
        let (stderr, _) = stderr_of_a_session(quiet);
        assert!(!stderr.contains(" access "), "{quiet:?}: {stderr}");
    }
}
