//! Tokens kept in the database: made, listed and revoked by `coursed token` while servers run,
//! seen at once by every server on the database, scoped, expiring, hashed; failed
//! authentication throttled per client address.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;

use serde_json::json;

use coursed::http::Peer;
use coursed::tokens::{Caller, Scope, Throttle};

use crate::helpers::{many, on_both, one, Engine, TestApp, JSONAPI, TOKEN};
use crate::process::{db_path, new_subject, Server};

/// `coursed token ARGS... --database DATABASE`: whether it succeeded, its stdout and stderr.
fn coursed_token(database: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .arg("token")
        .args(args)
        .args(["--database", database])
        .env_remove("COURSED_DATABASE")
        .output()
        .expect("run coursed token");
    let text = |b: Vec<u8>| String::from_utf8(b).expect("utf-8 output");
    (out.status.success(), text(out.stdout), text(out.stderr))
}

/// A new token named `name` of `scope` in `database`, made by the binary.
pub(crate) fn create(database: &str, name: &str, scope: &str) -> String {
    let (ok, out, err) = coursed_token(database, &["create", "--name", name, "--scope", scope]);
    assert!(ok, "token create failed: {err}");
    assert!(err.contains(name), "{err}");
    let token = out.trim().to_owned();
    assert!(token.starts_with("crsd_") && !token.contains('\n'), "stdout is the token alone: {out:?}");
    token
}

fn revoke(database: &str, name: &str) {
    let (ok, _, err) = coursed_token(database, &["revoke", name]);
    assert!(ok, "token revoke failed: {err}");
}

/// `method path` to `t` with `token`, from `peer`.
fn as_token(t: &TestApp, token: &str, method: &str, path: &str, peer: &str) -> warp::test::RequestBuilder {
    t.req(method, path)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", JSONAPI)
        .extension(Peer(peer.parse::<SocketAddr>().unwrap()))
}

const HOME: &str = "10.0.0.1:5000";

on_both!(tokens_made_by_the_command_are_listed_accepted_and_refused_once_revoked);
async fn tokens_made_by_the_command_are_listed_accepted_and_refused_once_revoked() {
    let t = TestApp::new().await;
    let db = t.database.clone();
    let token = create(&db, "teacher", "write");
    let r =
        t.send(as_token(&t, &token, "POST", "/v1/subjects", HOME).body(new_subject("By teacher").to_string())).await;
    r.assert_status(201);

    let (ok, _, err) = coursed_token(&db, &["create", "--name", "teacher"]);
    assert!(!ok && err.contains("exists already"), "a name is unique: {err}");
    let (ok, _, err) = coursed_token(&db, &["create", "--name", "x", "--scope", "owner"]);
    assert!(!ok && err.contains("read, write or admin"), "{err}");
    let (ok, _, err) = coursed_token(&db, &["create", "--name", "x", "--expires", "soon"]);
    assert!(!ok && err.contains("soon"), "{err}");
    let (ok, _, err) = coursed_token(&db, &["create", "--name", "two words"]);
    assert!(!ok && err.contains("not a token name"), "{err}");
    create(&db, "display", "read");

    let (ok, list, _) = coursed_token(&db, &["list"]);
    assert!(ok);
    let list: &'static str = list.leak();
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 3, "{list}");
    assert!(lines[0].starts_with("NAME") && lines[0].contains("LAST USED"), "{list}");
    let words = |line: &'static str| line.split_whitespace().collect::<Vec<&str>>();
    let (display, teacher) = (words(lines[1]), words(lines[2]));
    assert_eq!((display.len(), &display[..2], &display[3..]), (5, &["display", "read"][..], &["never", "never"][..]));
    assert_eq!((&teacher[..2], teacher[3]), (&["teacher", "write"][..], "never"), "{list}");
    assert_eq!(teacher.len(), 5, "its last use (written in the background) or never: {list}");
    assert!(display[2].starts_with("20") && display[2].ends_with('Z'), "created, in UTC: {list}");
    assert!(!list.contains(&token) && !list.contains(&token[22..]), "the list never shows a token");

    revoke(&db, "teacher");
    // The very next request, through a server that was running all along.
    let r = t.send(as_token(&t, &token, "GET", "/v1/subjects", HOME)).await;
    r.assert_problem(401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    let (ok, _, err) = coursed_token(&db, &["revoke", "teacher"]);
    assert!(!ok && err.contains("no token named \"teacher\""), "{err}");
    let (_, list, _) = coursed_token(&db, &["list"]);
    assert!(!list.contains("teacher"), "{list}");
    // The configured token is untouched by all this.
    t.get("/v1/subjects").await.assert_status(200);
}

