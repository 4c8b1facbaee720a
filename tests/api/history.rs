//! Every change kept: revisions recorded by every kind of write, read as JSON:API, and the
//! change feed in commit order without a gap (both engines).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::engines::{on_both, Engine};
use crate::helpers::{many, one, TestApp};

/// The feed from its start, every page followed.
pub(crate) async fn whole_feed(t: &TestApp, filter: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut path = format!("/v1/revisions?page[size]=7{filter}");
    loop {
        let r = t.get(&path).await;
        r.assert_status(200);
        let data = r.data().clone();
        let next = r.body["links"]["next"].as_str().expect("links.next always").to_owned();
        let done = data.is_empty();
        out.extend(data);
        if done {
            return out;
        }
        path = next.strip_prefix("http://localhost:8080").unwrap().to_owned();
    }
}

/// (type, action, number) of each revision.
fn shapes(revisions: &[Value]) -> Vec<(String, String, i64)> {
    revisions
        .iter()
        .map(|r| {
            let a = &r["attributes"];
            (
                r["relationships"]["resource"]["data"]["type"].as_str().unwrap().to_owned(),
                a["action"].as_str().unwrap().to_owned(),
                a["number"].as_i64().unwrap(),
            )
        })
        .collect()
}

on_both!(every_write_records_one_revision_per_resource_it_changed);
async fn every_write_records_one_revision_per_resource_it_changed() {
    let t = TestApp::new().await;
    let m = t.module("Algebra").await;
    let s = t.subject("Groups", Some(&m)).await;
    let c = t.chapter("Axioms", &s, 1).await;
    let patch =
        json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "Rings", "available_for_courses": true}}});
    t.write("PATCH", &format!("/v1/subjects/{s}"), patch.clone()).await.assert_status(200);
    // The same values again: nothing changed, nothing recorded.
    t.write("PATCH", &format!("/v1/subjects/{s}"), patch).await.assert_status(200);
    t.write("PATCH", &format!("/v1/subjects/{s}/relationships/module"), json!({"data": null})).await.assert_status(200);
    t.write("POST", &format!("/v1/modules/{m}/relationships/subjects"), many("subjects", &[&s]))
        .await
        .assert_status(204);
    let ops = json!({"atomic:operations": [
        {"op": "update", "data": {"type": "chapters", "id": c, "attributes": {"position": 2}}},
        {"op": "add", "data": {"type": "modules", "lid": "n", "attributes": {"title": "Geometry"}}},
    ]});
    let r = t
        .send(
            t.req("POST", "/v1/operations")
                .header("content-type", "application/vnd.api+json;ext=\"https://jsonapi.org/ext/atomic\"")
                .header("accept", "application/vnd.api+json;ext=\"https://jsonapi.org/ext/atomic\"")
                .body(ops.to_string()),
        )
        .await;
    r.assert_status(200);
    // Deleting the module lets its subject go (a subject revision first); deleting the subject
    // takes its chapter along (the chapter's revision after the subject's, on both engines).
    t.delete(&format!("/v1/modules/{m}")).await.assert_status(204);
    t.delete(&format!("/v1/subjects/{s}")).await.assert_status(204);

    let feed = whole_feed(&t, "").await;
    let expected = [
        ("modules", "create", 1),
        ("subjects", "create", 1),
        ("chapters", "create", 1),
        ("subjects", "update", 2),
        ("subjects", "update", 3),
        ("subjects", "update", 4),
        ("chapters", "update", 2),
        ("modules", "create", 1),
        ("subjects", "update", 5),
        ("modules", "delete", 2),
        ("subjects", "delete", 6),
        ("chapters", "delete", 3),
    ];
    let expected: Vec<_> = expected.iter().map(|(t, a, n)| (t.to_string(), a.to_string(), *n)).collect();
    assert_eq!(shapes(&feed), expected);
    for r in &feed {
        assert_eq!(r["attributes"]["by"], "config", "{r}");
    }
    // What changed, before and after; a to-one relationship as a resource identifier.
    let update = &feed[3]["attributes"]["changes"];
    assert_eq!(update["title"], json!({"before": "Groups", "after": "Rings"}));
    assert_eq!(update["available_for_courses"], json!({"before": false, "after": true}));
    assert!(update["updated_at"]["after"].is_string());
    let keys: Vec<&String> = update.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 3, "only what changed: {update}");
    assert_eq!(
        feed[4]["attributes"]["changes"]["module"],
        json!({"before": {"type": "modules", "id": m}, "after": null})
    );
    assert_eq!(feed[1]["attributes"]["changes"]["module"]["after"], json!({"type": "modules", "id": m}));
    assert_eq!(feed[6]["attributes"]["changes"]["position"], json!({"before": 1, "after": 2}));
    assert_eq!(feed[10]["attributes"]["changes"]["title"], json!({"before": "Rings", "after": null}));

    // A resource's revisions, newest first, paged; a deleted one keeps them.
    let r = t.get(&format!("/v1/subjects/{s}/revisions?page[size]=4")).await;
    r.assert_status(200);
    let numbers: Vec<i64> = r.data().iter().map(|r| r["attributes"]["number"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [6, 5, 4, 3]);
    assert_eq!(r.body["meta"]["page"]["total"], 6);
    assert_eq!(r.body["meta"]["page"]["lastPage"], 2);
    let next = r.body["links"]["next"].as_str().unwrap().strip_prefix("http://localhost:8080").unwrap().to_owned();
    let numbers: Vec<i64> =
        t.get(&next).await.data().iter().map(|r| r["attributes"]["number"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [2, 1]);
    // One revision by its id, as the feed gave it.
    let id = feed[3]["id"].as_str().unwrap();
    let r = t.get(&format!("/v1/revisions/{id}")).await;
    r.assert_status(200);
    assert_eq!(r.body["data"], feed[3]);
    // Ids that never were.
    t.get("/v1/revisions/00000000-0000-8000-8000-00000000ffff").await.assert_problem(404);
    t.get("/v1/revisions/nope").await.assert_problem(404);
    t.get("/v1/subjects/01a221d7-42c0-743b-b565-0ce8e4ddcc3e/revisions").await.assert_problem(404);
}

on_both!(the_feed_pages_by_cursor_filters_by_type_and_refuses_what_it_cannot_read);
async fn the_feed_pages_by_cursor_filters_by_type_and_refuses_what_it_cannot_read() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    for i in 0..5 {
        t.subject(&format!("S{i}"), Some(&m)).await;
    }
    let r = t.get("/v1/revisions?page[size]=4").await;
    r.assert_status(200);
    assert_eq!(r.data().len(), 4);
    let cursors: Vec<String> = r.data().iter().map(|r| r["meta"]["cursor"].as_str().unwrap().to_owned()).collect();
    let next = r.body["links"]["next"].as_str().unwrap().to_owned();
    assert!(next.contains(&format!("page%5Bafter%5D={}", cursors[3])), "{next}");
    let r = t.get(next.strip_prefix("http://localhost:8080").unwrap()).await;
    assert_eq!(r.data().len(), 2);
    let last = r.data()[1]["meta"]["cursor"].as_str().unwrap().to_owned();
    // Nothing new: no revisions, and the same cursor again.
    let r = t.get(&format!("/v1/revisions?page[after]={last}")).await;
    r.assert_status(200);
    assert!(r.data().is_empty());
    assert!(r.body["links"]["next"].as_str().unwrap().contains(&format!("page%5Bafter%5D={last}&")));
    // Something new appears after that cursor, and only it.
    t.module("N").await;
    let r = t.get(&format!("/v1/revisions?page[after]={last}")).await;
    assert_eq!(shapes(r.data()), [("modules".to_string(), "create".to_string(), 1)]);
    // Filtered by type.
    let modules = whole_feed(&t, "&filter[type]=modules").await;
    assert_eq!(modules.len(), 2);
    assert_eq!(whole_feed(&t, "&filter[type]=subjects,chapters").await.len(), 5);
    for bad in [
        "/v1/revisions?page[size]=0",
        "/v1/revisions?page[size]=1001",
        "/v1/revisions?page[after]=x",
        "/v1/revisions?page[after]=-1",
        "/v1/revisions?filter[type]=people",
        "/v1/revisions?sort=at",
        "/v1/revisions?page[number]=2",
    ] {
        t.get(bad).await.assert_problem(400);
    }
    t.write("POST", "/v1/revisions", json!({})).await.assert_problem(405);
}

