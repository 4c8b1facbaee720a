//! `GET /metrics` on `--metrics-listen`, against the real binary on each engine: the figures
//! count what was done, no label holds an id, a token or a query, the API's port does not
//! serve them, and Prometheus' own linter (`promtool check metrics`) accepts the text.

use std::io::{Read, Write};
use std::time::Duration;

use crate::helpers::{on_both, Engine};
use crate::process::{new_subject, Server, Starting};

const TOKEN: &str = "metrics-token-3f9a61c2d4e8b7a05c1d9e2f";

/// One plain HTTP/1.1 request to `addr`: the status line's code, the head and the body.
fn get(addr: &str, method: &str, path: &str, extra: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    // A compressed body is not text; only its head is read then.
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head[9..12].parse().unwrap(), head.to_owned(), body.to_owned())
}

/// The value of the sample `name` (with its labels, as written), if written.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

fn start(database: &str) -> (Server, String) {
    let args = ["--database", database, "--token", TOKEN, "--metrics-listen", "127.0.0.1:0", "--access-log", "off"];
    let server = Starting::spawn(&args).ready().unwrap();
    let metrics = server
        .preamble
        .iter()
        .find_map(|l| l.strip_prefix("metrics on http://")?.strip_suffix("/metrics"))
        .expect("the address of the metrics, before the readiness line")
        .to_owned();
    (server, metrics)
}

on_both!(metrics_count_what_was_done_by_route_template_and_hold_no_id_token_or_query);
async fn metrics_count_what_was_done_by_route_template_and_hold_no_id_token_or_query() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::current();
    let database = engine.fresh_database(dir.path());
    tokio::task::spawn_blocking(move || {
        let (server, metrics) = start(&database);
        let auth = format!("Authorization: Bearer {TOKEN}\r\nAccept: application/vnd.api+json\r\n");
        let mut ids = Vec::new();
        for i in 0..3 {
            let (status, body) = server.call("POST", "/v1/subjects", TOKEN, Some(&new_subject(&format!("Waves {i}"))));
            assert_eq!(status, 201);
            ids.push(body["data"]["id"].as_str().unwrap().to_owned());
        }
        let (status, head, _) = get(&server.addr, "GET", &format!("/v1/subjects/{}", ids[0]), &auth);
        assert_eq!(status, 200);
        let etag = head.lines().find_map(|l| l.strip_prefix("etag: ")).unwrap().to_owned();
        let conditional = format!("{auth}If-None-Match: {etag}\r\n");
        assert_eq!(get(&server.addr, "GET", &format!("/v1/subjects/{}", ids[1]), &auth).0, 200);
        assert_eq!(get(&server.addr, "GET", &format!("/v1/subjects/{}", ids[0]), &conditional).0, 304);
        let secret_query = "/v1/subjects?filter[search]=secretquerytext&page[size]=50";
        let compressed = format!("{auth}Accept-Encoding: gzip\r\n");
        let (status, head, _) = get(&server.addr, "GET", secret_query, &compressed);
        assert_eq!(status, 200);
        let (_, head, _) = if head.contains("content-encoding") {
            (status, head, String::new())
        } else {
            // Too small to compress: a page large enough is.
            get(&server.addr, "GET", "/v1/openapi.json", "Accept-Encoding: gzip\r\n")
        };
        let was_compressed = head.contains("content-encoding: gzip");
        assert_eq!(get(&server.addr, "GET", "/v1/subjects", "Authorization: Bearer wrong-token-value\r\n").0, 401);

        // Not on the API's port; only GET and HEAD of /metrics on its own.
        assert_eq!(get(&server.addr, "GET", "/metrics", &auth).0, 404);
        assert_eq!(get(&metrics, "GET", "/", "").0, 404);
        assert_eq!(get(&metrics, "POST", "/metrics", "Content-Length: 0\r\n").0, 405);
        let (status, head, text) = get(&metrics, "GET", "/metrics", "");
        assert_eq!(status, 200);
        assert!(head.contains("content-type: text/plain; version=0.0.4"), "{head}");

        let count = |labels: &str| sample(&text, &format!("coursed_http_requests_total{{{labels}}}")).unwrap_or(0.0);
        assert_eq!(count(r#"route="/v1/subjects",method="POST",status="201""#), 3.0, "{text}");
        assert_eq!(count(r#"route="/v1/subjects/{id}",method="GET",status="200""#), 2.0, "{text}");
        assert_eq!(count(r#"route="/v1/subjects/{id}",method="GET",status="304""#), 1.0, "{text}");
        assert_eq!(count(r#"route="-",method="GET",status="401""#), 1.0, "{text}");
        assert_eq!(sample(&text, "coursed_http_responses_not_modified_total"), Some(1.0));
        assert_eq!(sample(&text, "coursed_http_responses_compressed_total"), Some(f64::from(u8::from(was_compressed))));
        assert_eq!(
            sample(&text, r#"coursed_http_request_duration_seconds_count{route="/v1/subjects/{id}"}"#),
            Some(3.0)
        );
        assert!(sample(&text, "coursed_http_connections_accepted_total").unwrap() >= 9.0, "{text}");
        assert!(sample(&text, r#"coursed_db_query_seconds_count{work="write"}"#).unwrap() >= 3.0, "{text}");
        match engine {
            Engine::Sqlite => {
                assert!(sample(&text, "coursed_sqlite_write_group_writes_sum").unwrap() >= 3.0, "{text}");
                assert!(sample(&text, "coursed_sqlite_commit_seconds_count").unwrap() >= 1.0, "{text}");
                assert!(!text.contains("coursed_postgres_"), "{text}");
            }
            Engine::Postgres => {
                assert!(sample(&text, "coursed_postgres_pool_max_connections").unwrap() >= 1.0, "{text}");
                assert!(!text.contains("coursed_sqlite_"), "{text}");
            }
        }
        for secret in [TOKEN, "wrong-token-value", "secretquerytext", "filter", "Waves"]
            .into_iter()
            .chain(ids.iter().map(|s| &**s))
        {
            assert!(!text.contains(secret), "{secret:?} in the metrics:\n{text}");
        }
        lint(&text);
    })
    .await
    .unwrap();
}

/// `promtool check metrics` (Debian's `prometheus`) on `text`; required when
/// `COURSED_REQUIRE_PROMTOOL=1` (as CI sets it), skipped with a note otherwise.
fn lint(text: &str) {
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            assert!(std::env::var("COURSED_REQUIRE_PROMTOOL").is_err(), "promtool is required and cannot run: {e}");
            eprintln!("promtool not found ({e}): the metrics were not linted");
            return;
        }
    };
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
