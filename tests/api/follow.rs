//! Following a district's catalogue, on both engines: a school's database applies the
//! district's change feed over HTTP (`serve --follow`, here the follower of the library on a
//! real server's port) or from delta bundles carried by hand (`coursed export --since`,
//! `coursed import`), refuses writes of its own, says how far behind it is, and ends with the
//! district's catalogue to the byte (the same `coursed export` lines) whatever was cut or
//! killed on the way.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{on_both, one, TestApp, TOKEN};
use crate::process::{Relay, Server, Starting};
use coursed::bundle::Contents;

/// The server of `t` on port 0, and its stop.
async fn serve(t: &TestApp) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(coursed::serve(listener, t.app.clone(), async move {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// The lines of `coursed export` of `database` after its header (which names the export's
/// time): the catalogue, to the byte.
async fn catalogue(database: &str) -> Vec<String> {
    let database = database.to_owned();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("export.jsonl");
        coursed::bundle::export(&database, out.to_str().unwrap(), false, Contents::Catalogue).unwrap();
        std::fs::read_to_string(out).unwrap().lines().skip(1).map(str::to_owned).collect()
    })
    .await
    .unwrap()
}

/// The district's feed head.
async fn head(t: &TestApp) -> i64 {
    let r = t.get("/v1/revisions?page[size]=1").await;
    r.body["meta"]["head"].as_str().unwrap().parse().unwrap()
}

/// `meta.follow` of the school's feed.
async fn follow_meta(school: &TestApp) -> Value {
    school.get("/v1/revisions?page[size]=1").await.body["meta"]["follow"].clone()
}

/// Waits until the school has applied the district's feed up to `head`.
async fn caught_up(school: &TestApp, head: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let meta = follow_meta(school).await;
        if meta["cursor"].as_str().and_then(|c| c.parse::<i64>().ok()) == Some(head) {
            return meta;
        }
        assert!(Instant::now() < deadline, "the school did not reach {head}: {meta}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every revision of the feed, without its id, cursor and links (the database's own).
async fn history(t: &TestApp) -> Vec<Value> {
    crate::history::whole_feed(t, "")
        .await
        .into_iter()
        .map(|r| json!([r["attributes"], r["relationships"]["resource"]["data"]]))
        .collect()
}

/// Changes of every kind the feed records, seeded: creates, updates, moves between modules,
/// a relationship replaced, a module deleted (its subjects let go), a subject deleted (its
/// chapters taken along), an `external_id` passed from one resource to another, an atomic
/// operation, restores of a deleted resource and of an older state.
async fn changes(t: &TestApp, seed: u64, steps: usize) {
    let mut seed = seed | 1;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let list = |ty: &'static str| async move {
        let r = t.get(&format!("/v1/{ty}?page[size]=100&sort=-created_at")).await;
        r.ids()
    };
    for step in 0..steps {
        let (modules, subjects) = (list("modules").await, list("subjects").await);
        match next(11) {
            0 | 1 => {
                t.module(&format!("M{step}")).await;
            }
            2 | 3 => {
                let m = (!modules.is_empty() && next(3) > 0).then(|| modules[next(modules.len())].clone());
                t.subject(&format!("S{step} «ü»"), m.as_deref()).await;
            }
            4 if !subjects.is_empty() => {
                let s = &subjects[next(subjects.len())];
                t.chapter(&format!("C{step}"), s, next(5) as i64).await;
            }
            5 if !subjects.is_empty() => {
                let s = &subjects[next(subjects.len())];
                let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"introduction": format!("i{step}\r\n"), "available_for_courses": next(2) == 0}}});
                t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
            }
            6 if !subjects.is_empty() && !modules.is_empty() => {
                let (s, m) = (&subjects[next(subjects.len())], &modules[next(modules.len())]);
                t.write("PATCH", &format!("/v1/subjects/{s}/relationships/module"), one("modules", m))
                    .await
                    .assert_status(200);
            }
            7 if !modules.is_empty() => {
                t.delete(&format!("/v1/modules/{}", modules[next(modules.len())])).await.assert_status(204);
            }
            8 if !subjects.is_empty() => {
                t.delete(&format!("/v1/subjects/{}", subjects[next(subjects.len())])).await.assert_status(204);
            }
            9 if modules.len() >= 2 => {
                // One external id passed from a module to another, in one atomic request.
                let (a, b) = (&modules[0], &modules[1]);
                let code = format!("EXT{step}");
                let set = |id: &str, v: Value| json!({"op": "update", "data": {"type": "modules", "id": id, "attributes": {"external_id": v}}});
                let r = crate::operations::atomic(t, json!([set(a, json!(code))])).await;
                r.assert_status(200);
                let r = crate::operations::atomic(t, json!([set(a, Value::Null), set(b, json!(code))])).await;
                r.assert_status(200);
            }
            10 => {
                // The oldest revision of a resource restored: a deleted one comes back.
                let feed = t.get("/v1/revisions?page[size]=50").await;
                let creates: Vec<&Value> = feed
                    .data()
                    .iter()
                    .filter(|r| {
                        r["attributes"]["action"] == "create"
                            && r["relationships"]["resource"]["data"]["type"] != "chapters"
                    })
                    .collect();
                if !creates.is_empty() {
                    let rev = creates[next(creates.len())]["id"].as_str().unwrap().to_owned();
                    let r = crate::history::restore(t, &rev).await;
                    assert!([200, 409].contains(&r.status.as_u16()), "{:?}", r.body);
                }
            }
            _ => {}
        }
    }
}