on_both!(replaying_the_feed_rebuilds_the_catalogue);
async fn replaying_the_feed_rebuilds_the_catalogue() {
    let t = TestApp::new().await;
    // Seeded: the same writes on every run.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let (mut modules, mut subjects, mut chapters): (Vec<String>, Vec<String>, Vec<String>) = Default::default();
    for step in 0..120 {
        match next(9) {
            0 | 1 => modules.push(t.module(&format!("M{step}")).await),
            2 | 3 => {
                let m = (!modules.is_empty() && next(3) > 0).then(|| modules[next(modules.len())].clone());
                subjects.push(t.subject(&format!("S{step}"), m.as_deref()).await);
            }
            4 if !subjects.is_empty() => {
                let s = subjects[next(subjects.len())].clone();
                chapters.push(t.chapter(&format!("C{step}"), &s, next(5) as i64).await);
            }
            5 if !subjects.is_empty() => {
                let s = subjects[next(subjects.len())].clone();
                let body =
                    json!({"data": {"type": "subjects", "id": s, "attributes": {"introduction": format!("i{step}")}}});
                t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
            }
            6 if !subjects.is_empty() && !modules.is_empty() => {
                let (s, m) = (subjects[next(subjects.len())].clone(), modules[next(modules.len())].clone());
                t.write("PATCH", &format!("/v1/subjects/{s}/relationships/module"), one("modules", &m))
                    .await
                    .assert_status(200);
            }
            7 if !modules.is_empty() => {
                let m = modules.remove(next(modules.len()));
                t.delete(&format!("/v1/modules/{m}")).await.assert_status(204);
            }
            8 if !subjects.is_empty() => {
                let s = subjects.remove(next(subjects.len()));
                t.delete(&format!("/v1/subjects/{s}")).await.assert_status(204);
                chapters.clear(); // some went with it; the comparison below reads what is left
            }
            _ => {}
        }
    }
    // The replay: each revision's `after` values applied in feed order.
    let mut replayed: BTreeMap<(String, String), BTreeMap<String, Value>> = BTreeMap::new();
    for r in whole_feed(&t, "").await {
        let ty = r["relationships"]["resource"]["data"]["type"].as_str().unwrap().to_owned();
        let id = r["relationships"]["resource"]["data"]["id"].as_str().unwrap().to_owned();
        let key = (ty, id);
        if r["attributes"]["action"] == "delete" {
            replayed.remove(&key);
            continue;
        }
        let state = replayed.entry(key).or_default();
        for (name, change) in r["attributes"]["changes"].as_object().unwrap() {
            state.insert(name.clone(), change["after"].clone());
        }
    }
    // The catalogue as the API serves it.
    let mut served: BTreeMap<(String, String), BTreeMap<String, Value>> = BTreeMap::new();
    for ty in ["modules", "subjects", "chapters"] {
        let mut page = 1;
        loop {
            let r = t.get(&format!("/v1/{ty}?page[size]=100&page[number]={page}")).await;
            for d in r.data() {
                let mut state: BTreeMap<String, Value> =
                    d["attributes"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                for rel in ["module", "subject"] {
                    if let Some(link) = d["relationships"].get(rel) {
                        state.insert(rel.into(), link["data"].clone());
                    }
                }
                served.insert((ty.to_owned(), d["id"].as_str().unwrap().to_owned()), state);
            }
            if r.data().len() < 100 {
                break;
            }
            page += 1;
        }
    }
    assert!(served.len() > 20, "the run made a catalogue: {}", served.len());
    assert_eq!(replayed, served);
}

on_both!(a_load_records_one_create_per_resource_by_its_command);
async fn a_load_records_one_create_per_resource_by_its_command() {
    let t = TestApp::generated(coursed::dataset::Shape {
        modules: 3,
        subjects_per_module: 4,
        chapters_per_subject: 2,
        seed: 7,
    })
    .await;
    let feed = whole_feed(&t, "").await;
    assert_eq!(feed.len(), 3 + 12 + 24);
    assert!(feed.iter().all(|r| r["attributes"]["by"] == "generate" && r["attributes"]["action"] == "create"));
    // Parents first: a replay can link each child as it comes.
    let kinds: Vec<String> = shapes(&feed).into_iter().map(|(t, _, _)| t).collect();
    assert!(kinds.windows(2).all(|w| (w[0] == "modules") >= (w[1] == "modules")), "{kinds:?}");
    // A later write goes on counting.
    let s = t.get("/v1/subjects?page[size]=1").await.ids()[0].clone();
    let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "Changed"}}});
    t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
    let r = t.get(&format!("/v1/subjects/{s}/revisions")).await;
    assert_eq!(shapes(r.data()), [("subjects".into(), "update".into(), 2), ("subjects".into(), "create".into(), 1)]);
}

