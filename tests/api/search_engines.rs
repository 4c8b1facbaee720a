//! What each engine's search index does of its own: on SQLite the writer indexes each group of
//! writes at its end; on PostgreSQL one-word totals come from word counts folded in the
//! background.

use serde_json::json;

use crate::engines::AdvisoryLock;
use crate::helpers::{Engine, TestApp, ATOMIC};
use crate::search::{catalogue, search};

/// On SQLite the server's writer indexes each group of writes at its end, in one statement per
/// index (src/store/sqlite/indexing.rs), while every other connection keeps the schema's
/// triggers. Concurrent creates, renames, deletes with their cascade and refused writes, many
/// of them in one group, leave each index exactly what its table holds (FTS5's own check
/// against the table) and the row counts exact; a row written by another program is indexed.
#[tokio::test]
async fn grouped_writes_leave_the_sqlite_indexes_and_counts_exact() {
    let t = std::sync::Arc::new(TestApp::new().await);
    let (modules, subjects) = catalogue(&t).await;
    let mut writes = tokio::task::JoinSet::new();
    for i in 0..48 {
        let (t, subjects, modules) = (t.clone(), subjects.clone(), modules.clone());
        writes.spawn(async move {
            let s = &subjects[i % 5];
            match i % 6 {
                // The same external_id eight times: one create is kept, seven are refused (409).
                0 => {
                    let body = json!({"data": {"type": "subjects",
                        "attributes": {"title": format!("Duplicate {i}"), "external_id": "twice"}}});
                    t.write("POST", "/v1/subjects", body).await.status.as_u16()
                }
                1 | 2 => {
                    let body = json!({"data": {"type": "subjects", "attributes": {"title": format!("Quantum {i}"),
                        "content": "Entangled particles"}}});
                    t.write("POST", "/v1/subjects", body).await.status.as_u16()
                }
                // Renamed several times, concurrently: the index holds the last title only.
                3 => {
                    let body =
                        json!({"data": {"type": "subjects", "id": s, "attributes": {"title": format!("Renamed {i}")}}});
                    t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.status.as_u16()
                }
                // A chapter created and deleted again.
                4 => {
                    let c = t.chapter(&format!("Fleeting {i}"), &subjects[0], i as i64).await;
                    t.delete(&format!("/v1/chapters/{c}")).await.status.as_u16()
                }
                _ if i == 5 => t.delete(&format!("/v1/subjects/{}", subjects[3])).await.status.as_u16(),
                _ if i == 11 => t.delete(&format!("/v1/modules/{}", modules[1])).await.status.as_u16(),
                _ => 200,
            }
        });
    }
    let mut statuses = Vec::new();
    while let Some(status) = writes.join_next().await {
        statuses.push(status.unwrap());
    }
    assert_eq!(statuses.iter().filter(|&&s| s == 409).count(), 7, "{statuses:?}");
    let check = |t: &TestApp| {
        let indexes = [
            "modules_search",
            "modules_titles",
            "subjects_search",
            "subjects_titles",
            "chapters_search",
            "chapters_titles",
        ];
        for index in indexes {
            Engine::Sqlite
                .execute(&t.database, &format!("INSERT INTO {index} ({index}, rank) VALUES ('integrity-check', 1)"));
        }
    };
    check(&t);
    // Rows changed twice by one write: the index gives up the words it held (not the middle
    // ones), and a row added and changed in the same write was never in it.
    let ops = json!({"atomic:operations": [
        {"op": "update", "data": {"type": "subjects", "id": subjects[1], "attributes": {"title": "Midway"}}},
        {"op": "remove", "ref": {"type": "subjects", "id": subjects[1]}},
        {"op": "add", "data": {"type": "subjects", "lid": "n", "attributes": {"title": "Newborn"}}},
        {"op": "update", "data": {"type": "subjects", "lid": "n", "attributes": {"title": "Grown"}}},
    ]});
    let r = t.send(t.req("POST", "/v1/operations").header("content-type", ATOMIC).body(ops.to_string())).await;
    r.assert_status(200);
    check(&t);
    let s = "/v1/subjects?sort=title&page[size]=50";
    assert_eq!(search(&t, s, "grown").await, ["Grown"]);
    assert_eq!(search(&t, s, "midway newborn").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "quantum").await.len(), 16);
    assert_eq!(search(&t, s, "duplicate").await.len(), 1);
    assert_eq!(search(&t, "/v1/chapters", "fleeting").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "optics").await, Vec::<String>::new(), "deleted");
    assert_eq!(search(&t, "/v1/chapters", "lenses").await, Vec::<String>::new(), "deleted by the cascade");
    assert_eq!(search(&t, "/v1/modules", "physics").await, Vec::<String>::new(), "deleted");
    let renamed = search(&t, s, "renamed").await;
    assert!(!renamed.is_empty() && renamed.len() <= 5, "{renamed:?}");
    let current = t.get(&format!("/v1/subjects/{}", subjects[4])).await;
    let title = current.body["data"]["attributes"]["title"].as_str().unwrap().to_owned();
    assert_eq!(search(&t, s, &format!("\"{title}\"")).await, [title]);
    for (table, sql) in [
        (
            "subjects",
            "SELECT n - (SELECT count(*) FROM subjects) FROM row_counts WHERE tbl = 'subjects' AND parent = ''",
        ),
        (
            "chapters",
            "SELECT n - (SELECT count(*) FROM chapters) FROM row_counts WHERE tbl = 'chapters' AND parent = ''",
        ),
        ("modules", "SELECT n - (SELECT count(*) FROM modules) FROM row_counts WHERE tbl = 'modules' AND parent = ''"),
    ] {
        assert_eq!(t.sql_i64(sql, vec![]).await, 0, "the count of {table}");
    }
    // Another program writing the file: the schema's triggers index its row at once.
    Engine::Sqlite.execute(
        &t.database,
        "INSERT INTO subjects (id, title, title_words, created_at, updated_at)
         VALUES ('01900000-0000-7000-8000-0000000000aa', 'Written elsewhere', 'written elsewhere',
                 '2026-11-23T00:00:00.000Z', '2026-11-23T00:00:00.000Z')",
    );
    assert_eq!(search(&t, s, "elsewhere").await, ["Written elsewhere"]);
    check(&t);
}