on_both!(a_follower_applies_every_change_in_order_refuses_writes_and_resumes);
async fn a_follower_applies_every_change_in_order_refuses_writes_and_resumes() {
    let district = TestApp::new().await;
    changes(&district, 7, 80).await;
    let (addr, _stop) = serve(&district).await;
    let url = format!("http://{addr}");
    let school = TestApp::new().await;
    let follower = coursed::follow::spawn(school.app.db.clone(), &url, TOKEN, school.app.follow.clone()).unwrap();
    // Caught up from the pages.
    let meta = caught_up(&school, head(&district).await).await;
    assert_eq!(catalogue(&school.database).await, catalogue(&district.database).await);
    assert_eq!(meta["upstream"], json!(url));
    assert_eq!(meta["lag"], json!(0.0));
    assert_eq!(meta["state"], "following");
    assert!(meta["applied_at"].is_string(), "{meta}");
    // Then live, from the stream.
    changes(&district, 11, 60).await;
    caught_up(&school, head(&district).await).await;
    assert_eq!(catalogue(&school.database).await, catalogue(&district.database).await);
    // Every write is refused, with one code, and reads go on.
    let m = school.get("/v1/modules").await.ids().pop().unwrap();
    for (method, path, body) in [
        ("POST", "/v1/modules".to_owned(), json!({"data": {"type": "modules", "attributes": {"title": "Mine"}}})),
        (
            "PATCH",
            format!("/v1/modules/{m}"),
            json!({"data": {"type": "modules", "id": m, "attributes": {"title": "Mine"}}}),
        ),
        ("DELETE", format!("/v1/modules/{m}"), Value::Null),
        ("PATCH", format!("/v1/modules/{m}/relationships/subjects"), json!({"data": []})),
    ] {
        let r = school.write(method, &path, body).await;
        r.assert_problem(403);
        assert_eq!(r.error()["code"], "followed_catalogue", "{method} {path}");
        assert!(r.error()["detail"].as_str().unwrap().contains(&url));
    }
    let r = crate::operations::atomic(
        &school,
        json!([{"op": "add", "data": {"type": "modules", "attributes": {"title": "x"}}}]),
    )
    .await;
    r.assert_problem(403);
    school.get(&format!("/v1/modules/{m}")).await.assert_status(200);
    // Stopped, and started again: it goes on where it stopped.
    drop(follower);
    changes(&district, 13, 40).await;
    let before = follow_meta(&school).await["cursor"].clone();
    assert!(before.as_str().unwrap().parse::<i64>().unwrap() < head(&district).await);
    let _follower = coursed::follow::spawn(school.app.db.clone(), &url, TOKEN, school.app.follow.clone()).unwrap();
    caught_up(&school, head(&district).await).await;
    assert_eq!(catalogue(&school.database).await, catalogue(&district.database).await);
    // The school keeps the district's history as it was recorded there (its own places in the
    // feed and ids aside), and the readiness says how far it follows.
    assert_eq!(history(&school).await, history(&district).await);
    let (_, ready) = school.raw("/readyz").await;
    let ready: Value = serde_json::from_slice(&ready).unwrap();
    assert_eq!(ready["follow"]["upstream"], json!(url), "{ready}");
    // The district is not a follower: nothing of the kind in its answers.
    assert!(district.get("/v1/revisions").await.body["meta"].get("follow").is_none());
}

