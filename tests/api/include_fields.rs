//! `include` and sparse fieldsets, alone and together with paging and sorting.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::helpers::{on_both, Resp, TestApp};

/// Two modules; module `i` has subjects "M{i}S{j}", each with two chapters.
async fn catalogue(t: &TestApp, subjects_per_module: usize) -> (Vec<String>, Vec<String>) {
    let mut modules = Vec::new();
    let mut subjects = Vec::new();
    for i in 0..2 {
        let m = t.module(&format!("M{i}")).await;
        for j in 0..subjects_per_module {
            let s = t.subject(&format!("M{i}S{j:02}"), Some(&m)).await;
            t.chapter("one", &s, 1).await;
            t.chapter("zero", &s, 0).await;
            subjects.push(s);
        }
        modules.push(m);
    }
    (modules, subjects)
}

/// Checks the compound-document rules: each included resource once, none repeating primary
/// data, and each reachable from the primary data through relationship linkage.
fn assert_compound(r: &Resp) {
    check_compound(r, true);
}

/// As [`assert_compound`], for documents whose sparse fieldsets hide relationships: JSON:API
/// then waives full linkage.
fn assert_compound_sparse(r: &Resp) {
    check_compound(r, false);
}

fn check_compound(r: &Resp, full_linkage: bool) {
    let data: Vec<&Value> = match &r.body["data"] {
        Value::Array(a) => a.iter().collect(),
        v => vec![v],
    };
    let key = |v: &Value| (v["type"].as_str().unwrap().to_owned(), v["id"].as_str().unwrap().to_owned());
    let primary: HashSet<_> = data.iter().map(|v| key(v)).collect();
    let included = r.body["included"].as_array().cloned().unwrap_or_default();
    let mut seen = HashSet::new();
    for inc in &included {
        assert!(seen.insert(key(inc)), "included twice: {inc}");
        assert!(!primary.contains(&key(inc)), "included repeats primary data: {inc}");
    }
    let mut linked = HashSet::new();
    for res in data.iter().copied().chain(included.iter()) {
        for rel in res["relationships"].as_object().into_iter().flat_map(|o| o.values()) {
            match &rel["data"] {
                Value::Array(ids) => linked.extend(ids.iter().map(key)),
                v @ Value::Object(_) => {
                    linked.insert(key(v));
                }
                _ => {}
            }
        }
    }
    for inc in included.iter().filter(|_| full_linkage) {
        assert!(linked.contains(&key(inc)), "included resource not linked (full linkage): {inc}");
    }
}

fn included_of(r: &Resp, ty: &str) -> usize {
    r.body["included"].as_array().map_or(0, |a| a.iter().filter(|v| v["type"] == ty).count())
}

on_both!(a_page_of_subjects_includes_modules_and_chapters_with_full_linkage);
async fn a_page_of_subjects_includes_modules_and_chapters_with_full_linkage() {
    let t = TestApp::new().await;
    catalogue(&t, 3).await;
    let r = t.get("/v1/subjects?include=module,chapters").await;
    r.assert_status(200);
    assert_compound(&r);
    assert_eq!(included_of(&r, "modules"), 2, "each module once");
    assert_eq!(included_of(&r, "chapters"), 12);
    let first = &r.body["data"][0]["relationships"];
    assert_eq!(first["chapters"]["data"].as_array().unwrap().len(), 2, "included to-many carries data");
    assert!(first["module"]["data"].is_object());
    let ch = r.body["included"].as_array().unwrap().iter().find(|v| v["type"] == "chapters").unwrap();
    assert_eq!(ch["attributes"]["title"], "zero", "a subject's chapters come by position");
}

on_both!(include_runs_one_query_per_relationship_level_whatever_the_page_size);
async fn include_runs_one_query_per_relationship_level_whatever_the_page_size() {
    let t = TestApp::new().await;
    catalogue(&t, 10).await;
    let count = |path: &'static str| {
        let t = &t;
        async move {
            let before = t.statements();
            let r = t.get(path).await;
            r.assert_status(200);
            (t.statements() - before, r.data().len())
        }
    };
    let (one_subject, n1) = count("/v1/subjects?page[size]=1&include=module,chapters").await;
    let (twenty, n20) = count("/v1/subjects?page[size]=20&include=module,chapters").await;
    assert_eq!((n1, n20), (1, 20));
    assert_eq!(one_subject, twenty, "the statement count must not grow with the page");
    // begin, count, page, the chapters' count (the include's bound), modules, chapters, commit
    assert!(twenty <= 7, "{twenty} statements for a page of 20 with include=module,chapters");
    let (deep, _) = count("/v1/modules?include=subjects.chapters").await;
    let (shallow, _) = count("/v1/modules?include=subjects").await;
    assert_eq!(deep, shallow + 2, "a second level is one more query, and one more count of its bound");
}