/// PostgreSQL: a transaction that drew its revision's id first and commits last is still in
/// the feed after a cursor handed out meanwhile; a read by revision id would have skipped it.
#[tokio::test]
async fn a_revision_that_commits_late_is_never_behind_a_cursor() {
    Engine::Postgres
        .run(async {
            let t = TestApp::new().await;
            let s = t.subject("Early", None).await;
            let u = t.subject("Later", None).await;
            let head = whole_feed(&t, "").await.last().unwrap()["meta"]["cursor"].as_str().unwrap().to_owned();
            // Another client's transaction changes S and stays open.
            let (url, sid) = (t.database.clone(), s.clone());
            let (go, wait) = std::sync::mpsc::channel::<()>();
            let (began, began_rx) = std::sync::mpsc::channel::<()>();
            let open = std::thread::spawn(move || {
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                let mut tx = c.transaction().unwrap();
                tx.execute("SELECT set_config('coursed.by', 'other', false)", &[]).unwrap();
                tx.execute("UPDATE subjects SET title = 'Early two' WHERE id = $1", &[&sid]).unwrap();
                began.send(()).unwrap();
                wait.recv().unwrap();
                tx.commit().unwrap();
            });
            began_rx.recv().unwrap();
            // Meanwhile U is changed and committed through the API.
            let body = json!({"data": {"type": "subjects", "id": u, "attributes": {"title": "Later two"}}});
            t.write("PATCH", &format!("/v1/subjects/{u}"), body).await.assert_status(200);
            let r = t.get(&format!("/v1/revisions?page[after]={head}")).await;
            let seen: Vec<&str> =
                r.data().iter().map(|r| r["relationships"]["resource"]["data"]["id"].as_str().unwrap()).collect();
            assert_eq!(seen, [u.as_str()], "only what committed");
            let cursor = r.data()[0]["meta"]["cursor"].as_str().unwrap().to_owned();
            go.send(()).unwrap();
            open.join().unwrap();
            let r = t.get(&format!("/v1/revisions?page[after]={cursor}")).await;
            let late: Vec<&str> =
                r.data().iter().map(|r| r["relationships"]["resource"]["data"]["id"].as_str().unwrap()).collect();
            assert_eq!(late, [s.as_str()], "the late commit comes after the cursor");
            assert_eq!(r.data()[0]["attributes"]["by"], "other");
            // Its id was drawn before U's: an order by id would have put it behind the cursor.
            let ids = t
                .sql_i64(
                    "SELECT count(*) FROM revisions a JOIN revisions b ON a.id < b.id \
                     WHERE a.resource_id = ? AND a.number = 2 AND b.resource_id = ? AND b.number = 2",
                    vec![coursed::store::Value::Text(s.clone()), coursed::store::Value::Text(u.clone())],
                )
                .await;
            assert_eq!(ids, 1, "S's revision holds the lower id");
        })
        .await
}