on_both!(two_followers_into_one_database_apply_each_revision_once);
/// Replicas of a school, each with `--follow`: they take turns on the cursor, and each revision
/// is applied (and kept in the history) once.
async fn two_followers_into_one_database_apply_each_revision_once() {
    let district = TestApp::new().await;
    changes(&district, 37, 40).await;
    let (addr, _stop) = serve(&district).await;
    let url = format!("http://{addr}");
    let school = TestApp::new().await;
    let other = school.replica(Duration::from_secs(5)).await;
    let _a = coursed::follow::spawn(school.app.db.clone(), &url, TOKEN, school.app.follow.clone()).unwrap();
    let _b = coursed::follow::spawn(other.app.db.clone(), &url, TOKEN, other.app.follow.clone()).unwrap();
    for seed in [41, 43] {
        changes(&district, seed, 30).await;
        caught_up(&school, head(&district).await).await;
        caught_up(&other, head(&district).await).await;
    }
    assert_eq!(catalogue(&school.database).await, catalogue(&district.database).await);
    assert_eq!(history(&school).await, history(&district).await);
    for t in [&school, &other] {
        assert_eq!(follow_meta(t).await["state"], "following");
    }
}

on_both!(a_follower_starts_empty_and_keeps_to_one_feed);
async fn a_follower_starts_empty_and_keeps_to_one_feed() {
    let district = TestApp::new().await;
    district.module("Physics").await;
    let (addr, _stop) = serve(&district).await;
    let url = format!("http://{addr}");
    // A database with a catalogue of its own does not become a follower.
    let school = TestApp::new().await;
    school.module("Ours").await;
    let _f = coursed::follow::spawn(school.app.db.clone(), &url, TOKEN, school.app.follow.clone()).unwrap();
    let meta = wait_meta(&school, |m| m["state"] == "stopped").await;
    assert!(meta["error"].as_str().unwrap().contains("catalogue of its own"), "{meta}");
    assert_eq!(school.get("/v1/modules").await.data().len(), 1);
    // A token the district refuses: said, and nothing applied.
    let other = TestApp::new().await;
    let _g = coursed::follow::spawn(other.app.db.clone(), &url, "wrong-token", other.app.follow.clone()).unwrap();
    let meta = wait_meta(&other, |m| m["state"] == "stopped").await;
    assert!(meta["error"].as_str().unwrap().contains("401"), "{meta}");
    assert!(other.get("/v1/modules").await.data().is_empty());
    // A follower of one feed refuses another's.
    let third = TestApp::new().await;
    let g = coursed::follow::spawn(third.app.db.clone(), &url, TOKEN, third.app.follow.clone()).unwrap();
    caught_up(&third, head(&district).await).await;
    drop(g);
    let elsewhere = TestApp::new().await;
    elsewhere.module("Elsewhere").await;
    let (addr2, _stop2) = serve(&elsewhere).await;
    let _h =
        coursed::follow::spawn(third.app.db.clone(), &format!("http://{addr2}/v1"), TOKEN, third.app.follow.clone())
            .unwrap();
    let meta = wait_meta(&third, |m| m["state"] == "stopped").await;
    assert!(meta["error"].as_str().unwrap().contains("follows the feed"), "{meta}");
    assert_eq!(catalogue(&third.database).await, catalogue(&district.database).await);
    // Bad addresses are refused at once.
    for (url, token) in [("ftp://x", TOKEN), ("http://127.0.0.1:1/?a=b", TOKEN), ("http://127.0.0.1:1", "a b")] {
        assert!(coursed::follow::spawn(third.app.db.clone(), url, token, Arc::default()).is_err(), "{url}");
    }
}

