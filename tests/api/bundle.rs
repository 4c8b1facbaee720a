//! `coursed export` and `coursed import`: a catalogue carried between engines unchanged,
//! malformed bundles refused with their line and field and nothing written, `--merge` and
//! `--dry-run`, and an import killed midway that leaves the target as it was.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::copy::{assert_same_answers, dataset_file};
use crate::helpers::{on_both, Engine, TestApp};
use coursed::bundle::{Imported, Options};

const HEADER: &str = r#"{"format":"coursed-bundle","version":1}"#;

fn id(n: u32) -> String {
    format!("01900000-0000-7000-8000-{n:012}")
}

fn module(n: u32, title: &str) -> Value {
    json!({"type": "modules", "id": id(n), "attributes": {"title": title}})
}

fn subject(n: u32, module: Option<u32>) -> Value {
    let linkage = module.map_or(Value::Null, |m| json!({"type": "modules", "id": id(m)}));
    json!({"type": "subjects", "id": id(n), "attributes": {"title": format!("S{n}")},
           "relationships": {"module": {"data": linkage}}})
}

fn chapter(n: u32, subject: u32) -> Value {
    json!({"type": "chapters", "id": id(n), "attributes": {"title": format!("C{n}"), "position": 1},
           "relationships": {"subject": {"data": {"type": "subjects", "id": id(subject)}}}})
}