on_both!(two_servers_on_one_database_see_a_creation_and_a_revocation_at_once);
async fn two_servers_on_one_database_see_a_creation_and_a_revocation_at_once() {
    let (a, b) = TestApp::pair().await;
    // Both have answered a request before the token exists.
    a.get("/v1/modules").await.assert_status(200);
    b.get("/v1/modules").await.assert_status(200);
    let token = create(&a.database, "app", "write");
    for t in [&a, &b] {
        t.send(as_token(t, &token, "GET", "/v1/modules", HOME)).await.assert_status(200);
    }
    revoke(&a.database, "app");
    for t in [&a, &b] {
        t.send(as_token(t, &token, "GET", "/v1/modules", HOME)).await.assert_problem(401);
    }
    // A new token of the same name is another token: the old one stays refused.
    let again = create(&a.database, "app", "read");
    b.send(as_token(&b, &again, "GET", "/v1/modules", HOME)).await.assert_status(200);
    a.send(as_token(&a, &token, "GET", "/v1/modules", HOME)).await.assert_problem(401);
}

on_both!(an_expired_token_is_refused_exactly_like_an_unknown_one);
async fn an_expired_token_is_refused_exactly_like_an_unknown_one() {
    let t = TestApp::new().await;
    let (ok, token, err) = coursed_token(&t.database, &["create", "--name", "term", "--expires", "90d"]);
    assert!(ok && err.contains("expires 20"), "{err}");
    let token = token.trim();
    t.send(as_token(&t, token, "GET", "/v1/modules", HOME)).await.assert_status(200);
    let (_, list, _) = coursed_token(&t.database, &["list"]);
    assert!(!list.contains("expired"), "{list}");
    t.engine.execute(&t.database, "UPDATE coursed_tokens SET expires_at = expires_at - 7776000000");
    let expired = t.exchange(as_token(&t, token, "GET", "/v1/modules", HOME)).await;
    let mut unknown_token = token.to_owned();
    unknown_token.replace_range(5..6, if token[5..6] == *"0" { "1" } else { "0" });
    let unknown = t.exchange(as_token(&t, &unknown_token, "GET", "/v1/modules", HOME)).await;
    assert_eq!(expired.0.as_u16(), 401);
    assert_eq!((expired.0, expired.2), (unknown.0, unknown.2), "the same status and body");
    let (_, list, _) = coursed_token(&t.database, &["list"]);
    assert!(list.contains("(expired)"), "{list}");
}

on_both!(a_read_token_gets_403_on_every_kind_of_write_and_changes_nothing);
async fn a_read_token_gets_403_on_every_kind_of_write_and_changes_nothing() {
    let t = TestApp::new().await;
    let m = t.module("Physics").await;
    let s = t.subject("Optics", Some(&m)).await;
    let c = t.chapter("Lenses", &s, 1).await;
    let reader = create(&t.database, "display", "read");
    let writer = create(&t.database, "editor", "write");
    let admin = create(&t.database, "head", "admin");
    let subject = json!({"data": {"type": "subjects", "attributes": {"title": "New"}}});
    let patch = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "Changed"}}});
    let ops = json!({"atomic:operations": [{"op": "add", "data": {"type": "modules", "attributes": {"title": "M"}}}]});
    let writes = [
        ("POST", "/v1/subjects".to_owned(), subject.clone()),
        ("PATCH", format!("/v1/subjects/{s}"), patch.clone()),
        ("DELETE", format!("/v1/chapters/{c}"), json!(null)),
        ("PATCH", format!("/v1/subjects/{s}/relationships/module"), one("modules", &m)),
        ("PATCH", format!("/v1/modules/{m}/relationships/subjects"), many("subjects", &[])),
        ("POST", format!("/v1/modules/{m}/relationships/subjects"), many("subjects", &[&s])),
        ("DELETE", format!("/v1/modules/{m}/relationships/subjects"), many("subjects", &[&s])),
        ("POST", "/v1/operations".to_owned(), ops.clone()),
    ];
    for (method, path, body) in &writes {
        let mut req = as_token(&t, &reader, method, path, HOME);
        if !body.is_null() {
            req = req.body(body.to_string());
        }
        if path.ends_with("/operations") {
            req = req.header("content-type", format!("{JSONAPI}; ext=\"https://jsonapi.org/ext/atomic\""));
        }
        let r = t.send(req).await;
        r.assert_problem(403);
        assert_eq!(r.error()["code"], "read_only_token", "{method} {path}: {}", r.body);
        assert!(r.error()["detail"].as_str().unwrap().contains("read-only"), "{}", r.body);
    }
    // A path that names nothing is a 404 whatever the token; a method it does not answer a 405.
    t.send(as_token(&t, &reader, "POST", &format!("/v1/subjects/{s}/relationships/teacher"), HOME).body("{}"))
        .await
        .assert_problem(404);
    t.send(as_token(&t, &reader, "DELETE", "/v1/subjects", HOME)).await.assert_problem(405);
    // Nothing changed, and reads are served.
    let r = t.send(as_token(&t, &reader, "GET", &format!("/v1/subjects/{s}?include=module,chapters"), HOME)).await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["attributes"]["title"], "Optics");
    assert_eq!(r.body["included"].as_array().unwrap().len(), 2, "{}", r.body);
    t.send(as_token(&t, &reader, "HEAD", "/v1/modules", HOME)).await.assert_status(200);
    t.send(as_token(&t, &reader, "OPTIONS", "/v1/modules", HOME)).await.assert_status(204);
    // write and admin may write.
    for token in [&writer, &admin] {
        t.send(as_token(&t, token, "POST", "/v1/subjects", HOME).body(subject.to_string())).await.assert_status(201);
        t.send(as_token(&t, token, "PATCH", &format!("/v1/subjects/{s}"), HOME).body(patch.to_string()))
            .await
            .assert_status(200);
    }
    let ops = as_token(&t, &writer, "POST", "/v1/operations", HOME)
        .header("content-type", format!("{JSONAPI}; ext=\"https://jsonapi.org/ext/atomic\""))
        .body(ops.to_string());
    t.send(ops).await.assert_status(200);
}

