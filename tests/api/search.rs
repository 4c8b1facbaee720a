//! Full-text search (`filter[search]`): words without case or accents, prefixes, phrases,
//! several words, HTML not searchable; with filters, include, fields and paging; on related
//! endpoints; relevance; malformed searches; the index kept by every write path; a database
//! made before search migrated and indexed; and the same bytes from both engines.

use serde_json::{json, Value};

use crate::helpers::{on_both, one, Engine, Resp, TestApp, JSONAPI};
use crate::pg_cluster::AdvisoryLock;

/// Titles of the resources of `r` (a collection), in order.
fn titles(r: &Resp) -> Vec<String> {
    r.assert_status(200);
    r.data().iter().map(|d| d["attributes"]["title"].as_str().unwrap_or("").to_owned()).collect()
}

async fn search(t: &TestApp, path: &str, text: &str) -> Vec<String> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let q: String = form_urlencoded::byte_serialize(text.as_bytes()).collect();
    let r = t.get(&format!("{path}{sep}filter%5Bsearch%5D={q}")).await;
    let found = titles(&r);
    // Every search here fits on one page: the total is what it shows.
    assert_eq!(r.body["meta"]["page"]["total"], found.len(), "{path} {text}");
    found
}

/// A small catalogue: returns (module ids, subject ids).
async fn catalogue(t: &TestApp) -> (Vec<String>, Vec<String>) {
    let m1 = t
        .create(
            "modules",
            json!({"title": "Biology", "introduction": "Life and its chemistry",
                   "content": "<p>Plants use <b>photo</b>synthesis &amp; light.</p><script>var hidden = 'xylophone';</script><p title=\"secret\">R&eacute;sum&eacute; of cells</p>"}),
            Value::Null,
        )
        .await;
    let m2 =
        t.create("modules", json!({"title": "Physics", "introduction": "Light waves and optics"}), Value::Null).await;
    let rel = |m: &str| json!({"module": one("modules", m)});
    let s = [
        t.create("subjects", json!({"title": "Photosynthesis", "introduction": "How plants make sugar"}), rel(&m1))
            .await,
        t.create(
            "subjects",
            json!({"title": "Cell biology", "content": "The cell membrane. Photosynthesis happens in chloroplasts."}),
            rel(&m1),
        )
        .await,
        t.create(
            "subjects",
            json!({"title": "Résumé writing", "introduction": "For the CAFÉ job", "available_for_courses": true}),
            Value::Null,
        )
        .await,
        t.create(
            "subjects",
            json!({"title": "Optics", "content": "Light waves bend. Waves of light interfere."}),
            rel(&m2),
        )
        .await,
        t.create("subjects", json!({"title": "Light and waves", "available_for_courses": true}), rel(&m2)).await,
    ];
    t.chapter("Photons and light", &s[3], 1).await;
    t.chapter("Lenses", &s[3], 2).await;
    t.chapter("Light in plants", &s[0], 1).await;
    (vec![m1, m2], s.to_vec())
}

on_both!(words_match_without_case_or_accents_with_prefixes_and_phrases);
async fn words_match_without_case_or_accents_with_prefixes_and_phrases() {
    let t = TestApp::new().await;
    catalogue(&t).await;
    let s = "/v1/subjects?sort=title";
    assert_eq!(search(&t, s, "resume").await, ["Résumé writing"]);
    assert_eq!(search(&t, s, "RÉSUMÉ").await, ["Résumé writing"]);
    assert_eq!(search(&t, s, "cafe").await, ["Résumé writing"]);
    assert_eq!(search(&t, s, "photosynthesis").await, ["Cell biology", "Photosynthesis"]);
    assert_eq!(search(&t, s, "photo").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "photo*").await, ["Cell biology", "Photosynthesis"]);
    assert_eq!(search(&t, s, "light waves").await, ["Light and waves", "Optics"]);
    assert_eq!(search(&t, s, "\"light waves\"").await, ["Optics"]);
    assert_eq!(search(&t, s, "\"waves of li\"*").await, ["Optics"]);
    assert_eq!(search(&t, s, "\"waves light\"").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "light plants").await, Vec::<String>::new());
    assert_eq!(search(&t, s, "plants sugar").await, ["Photosynthesis"]);
    // Module content is HTML: the text is searchable, the markup is not.
    let m = "/v1/modules";
    assert_eq!(search(&t, m, "photosynthesis").await, ["Biology"]);
    assert_eq!(search(&t, m, "resume cells").await, ["Biology"]);
    for markup in ["xylophone", "secret", "amp", "eacute", "script", "p"] {
        assert_eq!(search(&t, m, markup).await, Vec::<String>::new(), "{markup}");
    }
    assert_eq!(search(&t, m, "light").await, ["Biology", "Physics"]);
    assert_eq!(search(&t, "/v1/chapters?sort=title", "light").await, ["Light in plants", "Photons and light"]);
}