on_both!(a_district_that_pruned_its_history_is_followed_from_an_export);
async fn a_district_that_pruned_its_history_is_followed_from_an_export() {
    let district = TestApp::new().await;
    changes(&district, 23, 60).await;
    coursed::history::prune(&district.app.db, coursed::time::now_ms() + 1000).await.unwrap();
    changes(&district, 29, 20).await;
    let (addr, _stop) = serve(&district).await;
    let url = format!("http://{addr}");
    // From the start of the feed: gone, and said so.
    let school = TestApp::new().await;
    let f = coursed::follow::spawn(school.app.db.clone(), &url, TOKEN, school.app.follow.clone()).unwrap();
    let meta = wait_meta(&school, |m| m["state"] == "stopped").await;
    assert!(meta["error"].as_str().unwrap().contains("import --follow"), "{meta}");
    drop(f);
    // From an export with its history: the school begins at the export's cursor.
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("district.jsonl").to_str().unwrap().to_owned();
    let (from, to) = (district.database.clone(), bundle.clone());
    tokio::task::spawn_blocking(move || coursed::bundle::export(&from, &to, false, Contents::WithHistory))
        .await
        .unwrap()
        .unwrap();
    let (plain, to) = (dir.path().join("plain.jsonl").to_str().unwrap().to_owned(), district.database.clone());
    let out = plain.clone();
    tokio::task::spawn_blocking(move || coursed::bundle::export(&to, &out, false, Contents::Catalogue))
        .await
        .unwrap()
        .unwrap();
    let seeded = district.engine.fresh_database(dir.path());
    let follow = coursed::bundle::Options { follow: true, ..Default::default() };
    let (db, file) = (seeded.clone(), plain.clone());
    let e =
        tokio::task::spawn_blocking(move || coursed::bundle::import(&db, &file, follow)).await.unwrap().unwrap_err();
    assert!(e.contains("--history"), "{e}");
    let (db, file) = (seeded.clone(), bundle.clone());
    let said = tokio::task::spawn_blocking(move || coursed::bundle::import(&db, &file, follow)).await.unwrap().unwrap();
    assert_eq!(said.follows, Some(head(&district).await));
    changes(&district, 31, 30).await;
    let school = TestApp::open(district.engine, &seeded).await.unwrap();
    let _f = coursed::follow::spawn(school.app.db.clone(), &url, TOKEN, school.app.follow.clone()).unwrap();
    caught_up(&school, head(&district).await).await;
    assert_eq!(catalogue(&school.database).await, catalogue(&district.database).await);
    // Each resource's history as the district keeps it.
    let attributes = |r: crate::helpers::Resp| r.data().iter().map(|r| r["attributes"].clone()).collect::<Vec<_>>();
    for id in district.get("/v1/subjects?page[size]=5").await.ids() {
        let path = format!("/v1/subjects/{id}/revisions");
        assert_eq!(attributes(school.get(&path).await), attributes(district.get(&path).await), "{path}");
    }
}