/// PostgreSQL: replicas take turns to prune; one that finds another pruning leaves the work to
/// it (the turn is an advisory lock, held here by another session as a replica would).
#[tokio::test]
async fn a_replica_leaves_a_prune_to_the_one_already_pruning() {
    Engine::Postgres
        .run(async {
            let t = TestApp::new().await;
            let s = t.subject("Edited", None).await;
            for i in 0..3 {
                let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": format!("Edit {i}")}}});
                t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
            }
            t.subject("Newest", None).await;
            let url = t.database.clone();
            let mut other = tokio::task::spawn_blocking(move || {
                let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                c.execute("SELECT pg_advisory_lock(1668445040)", &[]).unwrap();
                c
            })
            .await
            .unwrap();
            let before = coursed::time::now_ms() + 1000;
            let (n, cut) = coursed::history::prune(&t.app.db, before).await.unwrap();
            assert_eq!(n, 0, "left to the other");
            assert!(cut > 0, "the floor is raised all the same");
            assert_eq!(t.get(&format!("/v1/subjects/{s}/revisions")).await.body["meta"]["page"]["total"], 4);
            // The other session ends (a client is dropped off the async threads).
            tokio::task::spawn_blocking(move || {
                other.execute("SELECT pg_advisory_unlock(1668445040)", &[]).unwrap();
                drop(other);
            })
            .await
            .unwrap();
            assert_eq!(coursed::history::prune(&t.app.db, before).await.unwrap(), (3, cut));
        })
        .await
}

