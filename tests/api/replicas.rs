//! Several coursed processes on one database behave as one server: health endpoints for the
//! load balancer, writes seen at once everywhere, rules that hold under concurrent writes
//! through different replicas, migrations that run once.

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{many, on_both, Engine, TestApp};

on_both!(health_endpoints_answer_without_a_token);
async fn health_endpoints_answer_without_a_token() {
    let t = TestApp::new().await;
    for (path, status) in [("/healthz", "ok"), ("/readyz", "ready")] {
        let r = t.send(warp::test::request().method("GET").path(path)).await;
        r.assert_status(200);
        assert_eq!(r.body, json!({ "status": status }));
        assert_eq!(r.header("content-type"), Some("application/json"));
        let r = t.send(warp::test::request().method("POST").path(path)).await;
        r.assert_problem(405);
        assert_eq!(r.header("allow"), Some("GET, HEAD"));
    }
}

on_both!(a_write_through_one_replica_is_read_at_once_through_another);
async fn a_write_through_one_replica_is_read_at_once_through_another() {
    let (a, b) = TestApp::pair().await;
    let m = a.module("Written by a").await;
    let r = b.get(&format!("/v1/modules/{m}")).await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["attributes"]["title"], "Written by a");
    let patch = json!({"data": {"type": "modules", "id": m, "attributes": {"title": "Patched by b"}}});
    b.write("PATCH", &format!("/v1/modules/{m}"), patch).await.assert_status(200);
    assert_eq!(a.get(&format!("/v1/modules/{m}")).await.body["data"]["attributes"]["title"], "Patched by b");
    // Counts are kept in the database, not in either process.
    for i in 0..3 {
        b.subject(&format!("S{i}"), Some(&m)).await;
    }
    assert_eq!(a.get("/v1/subjects").await.body["meta"]["page"]["total"], 3);
    assert_eq!(a.get(&format!("/v1/modules/{m}/subjects")).await.body["meta"]["page"]["total"], 3);
    b.delete(&format!("/v1/modules/{m}")).await.assert_status(204);
    a.get(&format!("/v1/modules/{m}")).await.assert_problem(404);
}

on_both!(concurrent_duplicate_external_ids_through_two_replicas_leave_exactly_one);
async fn concurrent_duplicate_external_ids_through_two_replicas_leave_exactly_one() {
    let (a, b) = TestApp::pair().await;
    let body = json!({"data": {"type": "subjects", "attributes": {"title": "Same", "external_id": "EXT-1"}}});
    let posts = (0..20).map(|i| {
        let (t, body) = (if i % 2 == 0 { &a } else { &b }, body.clone());
        async move { t.write("POST", "/v1/subjects", body).await.status.as_u16() }
    });
    let mut statuses = join_all(posts).await;
    statuses.sort_unstable();
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 201 || *s == 409), "{statuses:?}");
    let r = b.get("/v1/subjects?filter[external_id]=EXT-1").await;
    assert_eq!(r.data().len(), 1);
    assert_eq!(a.get("/v1/subjects").await.body["meta"]["page"]["total"], 1);
}

/// The ids of a module's subjects, and the total its related collection reports.
async fn members(t: &TestApp, m: &str) -> (Vec<String>, u64) {
    let linkage = t.get(&format!("/v1/modules/{m}/relationships/subjects")).await;
    let mut ids: Vec<String> = linkage.data().iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    ids.sort();
    let total = t.get(&format!("/v1/modules/{m}/subjects")).await.body["meta"]["page"]["total"].as_u64().unwrap();
    (ids, total)
}

on_both!(concurrent_relationship_moves_through_two_replicas_end_as_one_of_them);
async fn concurrent_relationship_moves_through_two_replicas_end_as_one_of_them() {
    let (a, b) = TestApp::pair().await;
    let m = a.module("Contested").await;
    let other = a.module("Other").await;
    let mut s = Vec::new();
    for i in 0..6 {
        s.push(a.subject(&format!("S{i}"), Some(if i < 2 { &m } else { &other })).await);
    }
    let path = format!("/v1/modules/{m}/relationships/subjects");
    for round in 0..10 {
        let (first, second) = (vec![s[0].as_str(), s[2].as_str()], vec![s[3].as_str(), s[4].as_str(), s[5].as_str()]);
        let (ra, rb) = tokio::join!(
            a.write("PATCH", &path, many("subjects", &first)),
            b.write("PATCH", &path, many("subjects", &second))
        );
        ra.assert_status(200);
        rb.assert_status(200);
        let (ids, total) = members(&a, &m).await;
        let mut one: Vec<String> = first.iter().map(|x| x.to_string()).collect();
        let mut two: Vec<String> = second.iter().map(|x| x.to_string()).collect();
        one.sort();
        two.sort();
        assert!(ids == one || ids == two, "round {round}: {ids:?} is neither whole set");
        assert_eq!(total, ids.len() as u64, "the kept count follows the moves");
        // Put everything back in the other module for the next round.
        a.write(
            "PATCH",
            &format!("/v1/modules/{other}/relationships/subjects"),
            many("subjects", &s.iter().map(String::as_str).collect::<Vec<_>>()),
        )
        .await
        .assert_status(200);
    }
}

