//! Tokens kept in the database: made, listed and revoked by `coursed token` while servers run,
//! seen at once by every server on the database, scoped, expiring, hashed; failed
//! authentication throttled per client address. More: `tokens_kept.rs`.

use std::net::SocketAddr;
use std::process::Command;

use serde_json::json;

use coursed::http::Peer;
use coursed::tokens::Throttle;

use crate::helpers::{many, on_both, one, TestApp, ATOMIC, JSONAPI, TOKEN};
use crate::process::new_subject;

/// `coursed token ARGS... --database DATABASE`: whether it succeeded, its stdout and stderr.
pub(crate) fn coursed_token(database: &str, args: &[&str]) -> (bool, String, String) {
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

pub(crate) fn revoke(database: &str, name: &str) {
    let (ok, _, err) = coursed_token(database, &["revoke", name]);
    assert!(ok, "token revoke failed: {err}");
}

/// `method path` to `t` with `token`, from `peer`.
pub(crate) fn as_token(t: &TestApp, token: &str, method: &str, path: &str, peer: &str) -> warp::test::RequestBuilder {
    t.req(method, path)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", JSONAPI)
        .extension(Peer(peer.parse::<SocketAddr>().unwrap()))
}

pub(crate) const HOME: &str = "10.0.0.1:5000";

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
            req = req.header("content-type", ATOMIC);
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
    let ops =
        as_token(&t, &writer, "POST", "/v1/operations", HOME).header("content-type", ATOMIC).body(ops.to_string());
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