/// A district restored from an older copy of its SQLite file keeps its feed id; once it has
/// written past a school's cursor, the school finds out and stops rather than diverge.
#[tokio::test]
async fn a_district_restored_from_an_older_backup_is_not_followed_blindly() {
    let district = TestApp::new().await;
    changes(&district, 47, 20).await;
    let dir = tempfile::tempdir().unwrap();
    let older = dir.path().join("older.db");
    let (from, to) = (district.database.clone(), older.clone());
    tokio::task::spawn_blocking(move || coursed::store::snapshot_sqlite(&from, &to)).await.unwrap().unwrap();
    changes(&district, 53, 20).await;
    let (addr, stop) = serve(&district).await;
    let school = TestApp::new().await;
    let f = coursed::follow::spawn(school.app.db.clone(), &format!("http://{addr}"), TOKEN, school.app.follow.clone())
        .unwrap();
    let cursor = head(&district).await;
    caught_up(&school, cursor).await;
    drop(f);
    let _ = stop.send(());
    // The district comes back from the older file, and writes on past the school's cursor.
    let restored = TestApp::open(crate::engines::Engine::Sqlite, older.to_str().unwrap()).await.unwrap();
    while head(&restored).await <= cursor {
        restored.module("After the restore").await;
    }
    let (addr, _stop) = serve(&restored).await;
    let _g = coursed::follow::spawn(school.app.db.clone(), &format!("http://{addr}"), TOKEN, school.app.follow.clone())
        .unwrap();
    let meta = wait_meta(&school, |m| m["state"] == "stopped").await;
    assert!(meta["error"].as_str().unwrap().contains("restored from an older backup"), "{meta}");
    assert_eq!(meta["cursor"], json!(cursor.to_string()));
}

on_both!(a_follower_reads_a_page_a_second_where_streams_are_refused);
async fn a_follower_reads_a_page_a_second_where_streams_are_refused() {
    // A district whose one stream is taken: the follower's stream is a 503.
    let district = TestApp::new().await.configured(|app| app.streams = Arc::new(coursed::app::Streams::new(1)));
    district.module("Before").await;
    let (addr, _stop) = serve(&district).await;
    let mut taken = TcpStream::connect(addr).unwrap();
    write!(taken, "GET /v1/revisions/stream HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n")
        .unwrap();
    // Held open until the test ends.
    let _taken = tokio::task::spawn_blocking(move || {
        let mut status = [0u8; 12];
        taken.read_exact(&mut status).unwrap();
        assert_eq!(&status, b"HTTP/1.1 200");
        taken
    })
    .await
    .unwrap();
    let school = TestApp::new().await;
    let _f = coursed::follow::spawn(school.app.db.clone(), &format!("http://{addr}"), TOKEN, school.app.follow.clone())
        .unwrap();
    wait_meta(&school, |m| m["state"] == "polling").await;
    // Changes still arrive, within about a second.
    for i in 0..3 {
        district.module(&format!("While polling {i}")).await;
        let started = Instant::now();
        caught_up(&school, head(&district).await).await;
        assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    }
    assert_eq!(catalogue(&school.database).await, catalogue(&district.database).await);
    assert_eq!(follow_meta(&school).await["state"], "polling");
}