/// How many words of any table have a count (folded, plus the changes not yet folded) that
/// differs from the number of rows holding them.
async fn miscounted(t: &TestApp) -> i64 {
    const SQL: &str = "WITH real AS (
            SELECT 'modules' AS tbl, w AS word, count(*) AS n FROM modules, unnest(tsvector_to_array(search)) AS w GROUP BY w
            UNION ALL SELECT 'subjects', w, count(*) FROM subjects, unnest(tsvector_to_array(search)) AS w GROUP BY w
            UNION ALL SELECT 'chapters', w, count(*) FROM chapters, unnest(tsvector_to_array(search)) AS w GROUP BY w
        ), kept AS (
            SELECT tbl, word, sum(n) AS n FROM (
                SELECT tbl, word, n FROM search_words
                UNION ALL SELECT tbl, w, sign FROM search_changes, unnest(tsvector_to_array(words)) AS w
            ) AS k GROUP BY tbl, word
        )
        SELECT count(*) FROM ((SELECT * FROM real EXCEPT SELECT * FROM kept WHERE n <> 0)
                              UNION ALL (SELECT * FROM kept WHERE n <> 0 EXCEPT SELECT * FROM real)) AS differing";
    t.sql_i64(SQL, vec![]).await
}

/// On PostgreSQL a one-word total is read from counts of each word, kept from a log of the
/// changes that every server folds into the counts in the background: exact before a fold,
/// after it, and with changes on either side of it.
#[tokio::test]
async fn one_word_totals_stay_exact_while_changes_are_folded_on_postgres() {
    let Some(pg) = crate::pg_cluster::server() else { return };
    let t = TestApp::open(Engine::Postgres, &pg.fresh_database()).await.unwrap();
    // The lock a fold takes (src/store/postgres/search.rs): held, nothing is folded.
    const FOLDING: i64 = 0x6372_7366;
    let held = AdvisoryLock::hold(&t.database, FOLDING);
    let (modules, subjects) = catalogue(&t).await;
    let logged = || t.sql_i64("SELECT count(*) FROM search_changes", vec![]);
    let folded = || async {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while logged().await > 0 {
            assert!(std::time::Instant::now() < deadline, "the changes were not folded within 30 s");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    let s = "/v1/subjects?sort=title";
    assert!(logged().await > 0, "writes are logged");
    assert_eq!(miscounted(&t).await, 0);
    assert_eq!(search(&t, s, "light").await, ["Light and waves", "Optics"]);
    drop(held);
    folded().await;
    assert_eq!(miscounted(&t).await, 0);
    assert_eq!(search(&t, s, "light").await, ["Light and waves", "Optics"]);
    let held = AdvisoryLock::hold(&t.database, FOLDING);
    // Changes after the fold: an update of the words, a delete that cascades, new rows.
    let patch = json!({"data": {"type": "subjects", "id": subjects[3], "attributes": {"title": "Optics", "content": "Mirrors"}}});
    t.write("PATCH", &format!("/v1/subjects/{}", subjects[3]), patch).await.assert_status(200);
    t.delete(&format!("/v1/modules/{}", modules[0])).await.assert_status(204);
    t.delete(&format!("/v1/subjects/{}", subjects[0])).await.assert_status(204);
    t.subject("Light again", None).await;
    assert!(logged().await > 0);
    assert_eq!(miscounted(&t).await, 0);
    assert_eq!(search(&t, s, "light").await, ["Light again", "Light and waves"]);
    assert_eq!(search(&t, "/v1/chapters", "light").await, ["Photons and light"]);
    assert_eq!(search(&t, "/v1/modules", "light").await, ["Physics"]);
    drop(held);
    folded().await;
    assert_eq!(miscounted(&t).await, 0);
    assert_eq!(search(&t, s, "light").await, ["Light again", "Light and waves"]);
    assert_eq!(search(&t, s, "mirrors").await, ["Optics"]);
    // A word no row holds any more is not kept.
    let sql = "SELECT count(*) FROM search_words WHERE word = 'sugar'";
    assert_eq!(t.sql_i64(sql, vec![]).await, 0);
    assert_eq!(t.sql_i64("SELECT count(*) FROM search_words WHERE n = 0", vec![]).await, 0);
    assert_eq!(search(&t, "/v1/chapters", "light").await, ["Photons and light"]);
    assert_eq!(search(&t, "/v1/modules", "light").await, ["Physics"]);
}
