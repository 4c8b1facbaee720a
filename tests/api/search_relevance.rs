//! Best match first over many pages: every page is its slice of the order computed here from
//! the texts written (the rows whose title holds every term, then the others, each by id), on
//! every kind of search, with filters and on related endpoints; and each statement reads the
//! search index once, never once per row.

use serde_json::{json, Value};

use crate::helpers::{on_both, Engine, TestApp, ATOMIC};

/// Subjects written, numbered `0..SUBJECTS`; their words follow from the number (see
/// [`subject`]).
const SUBJECTS: u32 = 210;
/// Chapters of the first subject, numbered `0..CHAPTERS`.
const CHAPTERS: u32 = 40;
const PAGE: usize = 7;

/// Subject `i`'s title and content: `alpha` in every third title and every second content,
/// `beta` in most contents and every ninth title, `gamma delta` (the phrase) in every 35th
/// title and every 7th content, `delta gamma` (the same words, not the phrase) in every 11th;
/// `filler` in every content and no title.
fn subject(i: u32) -> (String, String) {
    let mut title = format!("Subject {i}");
    let mut content = String::from("filler");
    let add = |to: &mut String, on: bool, words: &str| {
        if on {
            to.push(' ');
            to.push_str(words);
        }
    };
    add(&mut title, nth(i, 3), "alpha");
    add(&mut title, nth(i, 9), "beta");
    add(&mut title, nth(i, 35), "gamma delta");
    add(&mut content, nth(i, 2), "alpha");
    add(&mut content, !nth(i, 5), "beta");
    add(&mut content, nth(i, 7), "gamma delta");
    add(&mut content, nth(i, 11), "delta gamma");
    (title, content)
}

/// Whether `i` is one of every `n`th (0 is).
fn nth(i: u32, n: u32) -> bool {
    i.is_multiple_of(n)
}

/// Chapter `c` of the first subject: `alpha` in every 4th title and every 3rd content.
fn chapter(c: u32) -> (String, String) {
    let title = if nth(c, 4) { format!("Chapter {c} alpha") } else { format!("Chapter {c}") };
    (title, if nth(c, 3) { "alpha".into() } else { "filler".into() })
}

struct Catalogue {
    /// The id of each subject, by number.
    subjects: Vec<String>,
    chapters: Vec<String>,
    /// The module of the even subjects.
    even: String,
}

async fn catalogue(t: &TestApp) -> Catalogue {
    let even = t.module("Even").await;
    let odd = t.module("Odd").await;
    let ops: Vec<Value> = (0..SUBJECTS)
        .map(|i| {
            let (title, content) = subject(i);
            let module = if nth(i, 2) { &even } else { &odd };
            json!({"op": "add", "data": {"type": "subjects",
                "attributes": {"title": title, "content": content, "available_for_courses": !nth(i, 4)},
                "relationships": {"module": {"data": {"type": "modules", "id": module}}}}})
        })
        .collect();
    let subjects = add(t, ops).await;
    let ops: Vec<Value> = (0..CHAPTERS)
        .map(|c| {
            let (title, content) = chapter(c);
            json!({"op": "add", "data": {"type": "chapters", "attributes": {"title": title, "content": content, "position": c},
                "relationships": {"subject": {"data": {"type": "subjects", "id": subjects[0]}}}}})
        })
        .collect();
    let chapters = add(t, ops).await;
    Catalogue { subjects, chapters, even }
}

/// Runs the operations in one atomic request; returns the ids they made, in order.
async fn add(t: &TestApp, ops: Vec<Value>) -> Vec<String> {
    let body = json!({ "atomic:operations": ops }).to_string();
    let r = t.send(t.req("POST", "/v1/operations").header("content-type", ATOMIC).body(body)).await;
    r.assert_status(200);
    r.body["atomic:results"].as_array().unwrap().iter().map(|x| x["data"]["id"].as_str().unwrap().to_owned()).collect()
}

/// Best match first over `ids` (by number): those `matches` selects with `in_title` first,
/// then the others it selects, each by id.
fn expected(ids: &[String], matches: impl Fn(u32) -> bool, in_title: impl Fn(u32) -> bool) -> Vec<String> {
    let tier = |first: bool| {
        let mut tier: Vec<String> = (0..ids.len() as u32)
            .filter(|&i| matches(i) && in_title(i) == first)
            .map(|i| ids[i as usize].clone())
            .collect();
        tier.sort();
        tier
    };
    [tier(true), tier(false)].concat()
}

/// Asserts that every page of `path` (a search), and the one past the last, is its slice of
/// `order`, with the total.
async fn pages(t: &TestApp, path: &str, order: &[String]) {
    let sep = if path.contains('?') { '&' } else { '?' };
    let last = order.len().div_ceil(PAGE).max(1);
    for number in 1..=last + 1 {
        let r = t.get(&format!("{path}{sep}page[size]={PAGE}&page[number]={number}")).await;
        r.assert_status(200);
        let slice: Vec<String> = order.iter().skip((number - 1) * PAGE).take(PAGE).cloned().collect();
        assert_eq!(r.ids(), slice, "{path}, page {number} of {last}");
        assert_eq!(r.body["meta"]["page"]["total"], order.len(), "{path}");
    }
}