on_both!(includes_reach_two_levels_on_every_kind_of_endpoint);
async fn includes_reach_two_levels_on_every_kind_of_endpoint() {
    let t = TestApp::new().await;
    let (modules, subjects) = catalogue(&t, 2).await;
    let r = t.get(&format!("/v1/modules/{}?include=subjects.chapters", modules[0])).await;
    assert_compound(&r);
    assert_eq!(included_of(&r, "subjects"), 2);
    assert_eq!(included_of(&r, "chapters"), 4);
    let subj = r.body["included"].as_array().unwrap().iter().find(|v| v["type"] == "subjects").unwrap();
    assert_eq!(subj["relationships"]["chapters"]["data"].as_array().unwrap().len(), 2);

    let r = t.get(&format!("/v1/subjects/{}?include=module.subjects", subjects[0])).await;
    assert_compound(&r);
    assert_eq!(included_of(&r, "modules"), 1);
    assert_eq!(included_of(&r, "subjects"), 1, "the primary subject is not repeated");

    let r = t.get(&format!("/v1/subjects/{}/module?include=subjects", subjects[0])).await;
    assert_compound(&r);
    assert_eq!(included_of(&r, "subjects"), 2);

    let r = t.get(&format!("/v1/modules/{}/subjects?include=chapters.subject", modules[1])).await;
    assert_compound(&r);
    assert_eq!(included_of(&r, "subjects"), 0);
    assert_eq!(included_of(&r, "chapters"), 4);

    let r = t.get("/v1/chapters?include=subject.module&page[size]=3").await;
    assert_compound(&r);

    let body = json!({"data": {"type": "subjects", "attributes": {"title": "New"},
        "relationships": {"module": {"data": {"type": "modules", "id": modules[0]}}}}});
    let r = t.write("POST", "/v1/subjects?include=module", body).await;
    r.assert_status(201);
    assert_eq!(included_of(&r, "modules"), 1);
    let body = json!({"data": {"type": "modules", "id": modules[0], "attributes": {"title": "M0'"}}});
    let r = t.write("PATCH", &format!("/v1/modules/{}?include=subjects", modules[0]), body).await;
    assert_eq!(included_of(&r, "subjects"), 3);
}

on_both!(bad_include_paths_are_400);
async fn bad_include_paths_are_400() {
    let t = TestApp::new().await;
    for path in ["teacher", "module.teacher", "subjects.chapters.subject", "module,"] {
        let r = t.get(&format!("/v1/subjects?include={path}")).await;
        if path == "module," {
            r.assert_status(200);
        } else {
            r.assert_error(400, "include");
        }
    }
}

on_both!(sparse_fieldsets_apply_to_primary_and_included_resources);
async fn sparse_fieldsets_apply_to_primary_and_included_resources() {
    let t = TestApp::new().await;
    let (_, subjects) = catalogue(&t, 1).await;
    let r = t
        .get(&format!(
            "/v1/subjects/{}?fields[subjects]=title,chapters&fields[chapters]=position&include=module,chapters",
            subjects[0]
        ))
        .await;
    r.assert_status(200);
    let data = &r.body["data"];
    assert_eq!(data["attributes"], json!({"title": "M0S00"}));
    assert_eq!(data["relationships"].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["chapters"]);
    assert_compound_sparse(&r);
    assert_eq!(included_of(&r, "modules"), 1, "include works even when the fieldset leaves the relationship out");
    for inc in r.body["included"].as_array().unwrap() {
        if inc["type"] == "chapters" {
            assert_eq!(inc["attributes"].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["position"]);
            assert!(inc.get("relationships").is_none());
        } else {
            assert!(inc["attributes"]["content"].is_string());
        }
    }
    let r = t.get("/v1/modules?fields[modules]=").await;
    assert!(r.data().iter().all(|m| m.get("attributes").is_none() && m.get("relationships").is_none()));
    t.get("/v1/subjects?fields[subjects]=colour").await.assert_error(400, "fields[subjects]");
    t.get("/v1/subjects?fields[teachers]=name").await.assert_error(400, "fields[teachers]");
}

on_both!(include_fields_paging_and_sort_work_together);
async fn include_fields_paging_and_sort_work_together() {
    let t = TestApp::new().await;
    let (modules, _) = catalogue(&t, 6).await;
    let r = t.get("/v1/subjects?include=module,chapters&fields[subjects]=title,module&fields[modules]=title&sort=-title&page[size]=4&page[number]=2").await;
    r.assert_status(200);
    assert_compound_sparse(&r);
    let titles: Vec<&str> = r.data().iter().map(|s| s["attributes"]["title"].as_str().unwrap()).collect();
    assert_eq!(titles, vec!["M1S01", "M1S00", "M0S05", "M0S04"]);
    assert_eq!(r.body["meta"]["page"]["total"], 12);
    assert_eq!(included_of(&r, "modules"), 2);
    assert_eq!(included_of(&r, "chapters"), 8, "chapters are included though the fieldset hides the relationship");
    for m in r.body["included"].as_array().unwrap().iter().filter(|v| v["type"] == "modules") {
        assert_eq!(m["attributes"].as_object().unwrap().len(), 1);
    }
    assert!(r.body["links"]["next"].as_str().unwrap().contains("include=module,chapters"));
    let r = t
        .get(&format!(
            "/v1/modules/{}/subjects?include=chapters&fields[chapters]=title&page[size]=2&sort=title",
            modules[1]
        ))
        .await;
    assert_compound(&r);
    assert_eq!(r.data().len(), 2);
    assert_eq!(included_of(&r, "chapters"), 4);
}