/// A database from before history gets one `create` per resource when first opened, parents
/// first, by `migration`; the next write goes on counting from it.
#[tokio::test]
async fn a_database_from_before_history_gets_one_create_per_resource() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.db");
    let now = "'2026-01-01T00:00:00.000Z'";
    crate::copy::schema_version_1(
        &old,
        &format!(
            "INSERT INTO modules (id, title, content, created_at, updated_at) VALUES
                ('01900000-0000-7000-8000-000000000009', 'Old module', '<p>Kept</p>', {now}, {now});
             INSERT INTO subjects (id, title, module_id, available_for_courses, created_at, updated_at) VALUES
                ('01900000-0000-7000-8000-000000000002', 'Old subject', '01900000-0000-7000-8000-000000000009', 1, {now}, {now});
             INSERT INTO chapters (id, title, subject_id, position, created_at, updated_at) VALUES
                ('01900000-0000-7000-8000-000000000001', 'Old chapter', '01900000-0000-7000-8000-000000000002', 3, {now}, {now});"
        ),
    );
    let t = TestApp::open(Engine::Sqlite, old.to_str().unwrap()).await.unwrap();
    let feed = whole_feed(&t, "").await;
    assert_eq!(
        shapes(&feed),
        [
            ("modules".into(), "create".into(), 1),
            ("subjects".into(), "create".into(), 1),
            ("chapters".into(), "create".into(), 1)
        ]
    );
    assert!(feed.iter().all(|r| r["attributes"]["by"] == "migration"));
    let subject = &feed[1]["attributes"]["changes"];
    assert_eq!(subject["available_for_courses"], json!({"before": null, "after": true}));
    assert_eq!(subject["module"]["after"], json!({"type": "modules", "id": "01900000-0000-7000-8000-000000000009"}));
    assert_eq!(subject["created_at"]["after"], "2026-01-01T00:00:00.000Z");
    assert_eq!(feed[2]["attributes"]["changes"]["position"]["after"], 3);
    t.delete("/v1/chapters/01900000-0000-7000-8000-000000000001").await.assert_status(204);
    let r = t.get("/v1/chapters/01900000-0000-7000-8000-000000000001/revisions").await;
    assert_eq!(shapes(r.data()), [("chapters".into(), "delete".into(), 2), ("chapters".into(), "create".into(), 1)]);
}

/// The id of the revision `number` of a resource.
pub(crate) async fn revision_of(t: &TestApp, ty: &str, id: &str, number: i64) -> String {
    let r = t.get(&format!("/v1/{ty}/{id}/revisions?page[size]=100")).await;
    r.assert_status(200);
    let found = r.data().iter().find(|r| r["attributes"]["number"] == number).expect("that revision");
    found["id"].as_str().unwrap().to_owned()
}

pub(crate) async fn restore(t: &TestApp, revision: &str) -> crate::helpers::Resp {
    t.send(t.req("POST", &format!("/v1/revisions/{revision}/restore"))).await
}