on_both!(chapters_never_lose_their_subject_under_concurrent_moves_and_deletes);
async fn chapters_never_lose_their_subject_under_concurrent_moves_and_deletes() {
    let (a, b) = TestApp::pair().await;
    let keep = a.subject("Keeps", None).await;
    let mut work = Vec::new();
    for i in 0..8 {
        let doomed = a.subject(&format!("Doomed {i}"), None).await;
        let chapter = a.chapter(&format!("C{i}"), &doomed, 0).await;
        work.push((doomed, chapter));
    }
    let races = work.iter().map(|(doomed, chapter)| {
        let (a, b, keep) = (&a, &b, &keep);
        async move {
            let moved = json!({"data": {"type": "subjects", "id": keep}});
            let (link, gone) =
                (format!("/v1/chapters/{chapter}/relationships/subject"), format!("/v1/subjects/{doomed}"));
            let (mv, del) = tokio::join!(a.write("PATCH", &link, moved), b.delete(&gone));
            (mv.status.as_u16(), del.status.as_u16())
        }
    });
    for (mv, del) in join_all(races).await {
        assert_eq!(del, 204);
        assert!(mv == 200 || mv == 404, "a move either wins or finds the chapter gone: {mv}");
    }
    // Every chapter left belongs to a subject that exists, and the counts agree.
    let chapters = a.get("/v1/chapters?page[size]=100&include=subject").await;
    let total = chapters.body["meta"]["page"]["total"].as_u64().unwrap();
    assert_eq!(total as usize, chapters.data().len());
    for c in chapters.data() {
        assert_eq!(c["relationships"]["subject"]["data"]["id"], Value::from(keep.clone()), "{c}");
    }
    let kept = b.get(&format!("/v1/subjects/{keep}/chapters")).await;
    assert_eq!(kept.body["meta"]["page"]["total"].as_u64().unwrap(), total);
}

on_both!(replicas_starting_together_migrate_once);
async fn replicas_starting_together_migrate_once() {
    let engine = Engine::current();
    let dir = tempfile::tempdir().unwrap();
    let database = engine.fresh_database(dir.path());
    let opens = (0..4).map(|_| {
        let database = database.clone();
        tokio::task::spawn_blocking(move || coursed::store::Db::open(&crate::helpers::test_options(&database)))
    });
    for opened in join_all(opens).await {
        opened.unwrap().expect("every replica opens the database");
    }
    if engine == Engine::Postgres {
        let t = TestApp::open(engine, &database).await.unwrap();
        // Each migration recorded once, however many replicas raced to apply it.
        let (rows, last) = (
            t.sql_i64("SELECT count(*) FROM coursed_schema", vec![]).await,
            t.sql_i64("SELECT max(version) FROM coursed_schema", vec![]).await,
        );
        assert_eq!(rows, last);
        assert!(last >= 2, "{last}");
    }
}

on_both!(a_database_of_a_newer_coursed_or_of_another_application_is_refused);
async fn a_database_of_a_newer_coursed_or_of_another_application_is_refused() {
    let engine = Engine::current();
    let dir = tempfile::tempdir().unwrap();
    let open = |database: String| {
        tokio::task::spawn_blocking(move || {
            coursed::store::Db::open(&crate::helpers::test_options(&database)).err().expect("refused")
        })
    };
    let foreign = engine.fresh_database(dir.path());
    engine.execute(&foreign, "CREATE TABLE invoices (id integer PRIMARY KEY)");
    let e = open(foreign).await.unwrap();
    assert!(e.contains("not a coursed database"), "{e}");

    let newer = match engine {
        Engine::Sqlite => dir.path().join("newer.db").to_str().unwrap().to_owned(),
        Engine::Postgres => engine.fresh_database(dir.path()),
    };
    drop(
        tokio::task::spawn_blocking({
            let d = newer.clone();
            move || coursed::store::Db::open(&crate::helpers::test_options(&d)).expect("a new database")
        })
        .await
        .unwrap(),
    );
    let bump = match engine {
        Engine::Sqlite => "PRAGMA user_version = 99",
        Engine::Postgres => "INSERT INTO coursed_schema (version) VALUES (99)",
    };
    engine.execute(&newer, bump);
    let e = open(newer).await.unwrap();
    assert!(e.contains("newer"), "{e}");
}

on_both!(writes_committed_together_each_answer_for_themselves);
/// Concurrent one-statement writes are committed in groups: a write that fails (a duplicate
/// `external_id`, an unknown module) answers only its own request, and every other write of
/// its group is kept.
async fn writes_committed_together_each_answer_for_themselves() {
    let (a, b) = TestApp::pair().await;
    let m = a.module("Kept").await;
    let gone = "01890000-0000-7000-8000-000000000000";
    let body = |i: usize| {
        let (external_id, module) = match i % 4 {
            0 => (json!("DUP"), json!({"data": {"type": "modules", "id": m}})),
            1 => (json!(format!("U{i}")), json!({"data": {"type": "modules", "id": gone}})),
            _ => (json!(format!("U{i}")), json!({"data": {"type": "modules", "id": m}})),
        };
        json!({"data": {"type": "subjects", "attributes": {"title": format!("S{i}"), "external_id": external_id},
            "relationships": {"module": module}}})
    };
    let posts = (0..48).map(|i| {
        let (t, body) = (if i % 2 == 0 { &a } else { &b }, body(i));
        async move { (i % 4, t.write("POST", "/v1/subjects", body).await.status.as_u16()) }
    });
    let answers = join_all(posts).await;
    let of = |kind: usize, status: u16| answers.iter().filter(|(k, s)| *k == kind && *s == status).count();
    assert_eq!((of(0, 201), of(0, 409)), (1, 11), "{answers:?}");
    assert_eq!(of(1, 404), 12, "{answers:?}");
    assert_eq!(of(2, 201) + of(3, 201), 24, "{answers:?}");
    let r = b.get(&format!("/v1/modules/{m}/subjects?page[size]=100")).await;
    assert_eq!(r.data().len(), 25);
    assert_eq!(r.body["meta"]["page"]["total"], 25);
    assert_eq!(a.get("/v1/subjects").await.body["meta"]["page"]["total"], 25);
}