on_both!(every_page_of_best_match_first_is_its_slice_of_the_whole_order);
async fn every_page_of_best_match_first_is_its_slice_of_the_whole_order() {
    let t = TestApp::new().await;
    let c = catalogue(&t).await;
    let s = &c.subjects;
    let alpha = |i: u32| nth(i, 3) || nth(i, 2);
    let beta = |i: u32| !nth(i, 5) || nth(i, 9);
    let gamma = |i: u32| nth(i, 35) || nth(i, 7) || nth(i, 11);
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("alpha", expected(s, alpha, |i| nth(i, 3))),
        ("ALPH*", expected(s, alpha, |i| nth(i, 3))),
        ("beta", expected(s, beta, |i| nth(i, 9))),
        ("alpha%20beta", expected(s, |i| alpha(i) && beta(i), |i| nth(i, 9))),
        ("gamma", expected(s, gamma, |i| nth(i, 35))),
        ("%22gamma%20delta%22", expected(s, |i| nth(i, 35) || nth(i, 7), |i| nth(i, 35))),
        ("%22gamma%20de%22*%20beta", expected(s, |i| (nth(i, 35) || nth(i, 7)) && beta(i), |i| nth(i, 315))),
        ("filler", expected(s, |_| true, |_| false)),
        ("nowhere", vec![]),
    ];
    for (text, order) in &cases {
        pages(&t, &format!("/v1/subjects?filter[search]={text}"), order).await;
    }
    pages(&t, "/v1/subjects?filter[search]=alpha&sort=-relevance", &cases[0].1).await;
    // With other filters, and on the related endpoints.
    let order = expected(s, |i| alpha(i) && !nth(i, 4), |i| nth(i, 3));
    pages(&t, "/v1/subjects?filter[search]=alpha&filter[available_for_courses]=true", &order).await;
    let order = expected(s, |i| nth(i, 2) && beta(i), |i| nth(i, 9));
    pages(&t, &format!("/v1/modules/{}/subjects?filter[search]=beta", c.even), &order).await;
    let order = expected(&c.chapters, |n| nth(n, 4) || nth(n, 3), |n| nth(n, 4));
    pages(&t, &format!("/v1/subjects/{}/chapters?filter[search]=alpha", s[0]), &order).await;
    pages(&t, "/v1/chapters?filter[search]=alpha", &order).await;
}

on_both!(best_match_first_reads_the_search_index_once_per_statement);
async fn best_match_first_reads_the_search_index_once_per_statement() {
    let t = TestApp::new().await;
    let c = catalogue(&t).await;
    let searches = [
        "/v1/subjects?filter[search]=alpha".to_owned(),
        "/v1/subjects?filter[search]=alpha%20beta".to_owned(),
        "/v1/subjects?filter[search]=alph*".to_owned(),
        "/v1/subjects?filter[search]=%22gamma%20delta%22".to_owned(),
        "/v1/subjects?filter[search]=beta&filter[available_for_courses]=true".to_owned(),
        format!("/v1/modules/{}/subjects?filter[search]=beta", c.even),
    ];
    for search in &searches {
        for number in [1, 4, 9, 30] {
            let ran = t.app.db.statements().unwrap();
            t.get(&format!("{search}&page[size]={PAGE}&page[number]={number}")).await.assert_status(200);
            let ran = (t.app.db.statements().unwrap() - ran) as usize;
            assert!(ran <= 10, "{search}, page {number}: {ran} statements");
            let latest = t.app.db.latest_statements();
            for (sql, params) in &latest[latest.len().saturating_sub(ran)..] {
                if sql.contains(" MATCH ") || sql.contains("tsquery") {
                    let plan = plan(&t, sql, params);
                    assert!(!plan.contains("CORRELATED") && !plan.contains("SubPlan"), "{search}: {sql}\n{plan}");
                }
            }
        }
    }
}

/// How the engine runs `sql` with `params`, as it explains it.
fn plan(t: &TestApp, sql: &str, params: &[coursed::store::Value]) -> String {
    use coursed::store::Value as V;
    match t.engine {
        Engine::Sqlite => {
            let conn = rusqlite::Connection::open(&t.database).unwrap();
            let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let values: Vec<rusqlite::types::Value> = params
                .iter()
                .map(|v| match v {
                    V::Text(s) => rusqlite::types::Value::Text(s.clone()),
                    V::Int(i) => rusqlite::types::Value::Integer(*i),
                    V::Bool(b) => rusqlite::types::Value::Integer(i64::from(*b)),
                    other => panic!("a parameter {other:?} in a search"),
                })
                .collect();
            let rows = st.query_map(rusqlite::params_from_iter(values), |r| r.get::<_, String>(3)).unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>().join("\n")
        }
        Engine::Postgres => {
            let (url, sql) = (t.database.clone(), coursed::store::dialect::numbered(sql));
            let params: Vec<Box<dyn postgres::types::ToSql + Sync + Send>> = params
                .iter()
                .map(|v| -> Box<dyn postgres::types::ToSql + Sync + Send> {
                    match v {
                        V::Text(s) => Box::new(s.clone()),
                        V::Int(i) => Box::new(*i),
                        V::Bool(b) => Box::new(*b),
                        other => panic!("a parameter {other:?} in a search"),
                    }
                })
                .collect();
            // The synchronous client must not run on an async thread.
            std::thread::spawn(move || {
                let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
                let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                    params.iter().map(|p| p.as_ref() as &(dyn postgres::types::ToSql + Sync)).collect();
                let rows = client.query(&format!("EXPLAIN {sql}"), &refs).unwrap();
                rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n")
            })
            .join()
            .unwrap()
        }
    }
}