on_both!(a_restore_brings_a_resource_back_to_a_revision_as_a_new_revision);
async fn a_restore_brings_a_resource_back_to_a_revision_as_a_new_revision() {
    let t = TestApp::new().await;
    let (m1, m2) = (t.module("One").await, t.module("Two").await);
    let s = t.subject("First title", Some(&m1)).await;
    let created = t.get(&format!("/v1/subjects/{s}")).await.body["data"]["attributes"]["created_at"].clone();
    let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "Second title", "external_id": "S-1"},
        "relationships": {"module": {"data": {"type": "modules", "id": m2}}}}});
    t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
    // Back to revision 1: title, external_id and module as they were.
    let first = revision_of(&t, "subjects", &s, 1).await;
    let r = restore(&t, &first).await;
    r.assert_status(200);
    let a = &r.body["data"]["attributes"];
    assert_eq!((a["title"].as_str(), a["external_id"].is_null()), (Some("First title"), true), "{}", r.body);
    assert_eq!(r.body["data"]["relationships"]["module"]["data"]["id"], m1.as_str());
    let revisions = t.get(&format!("/v1/subjects/{s}/revisions")).await;
    let newest = &revisions.data()[0]["attributes"];
    assert_eq!((newest["action"].as_str(), newest["number"].as_i64()), (Some("restore"), Some(3)));
    assert_eq!(newest["changes"]["title"], json!({"before": "Second title", "after": "First title"}));
    // The state it already has: nothing written, nothing recorded.
    restore(&t, &first).await.assert_status(200);
    assert_eq!(t.get(&format!("/v1/subjects/{s}/revisions")).await.body["meta"]["page"]["total"], 3);

    // A deleted subject comes back under its own id and creation time, numbers going on; its
    // chapters do not (they have revisions of their own).
    let c = t.chapter("Chapter", &s, 1).await;
    t.delete(&format!("/v1/subjects/{s}")).await.assert_status(204);
    t.get(&format!("/v1/chapters/{c}")).await.assert_problem(404);
    let deletion = revision_of(&t, "subjects", &s, 4).await;
    let r = restore(&t, &deletion).await;
    r.assert_problem(409);
    assert!(r.error()["detail"].as_str().unwrap().contains("deletion"), "{}", r.body);
    let third = revision_of(&t, "subjects", &s, 3).await;
    let r = restore(&t, &third).await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["id"], s.as_str());
    assert_eq!(r.body["data"]["attributes"]["created_at"], created);
    assert_eq!(r.body["data"]["attributes"]["title"], "First title");
    let newest = &t.get(&format!("/v1/subjects/{s}/revisions")).await.data()[0]["attributes"].clone();
    assert_eq!((newest["action"].as_str(), newest["number"].as_i64()), (Some("restore"), Some(5)));
    t.get(&format!("/v1/chapters/{c}")).await.assert_problem(404);
    // The chapter comes back too, from its own history.
    let chapter = revision_of(&t, "chapters", &c, 1).await;
    let r = restore(&t, &chapter).await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["relationships"]["subject"]["data"]["id"], s.as_str(), "{}", r.body);
    t.get(&format!("/v1/chapters/{c}")).await.assert_status(200);
    let listed = t.get(&format!("/v1/subjects/{s}/chapters")).await;
    assert_eq!(listed.ids(), [c.as_str()], "{}", listed.body);
}

on_both!(a_restore_that_cannot_be_made_is_a_409_and_changes_nothing);
async fn a_restore_that_cannot_be_made_is_a_409_and_changes_nothing() {
    let t = TestApp::new().await;
    let m = t.module("Gone soon").await;
    let s = t.subject("Linked", Some(&m)).await;
    let linked = revision_of(&t, "subjects", &s, 1).await;
    t.delete(&format!("/v1/modules/{m}")).await.assert_status(204);
    let before = t.get("/v1/revisions?page[size]=1000").await.data().len();
    let r = restore(&t, &linked).await;
    r.assert_problem(409);
    assert!(r.error()["detail"].as_str().unwrap().contains(&m), "names the module: {}", r.body);
    // Its external_id taken by another since.
    let x = t.create("subjects", json!({"title": "X", "external_id": "EXT"}), Value::Null).await;
    let with_ext = revision_of(&t, "subjects", &x, 1).await;
    let body = json!({"data": {"type": "subjects", "id": x, "attributes": {"external_id": null}}});
    t.write("PATCH", &format!("/v1/subjects/{x}"), body).await.assert_status(200);
    let y = t.create("subjects", json!({"title": "Y", "external_id": "EXT"}), Value::Null).await;
    let r = restore(&t, &with_ext).await;
    r.assert_problem(409);
    assert!(r.error()["detail"].as_str().unwrap().contains(&y), "names the holder: {}", r.body);
    assert_eq!(t.get("/v1/revisions?page[size]=1000").await.data().len(), before + 3, "only the writes made here");
    // If-Match names the resource's current tag.
    let tag = t.get(&format!("/v1/subjects/{x}")).await.header("etag").unwrap().to_owned();
    let stale =
        t.send(t.req("POST", &format!("/v1/revisions/{with_ext}/restore")).header("if-match", "\"stale\"")).await;
    stale.assert_problem(412);
    let body = json!({"data": {"type": "subjects", "id": y, "attributes": {"external_id": "OTHER"}}});
    t.write("PATCH", &format!("/v1/subjects/{y}"), body).await.assert_status(200);
    let ok = t.send(t.req("POST", &format!("/v1/revisions/{with_ext}/restore")).header("if-match", tag)).await;
    ok.assert_status(200);
    assert_eq!(ok.body["data"]["attributes"]["external_id"], "EXT");
    // Not a revision, a body, a read-only token.
    t.send(t.req("POST", "/v1/revisions/00000000-0000-8000-8000-00000000ffff/restore")).await.assert_problem(404);
    let body =
        t.req("POST", &format!("/v1/revisions/{with_ext}/restore")).header("content-type", "application/vnd.api+json");
    t.send(body.body("{}")).await.assert_problem(400);
    let reader = crate::tokens::create(&t.database, "reader", "read");
    let r = t
        .send(crate::tokens::as_token(
            &t,
            &reader,
            "POST",
            &format!("/v1/revisions/{with_ext}/restore"),
            crate::tokens::HOME,
        ))
        .await;
    r.assert_problem(403);
    // A database token's name is who wrote.
    let alice = crate::tokens::create(&t.database, "alice", "write");
    let body = json!({"data": {"type": "subjects", "id": x, "attributes": {"title": "By Alice"}}});
    let req = crate::tokens::as_token(&t, &alice, "PATCH", &format!("/v1/subjects/{x}"), crate::tokens::HOME);
    t.send(req.body(body.to_string())).await.assert_status(200);
    let newest = t.get(&format!("/v1/subjects/{x}/revisions")).await.data()[0]["attributes"]["by"].clone();
    assert_eq!(newest, "alice");
}

