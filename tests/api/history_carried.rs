//! A history goes where its catalogue goes: `coursed export --history` and `coursed import`,
//! `coursed copy` and a backup of PostgreSQL carry every revision, in feed order, to either
//! engine; a replaced target forgets its own; a history is never merged into another.

use serde_json::{json, Value};

use crate::engines::Engine;
use crate::helpers::TestApp;
use crate::history::{restore, revision_of, whole_feed};
use coursed::bundle::{Imported, Options};

/// The feed as another database would show it: without ids, links and cursors (which are
/// each database's own).
async fn history(t: &TestApp) -> Vec<Value> {
    whole_feed(t, "")
        .await
        .into_iter()
        .map(|r| json!({"attributes": r["attributes"], "resource": r["relationships"]["resource"]["data"]}))
        .collect()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

async fn import(database: &str, file: &str, opts: Options) -> Result<Imported, String> {
    let (database, file) = (database.to_owned(), file.to_owned());
    blocking(move || coursed::bundle::import(&database, &file, opts)).await
}

fn path(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).to_str().unwrap().to_owned()
}

/// A history of every kind of revision: creates, updates, a move, a deletion that takes a
/// chapter along, and a restore.
async fn written_history(t: &TestApp) -> String {
    let (m1, m2) = (t.module("One").await, t.module("Two").await);
    let s = t.subject("First", Some(&m1)).await;
    t.chapter("C", &s, 1).await;
    let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "Second"},
                               "relationships": {"module": {"data": {"type": "modules", "id": m2}}}}});
    t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
    t.delete(&format!("/v1/subjects/{s}")).await.assert_status(204);
    let first = revision_of(t, "subjects", &s, 1).await;
    restore(t, &first).await.assert_status(200);
    s
}

#[tokio::test]
async fn a_history_travels_by_bundle_copy_and_backup_to_the_other_engine_and_back() {
    if crate::pg_cluster::server().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = Engine::Sqlite.fresh_database(dir.path());
    let t = TestApp::open(Engine::Sqlite, &source).await.unwrap();
    let s = written_history(&t).await;
    let kept = history(&t).await;
    assert_eq!(kept.len(), 8, "{kept:#?}");

    // SQLite -> bundle -> PostgreSQL.
    let bundle = path(&dir, "history.jsonl");
    let (from, to) = (source.clone(), bundle.clone());
    let exported = blocking(move || coursed::bundle::export(&from, &to, false, coursed::bundle::Contents::WithHistory))
        .await
        .unwrap();
    assert_eq!(exported.to_string(), "2 modules, 1 subjects, 0 chapters and 8 revisions");
    let text = std::fs::read_to_string(&bundle).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!((header["version"].as_u64(), header["history"].as_bool()), (Some(2), Some(true)));
    let trailer: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(trailer["counts"]["revisions"], 8);
    let pg = Engine::Postgres.fresh_database(dir.path());
    let imported = import(&pg, &bundle, Options::default()).await.unwrap();
    assert_eq!(imported.to_string(), "inserted 2 modules, 1 subjects, 0 chapters; updated 0 modules, 0 subjects, 0 chapters; their history: 8 revisions");
    let on_pg = TestApp::open(Engine::Postgres, &pg).await.unwrap();
    assert_eq!(history(&on_pg).await, kept);

    // PostgreSQL -> copy -> SQLite, and a backup of PostgreSQL.
    let copied = path(&dir, "copied.db");
    let (from, to) = (pg.clone(), copied.clone());
    blocking(move || coursed::dataset::copy(&from, &to, false)).await.unwrap();
    let backup = dir.path().join("backup.db");
    let (from, to) = (pg.clone(), backup.clone());
    blocking(move || coursed::backup::backup(&from, &to, false)).await.unwrap();
    for database in [copied.as_str(), backup.to_str().unwrap()] {
        let there = TestApp::open(Engine::Sqlite, database).await.unwrap();
        assert_eq!(history(&there).await, kept, "{database}");
        // The resource's history goes on where it stopped.
        let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "Third"}}});
        there.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_status(200);
        let r = there.get(&format!("/v1/subjects/{s}/revisions?page[size]=1")).await;
        assert_eq!(
            (r.data()[0]["attributes"]["number"].as_i64(), r.data()[0]["attributes"]["by"].as_str()),
            (Some(5), Some("config"))
        );
    }

    // A history is never merged into another; without it, the catalogue merges.
    let merge = Options { merge: true, ..Options::default() };
    let refused = import(&copied, &bundle, merge).await.unwrap_err();
    assert!(refused.contains("cannot be merged") && refused.contains("--no-history"), "{refused}");
    let merged = import(&copied, &bundle, Options { no_history: true, ..merge }).await.unwrap();
    assert_eq!((merged.updated.total(), merged.revisions), (3, None));
    // Nor loaded beside one: a database that keeps revisions (of resources since deleted).
    let emptied = path(&dir, "emptied.db");
    let e = TestApp::open(Engine::Sqlite, &emptied).await.unwrap();
    let m = e.module("Gone").await;
    e.delete(&format!("/v1/modules/{m}")).await.assert_status(204);
    drop(e);
    let refused = import(&emptied, &bundle, Options::default()).await.unwrap_err();
    assert!(refused.contains("keeps the history of 2 changes"), "{refused}");

    // A copy that replaces a catalogue replaces its history: a cursor of the target's own
    // feed is told its revisions are gone.
    let target = TestApp::open(Engine::Sqlite, &emptied).await.unwrap();
    let cursor = whole_feed(&target, "").await.last().unwrap()["meta"]["cursor"].as_str().unwrap().to_owned();
    drop(target);
    let (from, to) = (pg.clone(), emptied.clone());
    blocking(move || coursed::dataset::copy(&from, &to, true)).await.unwrap();
    let target = TestApp::open(Engine::Sqlite, &emptied).await.unwrap();
    assert_eq!(history(&target).await, kept);
    target.get(&format!("/v1/revisions?page[after]={cursor}")).await.assert_status(200);
    target.get("/v1/revisions?page[after]=1").await.assert_status(410);
}

