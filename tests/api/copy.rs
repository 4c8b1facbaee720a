//! The same catalogue on both engines answers every request with the same bytes, and
//! `coursed copy` carries a catalogue between them and back unchanged.

use serde_json::json;

use crate::helpers::{Engine, TestApp};

/// A catalogue that tells collations and null orders apart: titles that differ in case and
/// accents only, external ids that are null or differ in case, ties broken by id.
pub fn dataset() -> serde_json::Value {
    let id = |n: u32| format!("01900000-0000-7000-8000-{n:012}");
    let titles =
        ["zebra", "Apple", "apple", "Éclair", "eclair", "_under", "a b", "ábc", "Zürich", "10 tens", "9 nines"];
    let modules: Vec<_> = titles
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let ext = match i % 3 {
                0 => json!(null),
                1 => json!(format!("ext-{}", (b'a' + i as u8) as char)),
                _ => json!(format!("EXT-{}", (b'A' + i as u8) as char)),
            };
            json!({"id": id(i as u32 + 1), "title": t, "introduction": format!("About {t}"), "content": "<p>x</p>", "external_id": ext})
        })
        .collect();
    let subjects: Vec<_> = (0..40u32)
        .map(|i| {
            let module = if i % 7 == 0 { json!(null) } else { json!(id(i % titles.len() as u32 + 1)) };
            let ext = if i % 4 == 0 { json!(null) } else { json!(format!("S-{}", 40 - i)) };
            json!({"id": id(100 + i), "title": titles[(i * 5) as usize % titles.len()], "external_id": ext,
                   "available_for_courses": i % 3 != 0, "module": module, "content": if i % 5 == 0 { "" } else { "Text é \"q\" \\ \n" }})
        })
        .collect();
    let chapters: Vec<_> = (0..60u32)
        .map(|i| json!({"id": id(500 + i), "title": format!("Chapter {}", i % 4), "position": i % 3, "subject": id(100 + i % 20)}))
        .collect();
    json!({"modules": modules, "subjects": subjects, "chapters": chapters})
}

/// [`dataset`] written into `dir` as a dataset file for `coursed load`.
pub fn dataset_file(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("dataset.json");
    std::fs::write(&file, dataset().to_string()).unwrap();
    file
}

/// [`dataset`] loaded into a new SQLite file in `dir` and copied into a fresh PostgreSQL
/// database: an app on each; `None` without a PostgreSQL server.
pub async fn catalogue_on_both_engines(dir: &std::path::Path) -> Option<(TestApp, TestApp)> {
    crate::pg_cluster::server()?;
    let file = dataset_file(dir);
    let sqlite = dir.join("a.db").to_str().unwrap().to_owned();
    let pg = Engine::Postgres.fresh_database(dir);
    let (s, p) = (sqlite.clone(), pg.clone());
    tokio::task::spawn_blocking(move || {
        coursed::dataset::load(&s, &file, None).unwrap();
        coursed::dataset::copy(&s, &p, false).unwrap();
    })
    .await
    .unwrap();
    Some((TestApp::open(Engine::Sqlite, &sqlite).await.unwrap(), TestApp::open(Engine::Postgres, &pg).await.unwrap()))
}

const PATHS: &[&str] = &[
    "/v1/modules?sort=title",
    "/v1/modules?sort=-title",
    "/v1/modules?sort=external_id",
    "/v1/modules?sort=-external_id,title",
    "/v1/modules?filter[external_id]=ext-b",
    "/v1/modules?filter[external_id]=EXT-B",
    "/v1/modules?filter[external_id]=EXT-C",
    "/v1/subjects?sort=title,-external_id&page[size]=7&page[number]=2",
    "/v1/subjects?sort=-updated_at&include=module,chapters&page[size]=5",
    "/v1/subjects?filter[available_for_courses]=false&fields[subjects]=title,module",
    "/v1/subjects?filter[module]=01900000-0000-7000-8000-000000000002&include=chapters.subject",
    "/v1/subjects?filter[id]=01900000-0000-7000-8000-000000000101,01900000-0000-7000-8000-000000000107",
    "/v1/modules/01900000-0000-7000-8000-000000000002?include=subjects.chapters",
    "/v1/modules/01900000-0000-7000-8000-000000000002/subjects?sort=-title",
    "/v1/modules/01900000-0000-7000-8000-000000000002/relationships/subjects",
    "/v1/subjects/01900000-0000-7000-8000-000000000101/chapters",
    "/v1/subjects/01900000-0000-7000-8000-000000000101/relationships/chapters",
    "/v1/subjects/01900000-0000-7000-8000-000000000101/module?include=subjects",
    "/v1/subjects/01900000-0000-7000-8000-000000000107/module",
    "/v1/chapters?sort=position,title&page[size]=100",
    "/v1/chapters?filter[subject]=01900000-0000-7000-8000-000000000103",
];

pub async fn assert_same_answers(a: &TestApp, b: &TestApp) {
    for path in PATHS {
        let (sa, ba) = a.raw(path).await;
        let (sb, bb) = b.raw(path).await;
        assert_eq!(sa, 200, "{path}: {ba:?}");
        assert_eq!((sa, &ba), (sb, &bb), "{path} answers differently on {:?} and {:?}", a.engine, b.engine);
    }
}