on_both!(two_replicas_restoring_one_deleted_resource_at_once_both_succeed_and_it_comes_back_once);
async fn two_replicas_restoring_one_deleted_resource_at_once_both_succeed_and_it_comes_back_once() {
    let (a, b) = TestApp::pair().await;
    for round in 0..6 {
        let s = a.subject(&format!("Round {round}"), None).await;
        let first = revision_of(&a, "subjects", &s, 1).await;
        a.delete(&format!("/v1/subjects/{s}")).await.assert_status(204);
        // Both find it deleted and bring it back: the one that commits second finds it there
        // (on PostgreSQL its insert fails and the transaction is retried) and changes nothing.
        let (ra, rb) = tokio::join!(restore(&a, &first), restore(&b, &first));
        ra.assert_status(200);
        rb.assert_status(200);
        assert_eq!(ra.body["data"]["attributes"], rb.body["data"]["attributes"]);
        let r = a.get(&format!("/v1/subjects/{s}/revisions")).await;
        assert_eq!(
            shapes(r.data()),
            [
                ("subjects".into(), "restore".into(), 3),
                ("subjects".into(), "delete".into(), 2),
                ("subjects".into(), "create".into(), 1)
            ],
            "round {round}"
        );
    }
}

on_both!(a_prune_keeps_each_live_resources_newest_revision_and_moves_the_feeds_start);
async fn a_prune_keeps_each_live_resources_newest_revision_and_moves_the_feeds_start() {
    let t = TestApp::new().await;
    let m = t.module("Kept").await;
    let s = t.subject("Edited", Some(&m)).await;
    for i in 0..3 {
        let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": format!("Edit {i}")}}});
        t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
    }
    let gone = t.subject("Deleted", None).await;
    t.delete(&format!("/v1/subjects/{gone}")).await.assert_status(204);
    // The newest revision of all is never pruned (SQLite would hand its place out again).
    let body = json!({"data": {"type": "modules", "id": m, "attributes": {"title": "Kept, renamed"}}});
    t.write("PATCH", &format!("/v1/modules/{m}"), body).await.assert_status(200);
    let old_cursor = whole_feed(&t, "").await[0]["meta"]["cursor"].as_str().unwrap().to_owned();
    let first_of_s = revision_of(&t, "subjects", &s, 1).await;
    // Everything recorded so far is before this.
    let before = coursed::time::now_ms() + 1000;
    let (n, cut) = coursed::history::prune(&t.app.db, before).await.unwrap();
    assert_eq!(n, 1 + 3 + 2, "all but the newest of each live resource: {n}");
    assert!(cut > 0);
    // Pruning again changes nothing.
    assert_eq!(coursed::history::prune(&t.app.db, before).await.unwrap(), (0, cut));
    // Each live resource keeps its newest revision; numbers go on from it.
    let r = t.get(&format!("/v1/subjects/{s}/revisions")).await;
    assert_eq!(shapes(r.data()), [("subjects".into(), "update".into(), 4)]);
    assert_eq!(r.body["meta"]["page"]["total"], 1);
    let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "After the prune"}}});
    t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
    let r = t.get(&format!("/v1/subjects/{s}/revisions")).await;
    assert_eq!(r.data()[0]["attributes"]["number"], 5);
    // A deleted resource whose history is pruned whole is gone; so is a pruned revision.
    t.get(&format!("/v1/subjects/{gone}/revisions")).await.assert_problem(404);
    t.get(&format!("/v1/revisions/{first_of_s}")).await.assert_problem(404);
    restore(&t, &first_of_s).await.assert_problem(404);
    // The feed starts after the cut: only what came since; a cursor before it is told 410.
    let feed = whole_feed(&t, "").await;
    assert_eq!(shapes(&feed), [("subjects".into(), "update".into(), 5)]);
    let r = t.get(&format!("/v1/revisions?page[after]={old_cursor}")).await;
    r.assert_problem(410);
    assert_eq!(r.error()["code"], "history_pruned");
    // Restoring the newest kept revision of the subject still works (it needs nothing older).
    let kept = revision_of(&t, "subjects", &s, 4).await;
    let r = restore(&t, &kept).await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["attributes"]["title"], "Edit 2");
}

