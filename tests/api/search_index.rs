//! The search index kept by every write path, a database made before search migrated and
//! indexed, and the same bytes from both engines for the same searches. What each engine's
//! index does of its own: `search_engines.rs`.

use serde_json::{json, Value};

use crate::helpers::{on_both, Engine, TestApp, ATOMIC, JSONAPI};
use crate::search::{catalogue, search};

on_both!(the_index_follows_every_write);
async fn the_index_follows_every_write() {
    let t = TestApp::new().await;
    let (modules, subjects) = catalogue(&t).await;
    let s = "/v1/subjects?sort=title";
    // PATCH: the old words go, the new ones come.
    let patch = json!({"data": {"type": "subjects", "id": subjects[3], "attributes": {"title": "Geometric óptica"}}});
    t.write("PATCH", &format!("/v1/subjects/{}", subjects[3]), patch).await.assert_status(200);
    assert_eq!(search(&t, s, "optics").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "optica geometric").await, ["Geometric óptica"]);
    // A PATCH of other attributes or of the module keeps the words.
    let patch = json!({"data": {"type": "subjects", "id": subjects[3], "attributes": {"available_for_courses": true},
                                "relationships": {"module": {"data": null}}}});
    t.write("PATCH", &format!("/v1/subjects/{}", subjects[3]), patch).await.assert_status(200);
    assert_eq!(search(&t, s, "\"light waves\"").await, ["Geometric óptica"]);
    // DELETE, and the cascade to chapters.
    t.delete(&format!("/v1/subjects/{}", subjects[3])).await.assert_status(204);
    assert_eq!(search(&t, s, "interfere").await, Vec::<String>::new());
    assert_eq!(search(&t, "/v1/chapters", "photons").await, Vec::<String>::new());
    assert_eq!(search(&t, "/v1/chapters", "light").await, ["Light in plants"]);
    // Deleting a module unlinks its subjects, which keep their words.
    t.delete(&format!("/v1/modules/{}", modules[0])).await.assert_status(204);
    assert_eq!(search(&t, "/v1/modules", "photosynthesis").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "chloroplasts").await, ["Cell biology"]);
    // Atomic operations: added, updated and removed in one request.
    let ops = json!({"atomic:operations": [
        {"op": "add", "data": {"type": "subjects", "lid": "a", "attributes": {"title": "Thermodynamics"}}},
        {"op": "add", "data": {"type": "subjects", "lid": "b", "attributes": {"title": "Entropy", "content": "Heat death"}}},
        {"op": "update", "data": {"type": "subjects", "id": subjects[1], "attributes": {"content": "Mitochondria"}}},
        {"op": "remove", "ref": {"type": "subjects", "id": subjects[2]}},
    ]});
    let r = t.send(t.req("POST", "/v1/operations").header("content-type", ATOMIC).body(ops.to_string())).await;
    r.assert_status(200);
    assert_eq!(search(&t, s, "thermo*").await, ["Thermodynamics"]);
    assert_eq!(search(&t, s, "heat").await, ["Entropy"]);
    assert_eq!(search(&t, s, "chloroplasts").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "mitochondria").await, ["Cell biology"]);
    assert_eq!(search(&t, s, "resume").await, Vec::<String>::new());
    // A failed write leaves the index as it was.
    let ops = json!({"atomic:operations": [
        {"op": "add", "data": {"type": "subjects", "attributes": {"title": "Ghost words"}}},
        {"op": "add", "data": {"type": "subjects", "attributes": {}}},
    ]});
    let r = t.send(t.req("POST", "/v1/operations").header("content-type", ATOMIC).body(ops.to_string())).await;
    r.assert_problem(422);
    assert_eq!(search(&t, s, "ghost").await, Vec::<String>::new());
    // An import with --merge replaces and inserts.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("b.jsonl");
    let lines = [
        json!({"format": "coursed-bundle", "version": 1}),
        json!({"type": "subjects", "id": subjects[0], "attributes": {"title": "Chlorophyll", "content": "green pigment"}}),
        json!({"type": "subjects", "id": "01900000-0000-7000-8000-000000000999", "attributes": {"title": "Imported zoology"}}),
    ];
    std::fs::write(&file, lines.iter().map(|l| l.to_string() + "\n").collect::<String>()).unwrap();
    let (database, path) = (t.database.clone(), file.to_str().unwrap().to_owned());
    tokio::task::spawn_blocking(move || {
        coursed::bundle::import(
            &database,
            &path,
            coursed::bundle::Options { merge: true, dry_run: false, no_history: false, follow: false },
        )
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(search(&t, s, "photosynthesis").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "pigment").await, ["Chlorophyll"]);
    assert_eq!(search(&t, s, "zoology").await, ["Imported zoology"]);
    // The excerpt follows, too.
    let r = t.get("/v1/subjects?filter[search]=green").await;
    assert_eq!(r.data()[0]["meta"]["search"]["excerpt"], "<mark>green</mark> pigment");
    // A backup (a SQLite file, from either engine) searches as its source does.
    let output = dir.path().join("backup.db");
    let (database, out) = (t.database.clone(), output.clone());
    tokio::task::spawn_blocking(move || coursed::backup::backup(&database, &out, false)).await.unwrap().unwrap();
    let restored = TestApp::open(Engine::Sqlite, output.to_str().unwrap()).await.unwrap();
    for text in ["pigment", "zoology", "thermo*", "\"heat death\"", "mitochondria", "light"] {
        assert_eq!(search(&restored, s, text).await, search(&t, s, text).await, "{text}");
    }
}