#[tokio::test]
async fn both_engines_answer_the_same_bytes_and_copy_carries_a_catalogue_there_and_back() {
    if crate::pg_cluster::server().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dataset_file(dir.path());
    let (sqlite, back) = (dir.path().join("a.db"), dir.path().join("back.db"));
    let (sqlite, back) = (sqlite.to_str().unwrap().to_owned(), back.to_str().unwrap().to_owned());
    // A database whose default collation is linguistic (ICU, en-US), as on many servers: the
    // schema's own "C" collation must give SQLite's byte order anyway.
    let admin = Engine::Postgres.fresh_database(dir.path());
    let name = format!("icu_{}", uuid::Uuid::new_v4().simple());
    let create = format!("CREATE DATABASE {name} LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C' TEMPLATE template0");
    Engine::Postgres.execute(&admin, &create);
    let (head, tail) = admin.split_once('?').unwrap_or((&admin, ""));
    let pg = format!("{}/{name}?{tail}", &head[..head.rfind('/').unwrap()]);
    let (s, p, b) = (sqlite.clone(), pg.clone(), back.clone());
    let results = tokio::task::spawn_blocking(move || {
        let loaded = coursed::dataset::load(&s, &file, None).unwrap();
        // `load` has no way around a target that holds resources, and says nothing of one.
        let reload = coursed::dataset::load(&s, &file, None).unwrap_err();
        assert!(reload.ends_with("already holds 111 resources; use an empty database"), "{reload}");
        let there = coursed::dataset::copy(&s, &p, false).unwrap();
        let again = coursed::dataset::copy(&s, &p, false).unwrap_err();
        let replaced = coursed::dataset::copy(&s, &p, true).unwrap();
        let back = coursed::dataset::copy(&p, &b, false).unwrap();
        (loaded, there, again, replaced, back)
    })
    .await
    .unwrap();
    let (loaded, there, again, replaced, back_counts) = results;
    assert_eq!(loaded.to_string(), "11 modules, 40 subjects, 60 chapters");
    assert_eq!((there.resources, replaced.resources, back_counts.resources), (loaded, loaded, loaded));
    // The history goes along: the load's one `create` per resource, and nothing of the target's
    // own when replaced.
    assert_eq!((there.revisions, replaced.revisions, back_counts.revisions), (111, 111, 111));
    assert_eq!(there.to_string(), "11 modules, 40 subjects, 60 chapters and 111 revisions");
    assert!(again.contains("already holds 111 resources") && again.contains("--replace"), "{again}");

    let on_sqlite = TestApp::open(Engine::Sqlite, &sqlite).await.unwrap();
    let on_postgres = TestApp::open(Engine::Postgres, &pg).await.unwrap();
    let returned = TestApp::open(Engine::Sqlite, &back).await.unwrap();
    assert_same_answers(&on_sqlite, &on_postgres).await;
    assert_same_answers(&on_sqlite, &returned).await;
}

/// A SQLite file at `path` of coursed's first schema (version 1), holding what `rows` inserts.
pub(crate) fn schema_version_1(path: &std::path::Path, rows: &str) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(&format!(
        "{}\nPRAGMA user_version = 1; PRAGMA application_id = 1668445028;\n{rows}",
        include_str!("../../schema.sql")
    ))
    .unwrap();
}

/// `coursed copy --from` and `coursed export` read a SQLite file of an older schema without
/// changing it (it may be a kept backup, or on read-only media): a private copy of it is
/// migrated and read, and removed afterwards.
#[test]
fn a_source_of_an_older_schema_is_read_through_a_migrated_copy_and_left_as_it_was() {
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.db");
    let now = "'2026-01-01T00:00:00.000Z'";
    schema_version_1(
        &old,
        &format!(
            "INSERT INTO modules (id, title, content, created_at, updated_at) VALUES
                ('01900000-0000-7000-8000-000000000001', 'Old module', '<p>Kept</p>', {now}, {now});
             INSERT INTO subjects (id, title, module_id, created_at, updated_at) VALUES
                ('01900000-0000-7000-8000-000000000002', 'Old subject', '01900000-0000-7000-8000-000000000001', {now}, {now});"
        ),
    );
    let bytes = std::fs::read(&old).unwrap();
    let temp = dir.path().join("tmp");
    std::fs::create_dir(&temp).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_coursed")).args(args).env("TMPDIR", &temp).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let new = dir.path().join("new.db");
    run(&["copy", "--from", old.to_str().unwrap(), "--to", new.to_str().unwrap()]);
    let bundle = dir.path().join("old.bundle");
    run(&["export", "--database", old.to_str().unwrap(), "--output", bundle.to_str().unwrap()]);
    assert!(std::fs::read(&old).unwrap() == bytes, "the source is as it was");
    for suffix in ["-wal", "-shm", "-journal"] {
        assert!(!dir.path().join(format!("old.db{suffix}")).exists(), "no old.db{suffix} beside the source");
    }
    assert_eq!(std::fs::read_dir(&temp).unwrap().count(), 0, "the migrated copy is removed");
    let c = rusqlite::Connection::open(&new).unwrap();
    let title: String = c.query_row("SELECT title FROM subjects", [], |r| r.get(0)).unwrap();
    assert_eq!(title, "Old subject");
    let version: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert!(version > 1, "the copy has the current schema ({version})");
    let text = std::fs::read_to_string(&bundle).unwrap();
    assert!(text.contains("Old module") && text.contains("Old subject"), "{text}");
}