on_both!(failed_authentication_is_throttled_per_address_and_other_addresses_are_served);
async fn failed_authentication_is_throttled_per_address_and_other_addresses_are_served() {
    let t =
        TestApp::new().await.configured(|app| app.auth.throttle = Throttle::new(5, std::time::Duration::from_secs(60)));
    let good = create(&t.database, "app", "write");
    let (attacker, school) = ("192.0.2.7:40000", "198.51.100.3:40000");
    // Unknown ids, a wrong secret for a known id, and tokens of no known form all count.
    let mut wrong_secret = good.clone();
    wrong_secret.replace_range(30..31, if good[30..31] == *"0" { "1" } else { "0" });
    let unknown_id = format!("crsd_0123456789abcdef_{}", "ab".repeat(32));
    let bad = ["guess-1", unknown_id.as_str(), &wrong_secret, "crsd_", "guess-3"];
    for token in bad {
        t.send(as_token(&t, token, "GET", "/v1/modules", attacker)).await.assert_problem(401);
    }
    for token in ["guess-4", TOKEN, good.as_str()] {
        let r = t.send(as_token(&t, token, "GET", "/v1/modules", attacker)).await;
        r.assert_problem(429);
        let wait: u64 = r.header("retry-after").expect("Retry-After").parse().unwrap();
        assert!((1..=12).contains(&wait), "one failure refills in 60/5 s: {wait}");
    }
    // Another address: its good tokens are served and its failures are its own.
    t.send(as_token(&t, &good, "GET", "/v1/modules", school)).await.assert_status(200);
    t.send(as_token(&t, TOKEN, "GET", "/v1/modules", school)).await.assert_status(200);
    t.send(as_token(&t, "typo", "GET", "/v1/modules", school)).await.assert_problem(401);
    // No token at all is not a guess: it does not count.
    for _ in 0..10 {
        let anonymous = warp::test::request().path("/v1/modules").extension(Peer(school.parse().unwrap()));
        t.send(anonymous).await.assert_problem(401);
    }
    t.send(as_token(&t, &good, "GET", "/v1/modules", school)).await.assert_status(200);
}