#[test]
fn the_prune_command_prunes_a_database_file_and_refuses_a_bad_date() {
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_coursed")).args(args).output().unwrap();
    let out = run(&[
        "generate",
        "--database",
        db,
        "--modules",
        "2",
        "--subjects-per-module",
        "2",
        "--chapters-per-subject",
        "1",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["history", "prune", "--database", db, "--before", "2999-01-01"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("pruned 0 revisions"), "every resource keeps its one revision: {said}");
    let out = run(&["history", "prune", "--database", db, "--before", "yesterday"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--before"));
}

on_both!(a_page_of_revisions_too_large_for_a_document_is_a_400);
async fn a_page_of_revisions_too_large_for_a_document_is_a_400() {
    let t = TestApp::new().await;
    let m = t.module("Long texts").await;
    // Each revision holds about 2 MiB: the text before and after.
    for i in 0..9 {
        let content = format!("{i} {}", "long text ".repeat(100_000));
        let body = json!({"data": {"type": "modules", "id": m, "attributes": {"content": content}}});
        t.write("PATCH", &format!("/v1/modules/{m}"), body).await.assert_status(200);
    }
    t.get(&format!("/v1/modules/{m}/revisions?page[size]=20")).await.assert_error(400, "page[size]");
    let r = t.get(&format!("/v1/modules/{m}/revisions?page[size]=2")).await;
    r.assert_status(200);
    assert_eq!(r.data().len(), 2);
}

on_both!(if_none_match_star_restores_only_a_deleted_resource);
async fn if_none_match_star_restores_only_a_deleted_resource() {
    let t = TestApp::new().await.configured(|app| app.require_if_match = true);
    let m = t.module("Gone for now").await;
    let first = revision_of(&t, "modules", &m, 1).await;
    let only_if_gone =
        |t: &TestApp| t.req("POST", &format!("/v1/revisions/{first}/restore")).header("if-none-match", "*");
    // It exists: refused, and nothing recorded.
    let r = t.send(only_if_gone(&t)).await;
    r.assert_problem(412);
    assert!(r.error()["detail"].as_str().unwrap().contains("exists"), "{}", r.body);
    let tag = t.get(&format!("/v1/modules/{m}")).await.header("etag").unwrap().to_owned();
    t.send(t.req("DELETE", &format!("/v1/modules/{m}")).header("if-match", &tag)).await.assert_status(204);
    // Deleted: brought back, with no If-Match needed even where the server requires one.
    t.send(only_if_gone(&t)).await.assert_status(200);
    t.get(&format!("/v1/modules/{m}")).await.assert_status(200);
    // A second one, as from a teacher who read the history before the first: 412.
    t.send(only_if_gone(&t)).await.assert_problem(412);
    assert_eq!(t.get(&format!("/v1/modules/{m}/revisions")).await.body["meta"]["page"]["total"], 3);
}