/// A change made to a good revision line.
type Spoil = fn(&mut Value);

#[tokio::test]
async fn a_bad_revision_line_is_named_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let source = Engine::Sqlite.fresh_database(dir.path());
    let t = TestApp::open(Engine::Sqlite, &source).await.unwrap();
    written_history(&t).await;
    let bundle = path(&dir, "good.jsonl");
    let (from, to) = (source.clone(), bundle.clone());
    blocking(move || coursed::bundle::export(&from, &to, false, coursed::bundle::Contents::WithHistory)).await.unwrap();
    let good: Vec<String> = std::fs::read_to_string(&bundle).unwrap().lines().map(str::to_owned).collect();
    // Line 5 is the first revision (after the header and three resources).
    assert!(good[4].contains(r#""type":"revisions""#), "{}", good[4]);
    let cases: Vec<(Spoil, &str)> = vec![
        ((|r| r["attributes"]["action"] = json!("rename")), "line 5: revisions: attributes.action"),
        ((|r| r["attributes"]["number"] = json!(0)), "line 5: revisions: attributes.number"),
        ((|r| r["attributes"]["at"] = json!("yesterday")), "line 5: revisions: attributes.at"),
        (
            (|r| r["attributes"]["changes"]["colour"] = json!({"before": null, "after": "red"})),
            "attributes.changes.colour: modules have no such member",
        ),
        ((|r| r["relationships"]["resource"]["data"]["type"] = json!("lessons")), "unknown type `lessons`"),
    ];
    for (i, (spoil, expected)) in cases.into_iter().enumerate() {
        let mut lines = good.clone();
        let mut first: Value = serde_json::from_str(&lines[4]).unwrap();
        spoil(&mut first);
        lines[4] = first.to_string();
        let bad = path(&dir, &format!("bad-{i}.jsonl"));
        std::fs::write(&bad, lines.join("\n") + "\n").unwrap();
        let target = path(&dir, &format!("target-{i}.db"));
        let e = import(&target, &bad, Options::default()).await.unwrap_err();
        assert!(e.contains(expected), "{e} (expected {expected})");
        assert!(!std::path::Path::new(&target).exists(), "a failed import leaves no file");
    }
    // A revision in a bundle that does not say it carries a history; a wrong trailer.
    let mut lines = good.clone();
    lines[0] = r#"{"format":"coursed-bundle","version":1}"#.into();
    let plain = path(&dir, "plain.jsonl");
    std::fs::write(&plain, lines.join("\n") + "\n").unwrap();
    let e = import(&path(&dir, "t1.db"), &plain, Options::default()).await.unwrap_err();
    assert!(e.contains(r#"line 5: a revision, in a bundle whose header does not say "history":true"#), "{e}");
    let mut lines = good.clone();
    let last = lines.len() - 1;
    lines[last] = lines[last].replace(r#""revisions":8"#, r#""revisions":7"#);
    let short = path(&dir, "short.jsonl");
    std::fs::write(&short, lines.join("\n") + "\n").unwrap();
    let e = import(&path(&dir, "t2.db"), &short, Options::default()).await.unwrap_err();
    assert!(e.contains("the trailer counts 7 revisions, but the bundle holds 8"), "{e}");
    // A bundle without history imports as before, its history recorded by the import.
    let (from, to) = (source.clone(), path(&dir, "plain-export.jsonl"));
    blocking(move || coursed::bundle::export(&from, &to, false, coursed::bundle::Contents::Catalogue)).await.unwrap();
    let into = path(&dir, "t3.db");
    let imported = import(&into, &path(&dir, "plain-export.jsonl"), Options::default()).await.unwrap();
    assert_eq!(imported.revisions, None);
    let t3 = TestApp::open(Engine::Sqlite, &into).await.unwrap();
    let feed = whole_feed(&t3, "").await;
    assert_eq!(feed.len(), 3);
    assert!(feed.iter().all(|r| r["attributes"]["by"] == "import"));
}