on_both!(the_table_holds_a_salted_hash_never_the_token);
async fn the_table_holds_a_salted_hash_never_the_token() {
    let t = TestApp::new().await;
    let tokens = [create(&t.database, "one", "read"), create(&t.database, "two", "read")];
    let rows = t
        .app
        .db
        .read(|tx| {
            let mut rows = Vec::new();
            tx.query(
                "SELECT id, name, scope, salt, hash, iterations FROM coursed_tokens ORDER BY name",
                &[],
                &mut |r| {
                    rows.push(
                        (0..6)
                            .map(|i| r.cell(i).as_str().map_or_else(|| format!("{:?}", r.cell(i)), str::to_owned))
                            .collect::<Vec<_>>(),
                    )
                },
            )?;
            Ok(rows)
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    for (row, token) in rows.iter().zip(&tokens) {
        let secret = &token[22..];
        assert_eq!(token[5..21], row[0], "the public id finds the row");
        assert!(row[3].len() == 32 && row[4].len() == 64, "hex salt and PBKDF2-HMAC-SHA256 hash: {row:?}");
        assert_eq!(row[5], "Int(100000)");
        for cell in row {
            assert!(!cell.contains(secret) && !cell.contains(token.as_str()), "{cell} holds the secret");
        }
    }
    // Salted: two tokens never share a salt or a hash.
    assert_ne!(rows[0][3], rows[1][3]);
    assert_ne!(rows[0][4], rows[1][4]);
}

on_both!(the_caller_is_in_the_response_extensions_and_last_use_is_recorded_once_a_minute);
async fn the_caller_is_in_the_response_extensions_and_last_use_is_recorded_once_a_minute() {
    // The caller is put into the extensions for the access log, which names it: only when on.
    let quiet = TestApp::new().await;
    let r = as_token(&quiet, TOKEN, "GET", "/v1/modules", HOME).reply(&coursed::http::routes(quiet.app.clone())).await;
    assert_eq!((r.status().as_u16(), r.extensions().get::<Caller>()), (200, None));
    let log = Arc::new(coursed::http::AccessLog::new(Box::new(std::io::sink())));
    let t = TestApp::new().await.configured(|app| app.access_log = Some(log));
    let token = create(&t.database, "display", "read");
    let routes = coursed::http::routes(t.app.clone());
    let r = as_token(&t, &token, "GET", "/v1/modules", HOME).reply(&routes).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.extensions().get::<Caller>(), Some(&Caller { name: Arc::from("display"), scope: Scope::Read }));
    let r = as_token(&t, TOKEN, "POST", "/v1/nowhere", HOME).reply(&routes).await;
    assert_eq!(r.status(), 404);
    assert_eq!(r.extensions().get::<Caller>().map(|c| &*c.name), Some("config"));
    let r = as_token(&t, "nobody", "GET", "/v1/modules", HOME).reply(&routes).await;
    assert_eq!((r.status().as_u16(), r.extensions().get::<Caller>()), (401, None));

    // The first use is written in the background; wait for it (bounded).
    let last_used = || async { t.sql_i64("SELECT last_used_at FROM coursed_tokens", vec![]).await };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while last_used().await == 0 {
        assert!(std::time::Instant::now() < deadline, "last use never recorded");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let first = last_used().await;
    assert!((first - coursed::time::now_ms()).abs() < 60_000);
    // Half a minute ago: a use now must not write it again (a write would set it to now).
    let earlier = first - 30_000;
    t.app
        .db
        .write(move |tx| {
            let sql = "UPDATE coursed_tokens SET last_used_at = ?";
            Ok(tx.execute(sql, &[coursed::store::Value::Int(earlier)])?)
        })
        .await
        .unwrap();
    // Five uses run one statement more each than five with the configured token (which is
    // not a row): the token's row; not one to write its last use.
    let by_row = statements_of_uses(&t, &token).await;
    let configured = statements_of_uses(&t, TOKEN).await;
    assert_eq!(by_row, configured + 5, "no write of the last use within the minute");
    assert_eq!(last_used().await, earlier, "written at most once a minute");
    let first = earlier;
    let (_, list, _) = coursed_token(&t.database, &["list"]);
    assert!(list.contains(&coursed::time::format_ms(first)), "{list}");
}

/// The SQL statements that five `GET /v1/modules` with `token` run, whatever they start in the
/// background included.
async fn statements_of_uses(t: &TestApp, token: &str) -> u64 {
    let routes = coursed::http::routes(t.app.clone());
    let before = t.statements();
    for _ in 0..5 {
        assert_eq!(as_token(t, token, "GET", "/v1/modules", HOME).reply(&routes).await.status(), 200);
    }
    // A write started by those requests is queued by now (the runtime runs the tasks they
    // spawned before this test's task again); on SQLite the one writer then runs it before the
    // write below, on PostgreSQL it gets a moment on a connection of its own.
    tokio::task::yield_now().await;
    t.app.db.write(|_| Ok(())).await.unwrap();
    if t.engine == Engine::Postgres {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    t.statements() - before
}

#[test]
fn the_real_server_throttles_by_peer_address_and_sees_revocations_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_path(dir.path());
    let server = Server::start(&["--database", &db, "--token", "tok", "--auth-failures", "3"]);
    let token = create(&db, "laptop", "write");
    assert_eq!(server.call("GET", "/v1/modules", &token, None).0, 200);
    revoke(&db, "laptop");
    assert_eq!(server.call("GET", "/v1/modules", &token, None).0, 401);
    for guess in ["a", "b"] {
        assert_eq!(server.call("GET", "/v1/modules", guess, None).0, 401);
    }
    let (status, body) = server.call("GET", "/v1/modules", "tok", None);
    assert_eq!(status, 429, "throttled, good token or not: {body}");
    assert_eq!(body["errors"][0]["code"], "too_many_failed_authentications");
    // The same server, from another loopback address: served.
    assert_eq!(get_from("127.0.0.2", &server.addr, "tok"), 200);
    assert_eq!(get_from("127.0.0.1", &server.addr, "tok"), 429);
}

/// The status of `GET /v1/modules` with `token`, sent to `addr` from the local address `source`.
fn get_from(source: &str, addr: &str, token: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
        let mut stream = socket.connect(addr.parse().unwrap()).await.unwrap();
        let request = format!(
            "GET /v1/modules HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await.unwrap();
        let head = String::from_utf8_lossy(&response);
        head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status line")
    })
}

#[test]
fn a_token_command_on_a_missing_database_or_memory_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let missing = db_path(dir.path());
    let (ok, _, err) = coursed_token(&missing, &["list"]);
    assert!(!ok && err.contains("no database"), "{err}");
    assert!(!std::path::Path::new(&missing).exists(), "list created nothing");
    let (ok, _, err) = coursed_token(":memory:", &["create", "--name", "x"]);
    assert!(!ok && err.contains(":memory:"), "{err}");
}