on_both!(a_search_combines_with_filters_include_fields_and_paging);
async fn a_search_combines_with_filters_include_fields_and_paging() {
    let t = TestApp::new().await;
    let (modules, _) = catalogue(&t).await;
    let s = "/v1/subjects?sort=title&filter[available_for_courses]=true";
    assert_eq!(search(&t, s, "light").await, ["Light and waves"]);
    let r = t.get(&format!("/v1/subjects?filter[search]=light&filter[module]={}&sort=-title", modules[1])).await;
    assert_eq!(titles(&r), ["Optics", "Light and waves"]);
    // Paging: a page of one, with the total of the search.
    let r = t.get("/v1/subjects?filter[search]=light&sort=title&page[size]=1&page[number]=2").await;
    assert_eq!(titles(&r), ["Optics"]);
    assert_eq!(r.body["meta"]["page"]["total"], 2);
    assert_eq!(r.body["meta"]["page"]["lastPage"], 2);
    let next = r.body["links"]["prev"].as_str().unwrap();
    assert!(next.contains("filter[search]=light"), "{next}");
    // Include and sparse fieldsets; the excerpt is in each resource's meta.
    let r = t.get("/v1/subjects?filter[search]=photosynthesis&include=module&fields[subjects]=title,module&fields[modules]=title&sort=title").await;
    assert_eq!(titles(&r), ["Cell biology", "Photosynthesis"]);
    assert_eq!(r.body["included"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["included"][0]["attributes"], json!({"title": "Biology"}));
    assert_eq!(r.data()[0]["attributes"], json!({"title": "Cell biology"}));
    assert_eq!(
        r.data()[0]["meta"]["search"],
        json!({"attribute": "content", "excerpt": "The cell membrane. <mark>Photosynthesis</mark> happens in chloroplasts."})
    );
    assert_eq!(r.data()[1]["meta"]["search"], json!({"attribute": "title", "excerpt": "<mark>Photosynthesis</mark>"}));
    // A module's excerpt is of its text, not its markup.
    let r = t.get("/v1/modules?filter[search]=photosynth*%20light").await;
    assert_eq!(
        r.data()[0]["meta"]["search"]["excerpt"],
        "Plants use <mark>photosynthesis</mark> &amp; <mark>light</mark>. Résumé of cells"
    );
    // Without a search there is no meta.
    assert!(t.get("/v1/subjects").await.data()[0].get("meta").is_none());
}

on_both!(related_endpoints_search_the_children_of_one_parent);
async fn related_endpoints_search_the_children_of_one_parent() {
    let t = TestApp::new().await;
    let (modules, subjects) = catalogue(&t).await;
    let r = t.get(&format!("/v1/modules/{}/subjects?filter[search]=photosynthesis&sort=title", modules[0])).await;
    assert_eq!(titles(&r), ["Cell biology", "Photosynthesis"]);
    assert_eq!(r.body["meta"]["page"]["total"], 2);
    let r = t.get(&format!("/v1/modules/{}/subjects?filter[search]=photosynthesis", modules[1])).await;
    assert_eq!(titles(&r), Vec::<String>::new());
    let r = t.get(&format!("/v1/subjects/{}/chapters?filter[search]=light", subjects[3])).await;
    assert_eq!(titles(&r), ["Photons and light"]);
    let r = t.get(&format!("/v1/subjects/{}/chapters?filter[search]=%22", subjects[3])).await;
    r.assert_error(400, "filter[search]");
}

on_both!(best_matches_come_first);
async fn best_matches_come_first() {
    let t = TestApp::new().await;
    let (_, subjects) = catalogue(&t).await;
    // Enough other subjects that a rare word's matches are few beside the table (an engine may
    // then read them another way than a common word's), some of them matching in the content.
    let ops: Vec<Value> = (0..100)
        .map(|i| {
            let content = if i % 10 == 0 { "filler on light" } else { "filler" };
            json!({"op": "add", "data": {"type": "subjects", "attributes": {"title": format!("Filler {i:03}"), "content": content}}})
        })
        .collect();
    let body = json!({ "atomic:operations": ops }).to_string();
    t.send(t.req("POST", "/v1/operations").header("content-type", ATOMIC).body(body)).await.assert_status(200);
    let r = t.get("/v1/subjects?filter[search]=light&page[size]=3&page[number]=2").await;
    assert_eq!(titles(&r), ["Filler 010", "Filler 020", "Filler 030"]);
    assert_eq!(r.body["meta"]["page"]["total"], 12);
    let r = t.get("/v1/subjects?filter[search]=filler&page[size]=2&page[number]=50").await;
    assert_eq!(titles(&r), ["Filler 098", "Filler 099"]);
    let r = t.get("/v1/subjects?filter[search]=filler%20light&page[size]=20").await;
    assert_eq!(titles(&r).len(), 10);
    // Without a sort: matches in the title first, then by id (creation order).
    assert_eq!(search(&t, "/v1/subjects", "photosynthesis").await, ["Photosynthesis", "Cell biology"]);
    assert_eq!(search(&t, "/v1/subjects?sort=-relevance", "photosynthesis").await, ["Photosynthesis", "Cell biology"]);
    // More terms in the title rank higher; ties by id.
    assert_eq!(search(&t, "/v1/subjects", "light waves").await, ["Light and waves", "Optics"]);
    let fillers = (0..100).step_by(10).map(|i| format!("Filler {i:03}"));
    let light: Vec<String> = ["Light and waves", "Optics"].map(String::from).into_iter().chain(fillers).collect();
    assert_eq!(search(&t, "/v1/subjects", "light").await, light);
    assert_eq!(search(&t, "/v1/subjects?sort=-relevance,id", "wave*").await, ["Light and waves", "Optics"]);
    // Another sort replaces relevance.
    assert_eq!(search(&t, "/v1/subjects?sort=id", "photosynthesis").await, ["Photosynthesis", "Cell biology"]);
    assert_eq!(search(&t, "/v1/subjects?sort=-id", "photosynthesis").await, ["Cell biology", "Photosynthesis"]);
    // On a related endpoint the search's order replaces the children's order.
    let r = t.get(&format!("/v1/subjects/{}/chapters?filter[search]=lenses%20OR%20photons", subjects[3])).await;
    assert_eq!(titles(&r), Vec::<String>::new());
}

on_both!(malformed_searches_and_relevance_without_a_search_are_400s);
async fn malformed_searches_and_relevance_without_a_search_are_400s() {
    let t = TestApp::new().await;
    catalogue(&t).await;
    let long = "a".repeat(201);
    let many_terms = "a b c d e f g h i";
    for bad in ["", "%20%20", "*", "a*", "%22open", "%22%22", "a*b", "-", "%22ab%22c", &long, many_terms, "%00"] {
        let r = t.get(&format!("/v1/subjects?filter[search]={}", bad.replace(' ', "%20"))).await;
        r.assert_error(400, "filter[search]");
    }
    for path in ["/v1/subjects?sort=-relevance", "/v1/modules?sort=title,-relevance", "/v1/chapters?sort=relevance"] {
        t.get(path).await.assert_error(400, "sort");
    }
    t.get("/v1/subjects?filter[search]=x&sort=relevance").await.assert_error(400, "sort");
    t.get("/v1/subjects?filter[search]=x&sort=-relevance,-relevance").await.assert_error(400, "sort");
    // Not on a single resource.
    let r = t.get("/v1/subjects").await;
    let id = r.data()[0]["id"].as_str().unwrap().to_owned();
    t.get(&format!("/v1/subjects/{id}?filter[search]=x")).await.assert_error(400, "filter[search]");
}

const ATOMIC: &str = "application/vnd.api+json; ext=\"https://jsonapi.org/ext/atomic\"";

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
        coursed::bundle::import(&database, &path, coursed::bundle::Options { merge: true, dry_run: false })
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
    if crate::pg_cluster::server().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = crate::copy::dataset_file(dir.path());
    let sqlite = dir.path().join("a.db").to_str().unwrap().to_owned();
    let pg = Engine::Postgres.fresh_database(dir.path());
    let (s, p) = (sqlite.clone(), pg.clone());
    tokio::task::spawn_blocking(move || {
        coursed::dataset::load(&s, &file, None).unwrap();
        coursed::dataset::copy(&s, &p, false).unwrap();
    })
    .await
    .unwrap();
    let a = TestApp::open(Engine::Sqlite, &sqlite).await.unwrap();
    let b = TestApp::open(Engine::Postgres, &pg).await.unwrap();
    for path in SEARCHES {
        let (sa, ba) = a.raw(path).await;
        let (sb, bb) = b.raw(path).await;
        assert_eq!(sa, 200, "{path}: {ba:?}");
        assert!(serde_json::from_slice::<Value>(&ba).unwrap()["meta"]["page"]["total"].as_u64().unwrap() > 0, "{path}");
        assert_eq!((sa, &ba), (sb, &bb), "{path} answers differently on SQLite and PostgreSQL");
    }
    let _ = JSONAPI;
}