/// Waits until the school's `meta.follow` satisfies `done` (it follows nothing yet: `meta`
/// comes from the running follower).
async fn wait_meta(school: &TestApp, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let meta = school.app.follow.meta(&school.app.db).await.unwrap_or(Value::Null);
        if done(&meta) {
            return meta;
        }
        assert!(Instant::now() < deadline, "not within 20 s: {meta}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `coursed export --since` into a file of `dir`.
async fn delta(district: &TestApp, since: i64, dir: &std::path::Path, name: &str) -> String {
    let (database, out) = (district.database.clone(), dir.join(name).to_str().unwrap().to_owned());
    let path = out.clone();
    tokio::task::spawn_blocking(move || coursed::bundle::export(&database, &out, false, Contents::Delta { since }))
        .await
        .unwrap()
        .unwrap();
    path
}

/// `coursed import FILE --database D`: success, and what it said.
async fn import(database: &str, file: &str, dry_run: bool) -> Result<String, String> {
    let (database, file) = (database.to_owned(), file.to_owned());
    tokio::task::spawn_blocking(move || {
        let opts = coursed::bundle::Options { dry_run, ..Default::default() };
        coursed::bundle::import(&database, &file, opts).map(|i| i.to_string())
    })
    .await
    .unwrap()
}

on_both!(deltas_carried_by_hand_apply_once_and_in_order);
async fn deltas_carried_by_hand_apply_once_and_in_order() {
    let district = TestApp::new().await;
    let dir = tempfile::tempdir().unwrap();
    changes(&district, 3, 50).await;
    let first_head = head(&district).await;
    let d1 = delta(&district, 0, dir.path(), "week1.jsonl").await;
    changes(&district, 5, 50).await;
    let second_head = head(&district).await;
    let d2 = delta(&district, first_head, dir.path(), "week2.jsonl").await;
    changes(&district, 9, 30).await;
    let d3 = delta(&district, 0, dir.path(), "all.jsonl").await;
    let header: Value = serde_json::from_str(std::fs::read_to_string(&d2).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(header["version"], 3);
    assert_eq!(header["since"], json!(first_head.to_string()));
    assert_eq!(header["until"], json!(second_head.to_string()));
    let school = district.engine.fresh_database(dir.path().join("school").as_path());
    if district.engine == crate::engines::Engine::Sqlite {
        std::fs::create_dir_all(dir.path().join("school")).unwrap();
    }
    // The second week before the first: refused, and nothing written.
    let e = import(&school, &d2, false).await.unwrap_err();
    assert!(e.contains(&format!("after cursor {first_head}")) && e.contains("export --since 0"), "{e}");
    // In order; each twice; the older after the newer; the whole after both.
    let said = import(&school, &d1, false).await.unwrap();
    assert!(said.contains(&format!("its cursor is {first_head}")), "{said}");
    let once = catalogue(&school).await;
    // A dry run writes nothing.
    let said = import(&school, &d2, true).await.unwrap();
    assert!(said.contains(&format!("its cursor is {second_head}")), "{said}");
    assert_eq!(catalogue(&school).await, once);
    let said = import(&school, &d1, false).await.unwrap();
    assert!(said.starts_with("nothing to apply"), "{said}");
    assert_eq!(catalogue(&school).await, once);
    let said = import(&school, &d2, false).await.unwrap();
    assert!(said.contains(&format!("its cursor is {second_head}")), "{said}");
    for again in [&d2, &d1] {
        assert!(import(&school, again, false).await.unwrap().starts_with("nothing to apply"));
    }
    let said = import(&school, &d3, false).await.unwrap();
    assert!(said.contains(&format!("its cursor is {}", head(&district).await)), "{said}");
    assert_eq!(catalogue(&school).await, catalogue(&district.database).await);
    // A delta of another district: refused.
    let elsewhere = TestApp::new().await;
    elsewhere.module("Elsewhere").await;
    let other = delta(&elsewhere, 0, dir.path(), "other.jsonl").await;
    let e = import(&school, &other, false).await.unwrap_err();
    assert!(e.contains("follows the feed"), "{e}");
    // A delta cut short or tampered with: refused, and nothing written.
    let third_head = head(&district).await;
    changes(&district, 17, 20).await;
    let d4 = delta(&district, third_head, dir.path(), "week4.jsonl").await;
    let text = std::fs::read_to_string(&d4).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, lines[..lines.len() - 1].join("\n")).unwrap();
    let before = catalogue(&school).await;
    let e = import(&school, cut.to_str().unwrap(), false).await.unwrap_err();
    assert!(e.contains("trailer"), "{e}");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, text.replacen("\"action\":\"", "\"action\":\"x", 1)).unwrap();
    let e = import(&school, bad.to_str().unwrap(), false).await.unwrap_err();
    assert!(e.contains("line 2: revisions: attributes.action"), "{e}");
    assert_eq!(catalogue(&school).await, before);
    assert!(import(&school, &d4, false).await.is_ok());
    assert_eq!(catalogue(&school).await, catalogue(&district.database).await);
    // A delta of a feed pruned past its start cannot be written.
    let e = tokio::task::spawn_blocking({
        let database = district.database.clone();
        let out = dir.path().join("future.jsonl").to_str().unwrap().to_owned();
        move || coursed::bundle::export(&database, &out, false, Contents::Delta { since: i64::MAX / 2 })
    })
    .await
    .unwrap()
    .unwrap_err();
    assert!(e.contains("beyond it"), "{e}");
    // The school's server refuses writes, naming deltas; forgetting gives the catalogue back.
    let served = TestApp::open(district.engine, &school).await.unwrap();
    assert_eq!(history(&served).await, history(&district).await);
    let r =
        served.write("POST", "/v1/modules", json!({"data": {"type": "modules", "attributes": {"title": "x"}}})).await;
    r.assert_problem(403);
    assert!(r.error()["detail"].as_str().unwrap().contains("delta bundles"), "{:?}", r.error());
    let meta = follow_meta(&served).await;
    assert_eq!(meta["upstream"], "bundles");
    assert!(meta.get("lag").is_none(), "no follower runs here: {meta}");
    let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["follow", "--forget", "--database", &school])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    tokio::time::sleep(Duration::from_millis(1100)).await;
    served
        .write("POST", "/v1/modules", json!({"data": {"type": "modules", "attributes": {"title": "x"}}}))
        .await
        .assert_status(201);
}