on_both!(a_database_made_before_search_is_migrated_and_indexed);
async fn a_database_made_before_search_is_migrated_and_indexed() {
    let engine = Engine::current();
    let dir = tempfile::tempdir().unwrap();
    let database = engine.fresh_database(dir.path());
    let (schema, stamp) = match engine {
        Engine::Sqlite => (
            include_str!("../../schema.sql"),
            "PRAGMA user_version = 1; PRAGMA application_id = 1668445028;".to_owned(),
        ),
        Engine::Postgres => {
            (include_str!("../../schema.postgres.sql"), "INSERT INTO coursed_schema (version) VALUES (1);".to_owned())
        }
    };
    let now = "'2026-01-01T00:00:00.000Z'";
    let rows = format!(
        "INSERT INTO modules (id, title, content, created_at, updated_at) VALUES
            ('01900000-0000-7000-8000-000000000001', 'Old module', '<p>Caf&eacute; <i>culture</i></p>', {now}, {now});
         INSERT INTO subjects (id, title, introduction, module_id, created_at, updated_at) VALUES
            ('01900000-0000-7000-8000-000000000002', 'Old subject', 'Naïve résumé', '01900000-0000-7000-8000-000000000001', {now}, {now});
         INSERT INTO chapters (id, title, subject_id, created_at, updated_at) VALUES
            ('01900000-0000-7000-8000-000000000003', 'Old chapter', '01900000-0000-7000-8000-000000000002', {now}, {now});"
    );
    // More rows than the migration computes at once, with the word `batched` among others.
    let many: String = (0..1100)
        .map(|i| {
            format!(
                "INSERT INTO subjects (id, title, introduction, created_at, updated_at) VALUES
                    ('01900000-0000-7000-8000-1{i:011}', 'Batched {i}', 'Number {i}', {now}, {now});\n"
            )
        })
        .collect();
    engine.execute(&database, &format!("{schema}\n{stamp}\n{rows}\n{many}"));
    let t = TestApp::open(engine, &database).await.unwrap();
    assert_eq!(search(&t, "/v1/modules", "cafe culture").await, ["Old module"]);
    assert_eq!(search(&t, "/v1/subjects", "naive resume").await, ["Old subject"]);
    assert_eq!(search(&t, "/v1/chapters", "old").await, ["Old chapter"]);
    let r = t.get("/v1/subjects?filter[search]=batched&sort=title").await;
    assert_eq!(r.body["meta"]["page"]["total"], 1100);
    assert_eq!(search(&t, "/v1/subjects", "1099").await, ["Batched 1099"]);
    assert_eq!(search(&t, "/v1/subjects", "number 0").await, ["Batched 0"]);
    // Each text's words in its own column.
    let sql = "SELECT count(*) FROM subjects WHERE title_words = 'batched 7' AND introduction_words = 'number 7'";
    assert_eq!(t.sql_i64(sql, vec![]).await, 1);
    // New writes are indexed beside the migrated rows.
    t.subject("Old and new", None).await;
    assert_eq!(search(&t, "/v1/subjects?sort=title", "old").await, ["Old and new", "Old subject"]);
}

/// Searches of the cross-engine comparison (on the catalogue of `crate::copy::dataset`, with
/// some rows given searchable text).
const SEARCHES: &[&str] = &[
    "/v1/modules?filter[search]=about",
    "/v1/modules?filter[search]=eclair",
    "/v1/modules?filter[search]=zur*&fields[modules]=title",
    "/v1/subjects?filter[search]=apple",
    "/v1/subjects?filter[search]=text%20q&page[size]=7&page[number]=2",
    "/v1/subjects?filter[search]=%22text%20e%22&include=module&sort=-relevance",
    "/v1/subjects?filter[search]=ap*&sort=-title",
    "/v1/subjects?filter[search]=ab*&sort=-title",
    "/v1/subjects?filter[search]=zebra&filter[available_for_courses]=true",
    "/v1/modules/01900000-0000-7000-8000-000000000002/subjects?filter[search]=text",
    "/v1/subjects/01900000-0000-7000-8000-000000000101/chapters?filter[search]=chapter",
    "/v1/chapters?filter[search]=chapter%201&page[size]=100",
    "/v1/chapters?filter[search]=%22chapter%203%22&sort=position",
];

#[tokio::test]
async fn both_engines_give_the_same_bytes_for_the_same_searches() {
    let dir = tempfile::tempdir().unwrap();
    let Some((a, b)) = crate::copy::catalogue_on_both_engines(dir.path()).await else { return };
    for path in SEARCHES {
        let (sa, ba) = a.raw(path).await;
        let (sb, bb) = b.raw(path).await;
        assert_eq!(sa, 200, "{path}: {ba:?}");
        assert!(serde_json::from_slice::<Value>(&ba).unwrap()["meta"]["page"]["total"].as_u64().unwrap() > 0, "{path}");
        assert_eq!((sa, &ba), (sb, &bb), "{path} answers differently on SQLite and PostgreSQL");
    }
    let _ = JSONAPI;
}