#[test]
fn the_openapi_document_gives_every_write_a_read_only_403_and_every_authenticated_operation_a_429() {
    let doc = coursed::openapi::document();
    let mut writes = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            if ["post", "patch", "delete"].contains(&method.as_str()) {
                writes += 1;
                assert!(responses.contains_key("403"), "{method} {path} documents no 403");
            }
            assert_eq!(responses.contains_key("401"), responses.contains_key("429"), "{method} {path}");
        }
    }
    assert!(writes >= 18, "{writes}");
    let forbidden = doc["components"]["responses"]["403"]["description"].as_str().unwrap();
    assert!(forbidden.contains("read-only") && forbidden.contains("read_only_token"), "{forbidden}");
    assert!(doc["components"]["responses"]["429"]["headers"]["Retry-After"].is_object());
}

on_both!(tokens_survive_a_backup_and_its_restore);
async fn tokens_survive_a_backup_and_its_restore() {
    let t = TestApp::new().await;
    let token = create(&t.database, "teacher", "read");
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("backup.db");
    let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["backup", "--database", &t.database, "--output", output.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let restored = TestApp::open(crate::helpers::Engine::Sqlite, output.to_str().unwrap()).await.unwrap();
    let r = restored.send(as_token(&restored, &token, "GET", "/v1/modules", HOME)).await;
    r.assert_status(200);
    let r = restored.send(as_token(&restored, &token, "POST", "/v1/modules", HOME).body("{}")).await;
    r.assert_problem(403);
}

on_both!(behind_a_trusted_proxy_failures_count_against_the_forwarded_client);
async fn behind_a_trusted_proxy_failures_count_against_the_forwarded_client() {
    let t = TestApp::new().await.configured(|app| {
        app.auth.throttle = Throttle::new(2, std::time::Duration::from_secs(60));
        app.auth.trusted_proxies = vec!["10.0.0.1".parse().unwrap()];
    });
    let via_proxy = |token: &str, client: &str| {
        as_token(&t, token, "GET", "/v1/modules", "10.0.0.1:3000").header("x-forwarded-for", client)
    };
    for _ in 0..2 {
        t.send(via_proxy("guess", "192.0.2.7")).await.assert_problem(401);
    }
    t.send(via_proxy(TOKEN, "192.0.2.7")).await.assert_problem(429);
    // Other clients behind the same proxy are served, and so is the proxy itself.
    t.send(via_proxy(TOKEN, "spoofed, 198.51.100.3")).await.assert_status(200);
    t.send(as_token(&t, TOKEN, "GET", "/v1/modules", "10.0.0.1:3000")).await.assert_status(200);
    // A peer that is not a trusted proxy cannot name another client.
    let direct = |token: &str| as_token(&t, token, "GET", "/v1/modules", HOME).header("x-forwarded-for", "203.0.113.9");
    for _ in 0..2 {
        t.send(direct("guess")).await.assert_problem(401);
    }
    t.send(direct(TOKEN)).await.assert_problem(429);
}
