//! Tokens, continued: what the database keeps of a token, the caller and its last use, the
//! real server's throttling by peer address, the command on a database it cannot use, the
//! OpenAPI document's 403s and 429s, backups, and clients behind a trusted proxy.

use std::process::Command;
use std::sync::Arc;

use coursed::tokens::{Caller, Scope, Throttle};

use crate::helpers::{on_both, Engine, TestApp, TOKEN};
use crate::process::{db_path, Server};
use crate::tokens::{as_token, coursed_token, create, revoke, HOME};

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
    let log = Arc::new(coursed::app::AccessLog::new(Box::new(std::io::sink())));
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
        .write(&coursed::store::WriteContext::system("test"), move |tx| {
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
    t.app.db.write(&coursed::store::WriteContext::system("test"), |_| Ok(())).await.unwrap();
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
        app.auth.proxies.trusted = vec!["10.0.0.1".parse().unwrap()];
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