/// One request that may fail (the district may be down): the status, or `None`.
fn try_call(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
    crate::process::try_call(addr, method, path, TOKEN, body)
}

/// `coursed export` of `database` by the binary, after its header line.
fn exported(database: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["export", "--output", "-", "--database", database])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().skip(1).map(str::to_owned).collect()
}

on_both!(a_school_converges_with_its_district_through_kills_and_cut_links);
/// The district on the test's engine, the school on the other (a PostgreSQL district and a
/// SQLite school, and the other way round), both real processes: the district written to
/// all along, the school killed (-9) and started again, the link cut, the district killed and
/// started again behind the same address; at the end, the same `coursed export` lines.
async fn a_school_converges_with_its_district_through_kills_and_cut_links() {
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::engines::Engine::current();
    let other = match engine {
        crate::engines::Engine::Sqlite if crate::pg_cluster::server().is_some() => crate::engines::Engine::Postgres,
        _ => crate::engines::Engine::Sqlite,
    };
    std::fs::create_dir_all(dir.path().join("d")).unwrap();
    std::fs::create_dir_all(dir.path().join("s")).unwrap();
    let district_db = engine.fresh_database(&dir.path().join("d"));
    let school_db = other.fresh_database(&dir.path().join("s"));
    tokio::task::spawn_blocking(move || {
        let start_district = |db: &str| Server::start(&["--database", db, "--token", TOKEN]);
        let mut district = start_district(&district_db);
        let relay = Relay::start(&district.addr);
        let upstream = format!("http://127.0.0.1:{}", relay.port);
        let start_school = || {
            Starting::spawn(&["--database", &school_db, "--token", TOKEN, "--follow", &upstream, "--follow-token", TOKEN])
                .ready()
                .unwrap()
        };
        let mut school = start_school();
        // The writer: modules, subjects in them, changes and deletions, acknowledged or not
        // (while the district is down, nothing is).
        let target = Arc::new(Mutex::new(district.addr.clone()));
        let done = Arc::new(AtomicBool::new(false));
        let writer = {
            let (target, done) = (target.clone(), done.clone());
            std::thread::spawn(move || {
                let (mut modules, mut subjects, mut i) = (Vec::<String>::new(), Vec::<String>::new(), 0);
                while !done.load(Ordering::SeqCst) {
                    i += 1;
                    let addr = target.lock().unwrap().clone();
                    let module = modules.last().map(|m| json!({"module": {"data": {"type": "modules", "id": m}}}));
                    let (path, body) = match i % 7 {
                        0 => ("/v1/modules".to_owned(), json!({"data": {"type": "modules", "attributes": {"title": format!("M{i}")}}})),
                        3 if !subjects.is_empty() => {
                            let s = subjects[i % subjects.len()].clone();
                            let r = try_call(&addr, "DELETE", &format!("/v1/subjects/{s}"), None);
                            if r.is_some_and(|(st, _)| st == 204) {
                                subjects.retain(|x| *x != s);
                            }
                            continue;
                        }
                        5 if !subjects.is_empty() => {
                            let s = subjects[i % subjects.len()].clone();
                            let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": format!("T{i}")}}});
                            try_call(&addr, "PATCH", &format!("/v1/subjects/{s}"), Some(&body));
                            continue;
                        }
                        6 if !subjects.is_empty() => {
                            let s = &subjects[i % subjects.len()];
                            let body = json!({"data": {"type": "chapters", "attributes": {"title": format!("C{i}"), "position": i % 9}, "relationships": {"subject": {"data": {"type": "subjects", "id": s}}}}});
                            try_call(&addr, "POST", "/v1/chapters", Some(&body));
                            continue;
                        }
                        _ => (
                            "/v1/subjects".to_owned(),
                            json!({"data": {"type": "subjects", "attributes": {"title": format!("S{i}")}, "relationships": module.unwrap_or(json!({}))}}),
                        ),
                    };
                    if let Some((201, doc)) = try_call(&addr, "POST", &path, Some(&body)) {
                        let id = doc["data"]["id"].as_str().unwrap().to_owned();
                        if path == "/v1/modules" { modules.push(id) } else { subjects.push(id) }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        let pause = |ms| std::thread::sleep(Duration::from_millis(ms));
        pause(700);
        // The school killed mid-stream, and started again.
        school.signal("-KILL");
        let _ = school.child.wait();
        pause(300);
        school = start_school();
        pause(500);
        // The link cut, then back.
        relay.cut.store(true, Ordering::SeqCst);
        pause(1500);
        relay.cut.store(false, Ordering::SeqCst);
        pause(500);
        // The district killed mid-write, and started again behind the same address.
        district.signal("-KILL");
        let _ = district.child.wait();
        pause(200);
        district = start_district(&district_db);
        *target.lock().unwrap() = district.addr.clone();
        relay.point_to(&district.addr);
        pause(700);
        // Both killed at once, then both back.
        school.signal("-KILL");
        district.signal("-KILL");
        let _ = (school.child.wait(), district.child.wait());
        district = start_district(&district_db);
        *target.lock().unwrap() = district.addr.clone();
        relay.point_to(&district.addr);
        school = start_school();
        pause(700);
        done.store(true, Ordering::SeqCst);
        writer.join().unwrap();
        // The school catches up with everything the district holds.
        let (_, feed) = try_call(&district.addr, "GET", "/v1/revisions?page%5Bsize%5D=1", None).unwrap();
        let head = feed["meta"]["head"].as_str().unwrap().to_owned();
        assert!(head.parse::<i64>().unwrap() > 50, "the writer wrote too little to test anything: {head}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = try_call(&school.addr, "GET", "/readyz", None).map(|(_, b)| b).unwrap_or(Value::Null);
            if ready["follow"]["cursor"] == json!(head) {
                assert_eq!(ready["follow"]["lag"], json!(0.0), "{ready}");
                break;
            }
            assert!(Instant::now() < deadline, "the school did not reach {head}: {ready}");
            pause(50);
        }
        drop(school);
        drop(district);
        let (d, s) = (exported(&district_db), exported(&school_db));
        assert!(d.len() > 20, "{}", d.len());
        assert_eq!(d, s, "the school's catalogue is not the district's");
    })
    .await
    .unwrap();
}