/// Writes `lines` (after the header unless the first is given as text) to a file in `dir`.
fn bundle(dir: &Path, lines: &[String]) -> String {
    let path = dir.join(format!("b-{}.jsonl", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.to_str().unwrap().to_owned()
}

fn lines(header: &str, resources: &[Value]) -> Vec<String> {
    std::iter::once(header.to_owned()).chain(resources.iter().map(Value::to_string)).collect()
}

async fn import(database: &str, file: &str, merge: bool, dry_run: bool) -> Result<Imported, String> {
    let (database, file) = (database.to_owned(), file.to_owned());
    tokio::task::spawn_blocking(move || {
        coursed::bundle::import(&database, &file, Options { merge, dry_run, ..Default::default() })
    })
    .await
    .unwrap()
}

async fn export(database: &str, file: &str) -> coursed::store::bulk::Counts {
    let (database, file) = (database.to_owned(), file.to_owned());
    tokio::task::spawn_blocking(move || {
        coursed::bundle::export(&database, &file, false, coursed::bundle::Contents::Catalogue)
    })
    .await
    .unwrap()
    .unwrap()
    .resources
}

#[tokio::test]
async fn export_and_import_carry_a_catalogue_to_the_other_engine_and_back_unchanged() {
    if crate::pg_cluster::server().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dataset_file(dir.path());
    let sqlite = dir.path().join("a.db").to_str().unwrap().to_owned();
    let back = dir.path().join("back.db").to_str().unwrap().to_owned();
    let pg = Engine::Postgres.fresh_database(dir.path());
    let s = sqlite.clone();
    tokio::task::spawn_blocking(move || coursed::dataset::load(&s, &file, None).unwrap()).await.unwrap();

    let there = dir.path().join("there.jsonl").to_str().unwrap().to_owned();
    let exported = export(&sqlite, &there).await;
    assert_eq!(exported.to_string(), "11 modules, 40 subjects, 60 chapters");
    let imported = import(&pg, &there, false, false).await.unwrap();
    assert_eq!((imported.inserted, imported.updated.total()), (exported, 0));
    // Back through stdout and stdin of the binary.
    let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["export", "--database", &pg, "--output", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("exported 11 modules"), "{out:?}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["import", "--database", &back, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let done = child.wait_with_output().unwrap();
    assert!(done.status.success(), "{done:?}");
    assert!(String::from_utf8_lossy(&done.stdout).contains("inserted 11 modules, 40 subjects, 60 chapters"));

    // The same bundle, but for the time it was written.
    let body = |text: &str| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(body(&std::fs::read_to_string(&there).unwrap()), body(&String::from_utf8_lossy(&out.stdout)));
    let on_sqlite = TestApp::open(Engine::Sqlite, &sqlite).await.unwrap();
    let on_postgres = TestApp::open(Engine::Postgres, &pg).await.unwrap();
    let returned = TestApp::open(Engine::Sqlite, &back).await.unwrap();
    assert_same_answers(&on_sqlite, &on_postgres).await;
    assert_same_answers(&on_sqlite, &returned).await;
}

on_both!(malformed_bundles_name_their_line_and_field_and_leave_the_target_untouched);
async fn malformed_bundles_name_their_line_and_field_and_leave_the_target_untouched() {
    let t = TestApp::new().await;
    let kept = t.module("Kept").await;
    t.write(
        "PATCH",
        &format!("/v1/modules/{kept}"),
        json!({"data": {"type": "modules", "id": kept, "attributes": {"external_id": "TAKEN"}}}),
    )
    .await
    .assert_status(200);
    let dir = tempfile::tempdir().unwrap();
    let good = [module(1, "First"), subject(2, Some(1))];
    let with = |extra: Vec<Value>| lines(HEADER, &[&good[..], &extra].concat());
    let mut untitled = module(3, "x");
    untitled["attributes"] = json!({"introduction": "no title"});
    let mut numeric = module(3, "x");
    numeric["attributes"]["title"] = json!(5);
    let mut to_many = subject(3, None);
    to_many["relationships"]["chapters"] = json!({"data": []});
    let mut orphan = chapter(3, 99);
    orphan["attributes"]["created_at"] = json!("2026-01-01T00:00:00.000Z");
    let mut taken = module(3, "x");
    taken["attributes"]["external_id"] = json!("TAKEN");
    let mut bad_time = module(3, "x");
    bad_time["attributes"]["updated_at"] = json!("yesterday");
    let cases: Vec<(Vec<String>, String)> = vec![
        ([with(vec![]), vec![r#"{"type":"modules","#.to_owned()]].concat(), "line 4: not JSON".into()),
        (with(vec![json!({"type": "lessons", "id": id(3)})]), "line 4: unknown type `lessons`".into()),
        (with(vec![untitled]), format!("line 4: modules {}: attributes: `title` is required", id(3))),
        (with(vec![numeric]), format!("line 4: modules {}: attributes.title: `title` must be a string", id(3))),
        (with(vec![to_many]), format!("line 4: subjects {}: relationships.chapters: a bundle carries to-one", id(3))),
        (with(vec![module(1, "Again")]), format!("line 4: modules {}: the id is", id(1))),
        (
            with(vec![orphan]),
            format!("line 4: chapters {}: relationships.subject: subjects {} is neither", id(3), id(99)),
        ),
        (with(vec![taken]), format!("line 4: modules {}: attributes.external_id: \"TAKEN\" is already used", id(3))),
        (with(vec![bad_time]), format!("line 4: modules {}: attributes.updated_at: must be a time", id(3))),
        (with(vec![json!({"type": "modules", "id": "7"})]), "line 4: modules: `id` must be a UUID".into()),
        (
            with(vec![json!({"counts": {"modules": 1, "subjects": 2, "chapters": 0}})]),
            "line 4: the trailer counts".into(),
        ),
        (
            lines(r#"{"format":"coursed-bundle","version":4}"#, &good),
            "line 1: the bundle is of version 4, newer".into(),
        ),
        (lines(r#"{"format":"coursed-bundle","version":3}"#, &good), "line 1: a delta's header needs".into()),
        (lines(&module(1, "x").to_string(), &good), "line 1: not a coursed bundle".into()),
        (vec![String::new()], "the bundle is empty".into()),
    ];
    for (case, expected) in cases {
        let file = bundle(dir.path(), &case);
        let err = import(&t.database, &file, true, false).await.unwrap_err();
        assert!(err.contains(&expected), "expected {expected:?} in {err:?}");
    }
    // Without --merge, a database that holds resources is refused.
    let file = bundle(dir.path(), &lines(HEADER, &good));
    let err = import(&t.database, &file, false, false).await.unwrap_err();
    assert!(err.contains("already holds 1 resources") && err.contains("--merge"), "{err}");
    // Nothing of any of them was written: good lines before a bad one included.
    let r = t.get("/v1/modules").await;
    assert_eq!(r.ids(), vec![kept.clone()]);
    assert_eq!(t.get("/v1/subjects").await.body["meta"]["page"]["total"], 0);
}

on_both!(a_merge_inserts_new_updates_by_id_deletes_nothing_and_a_dry_run_only_counts);
async fn a_merge_inserts_new_updates_by_id_deletes_nothing_and_a_dry_run_only_counts() {
    let t = TestApp::new().await;
    let dir = tempfile::tempdir().unwrap();
    let first = bundle(dir.path(), &lines(HEADER, &[module(1, "Optics"), subject(2, Some(1)), chapter(3, 2)]));
    import(&t.database, &first, false, false).await.unwrap();
    let stays = t.module("Made here").await;
    let mut renamed = module(1, "Geometric optics");
    renamed["attributes"]["created_at"] = json!("2026-01-01T00:00:00.000Z");
    renamed["attributes"]["updated_at"] = json!("2026-02-01T00:00:00.000Z");
    let second =
        bundle(dir.path(), &lines(HEADER, &[renamed, module(4, "Waves"), subject(5, Some(4)), subject(2, Some(4))]));

    let before: Vec<Value> = [t.get("/v1/modules").await.body, t.get("/v1/subjects").await.body].into();
    let would = import(&t.database, &second, true, true).await.unwrap();
    assert_eq!(
        would.to_string(),
        "inserted 1 modules, 1 subjects, 0 chapters; updated 1 modules, 1 subjects, 0 chapters"
    );
    let after: Vec<Value> = [t.get("/v1/modules").await.body, t.get("/v1/subjects").await.body].into();
    assert_eq!(before, after, "a dry run wrote something");

    let done = import(&t.database, &second, true, false).await.unwrap();
    assert_eq!(done, would);
    let m = t.get(&format!("/v1/modules/{}", id(1))).await;
    assert_eq!(m.body["data"]["attributes"]["title"], "Geometric optics");
    assert_eq!(m.body["data"]["attributes"]["updated_at"], "2026-02-01T00:00:00.000Z");
    let moved = t.get(&format!("/v1/subjects/{}", id(2))).await;
    assert_eq!(moved.body["data"]["relationships"]["module"]["data"]["id"], id(4));
    assert_eq!(t.get(&format!("/v1/modules/{}/subjects", id(4))).await.body["meta"]["page"]["total"], 2);
    assert_eq!(t.get(&format!("/v1/modules/{}/subjects", id(1))).await.body["meta"]["page"]["total"], 0);
    // Nothing is deleted: the module made here and the chapter not in the bundle stay.
    t.get(&format!("/v1/modules/{stays}")).await.assert_status(200);
    t.get(&format!("/v1/chapters/{}", id(3))).await.assert_status(200);
    assert_eq!(t.get("/v1/modules").await.body["meta"]["page"]["total"], 3);
    // An id twice in one merge is refused too (the second batch meets the first's).
    let many: Vec<Value> = (0..150).map(|i| module(1000 + i, "M")).chain([module(1000, "again")]).collect();
    let err = import(&t.database, &bundle(dir.path(), &lines(HEADER, &many)), true, false).await.unwrap_err();
    assert!(err.contains(&format!("line 152: modules {}: the id is on an earlier line", id(1000))), "{err}");
}

on_both!(an_import_killed_midway_leaves_the_target_as_it_was);
async fn an_import_killed_midway_leaves_the_target_as_it_was() {
    let t = TestApp::new().await;
    let kept = t.module("Kept").await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["import", "--database", &t.database, "--merge", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let text = "x".repeat(400);
    writeln!(stdin, "{HEADER}").unwrap();
    // Far more than the pipe and the importer's buffer hold: once written, thousands of lines
    // have gone into the import's transaction.
    for i in 0..20_000 {
        let mut m = module(10_000 + i, "Bulk");
        m["attributes"]["content"] = json!(text);
        writeln!(stdin, "{m}").unwrap();
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success());
    drop(stdin);
    assert_eq!(t.get("/v1/modules").await.ids(), vec![kept]);
    assert_eq!(t.get("/v1/modules").await.body["meta"]["page"]["total"], 1);
    if t.engine == Engine::Sqlite {
        let conn = rusqlite::Connection::open(&t.database).unwrap();
        let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
        let n: i64 = conn.query_row("SELECT count(*) FROM modules", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1);
    }
}

#[test]
fn a_failed_import_into_a_new_file_leaves_no_file_and_export_refuses_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("new.db");
    let target = target.to_str().unwrap();
    let file = bundle(dir.path(), &lines(HEADER, &[module(1, "M"), chapter(2, 3)]));
    let err = coursed::bundle::import(target, &file, Options::default()).unwrap_err();
    assert!(err.contains("line 3: chapters"), "{err}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!left.iter().any(|n| n.to_string_lossy().starts_with("new.db")), "{left:?}");

    let good = bundle(dir.path(), &lines(HEADER, &[module(1, "M")]));
    coursed::bundle::import(target, &good, Options::default()).unwrap();
    let out = dir.path().join("out.jsonl");
    std::fs::write(&out, "keep me").unwrap();
    let refused = coursed::bundle::export(target, out.to_str().unwrap(), false, coursed::bundle::Contents::Catalogue)
        .unwrap_err();
    assert!(refused.contains("--force"), "{refused}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
    coursed::bundle::export(target, out.to_str().unwrap(), true, coursed::bundle::Contents::Catalogue).unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last, json!({"counts": {"modules": 1, "subjects": 0, "chapters": 0}}));
}
