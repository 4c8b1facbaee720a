//! Entity tags and conditional requests: a strong `ETag` on every document, 304 on a current
//! `If-None-Match`, `If-Match` on writes (412 when stale, 428 when required and missing), and
//! tags remembered on SQLite.

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{many, on_both, one, TestApp, JSONAPI};
use crate::web::header;

/// `ETag` of a GET, asserting 200.
pub async fn tag_of(t: &TestApp, path: &str) -> String {
    let (status, h, _) = t.exchange(t.req("GET", path)).await;
    assert_eq!(status, 200, "{path}");
    let tag = header(&h, "etag").unwrap_or_else(|| panic!("no ETag on {path}")).to_owned();
    assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() > 10, "{tag}");
    tag
}

pub async fn get_if_none_match(t: &TestApp, path: &str, tag: &str) -> (u16, warp::http::HeaderMap, bytes::Bytes) {
    let (status, h, body) = t.exchange(t.req("GET", path).header("if-none-match", tag)).await;
    (status.as_u16(), h, body)
}

on_both!(every_document_has_an_etag_and_a_current_one_revalidates_with_304);
async fn every_document_has_an_etag_and_a_current_one_revalidates_with_304() {
    let (t, other) = TestApp::pair().await;
    let m = t.module("M").await;
    let s = t.subject("S", Some(&m)).await;
    let c = t.chapter("C", &s, 1).await;
    let paths = [
        format!("/v1/subjects/{s}"),
        format!("/v1/subjects/{s}?fields[subjects]=title"),
        format!("/v1/subjects/{s}?include=module"),
        "/v1/subjects".to_owned(),
        "/v1/chapters?sort=-title".to_owned(),
        format!("/v1/modules/{m}/subjects"),
        format!("/v1/subjects/{s}/module"),
        format!("/v1/chapters/{c}/subject"),
        format!("/v1/subjects/{s}/relationships/chapters"),
    ];
    let mut tags = Vec::new();
    for path in &paths {
        let tag = tag_of(&t, path).await;
        // Replicas agree on tags.
        assert_eq!(tag_of(&other, path).await, tag, "{path}");
        let (status, h, body) = get_if_none_match(&t, path, &tag).await;
        assert_eq!(status, 304, "{path}");
        assert!(body.is_empty());
        assert_eq!(header(&h, "etag"), Some(tag.as_str()));
        let (status, _, _) = get_if_none_match(&t, path, &format!("\"other\", W/{tag}")).await;
        assert_eq!(status, 304, "weak comparison, lists: {path}");
        assert_eq!(get_if_none_match(&t, path, "\"other\"").await.0, 200);
        tags.push(tag);
    }
    let distinct: std::collections::HashSet<_> = tags.iter().collect();
    assert_eq!(distinct.len(), tags.len(), "different documents have different tags");

    // A change of the subject's title changes its documents' tags; the module's stays.
    let module_tag = tag_of(&t, &format!("/v1/modules/{m}")).await;
    let patch = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "S2"}}});
    t.write("PATCH", &format!("/v1/subjects/{s}"), patch).await.assert_status(200);
    assert_eq!(get_if_none_match(&t, &paths[0], &tags[0]).await.0, 200);
    assert_eq!(get_if_none_match(&t, &paths[3], &tags[3]).await.0, 200);
    assert_eq!(tag_of(&t, &format!("/v1/modules/{m}")).await, module_tag);
    // Linkage shown in the subject's document (its module) moves its tag too, and so does the
    // module's, whose set of subjects changed (see `stale_linkage.rs`).
    let now = tag_of(&t, &paths[0]).await;
    t.write("PATCH", &format!("/v1/subjects/{s}/relationships/module"), json!({"data": null})).await.assert_status(200);
    assert_ne!(tag_of(&t, &paths[0]).await, now);
    assert_ne!(tag_of(&t, &format!("/v1/modules/{m}")).await, module_tag);
    // A new chapter changes the subject's chapter linkage.
    t.chapter("D", &s, 2).await;
    assert_eq!(get_if_none_match(&t, &paths[8], &tags[8]).await.0, 200);
}

async fn patch_title(t: &TestApp, s: &str, title: &str, if_match: Option<&str>) -> (u16, Option<String>) {
    let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": title}}}).to_string();
    let mut req = t.req("PATCH", &format!("/v1/subjects/{s}")).header("content-type", JSONAPI).body(body);
    if let Some(tag) = if_match {
        req = req.header("if-match", tag);
    }
    let (status, h, body) = t.exchange(req).await;
    if status == 412 {
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(doc["errors"][0]["status"], "412");
        assert!(doc["errors"][0]["detail"].as_str().unwrap().contains("If-Match"));
    }
    (status.as_u16(), header(&h, "etag").map(str::to_owned))
}

async fn title(t: &TestApp, s: &str) -> String {
    t.get(&format!("/v1/subjects/{s}")).await.body["data"]["attributes"]["title"].as_str().unwrap().to_owned()
}

on_both!(if_match_lets_a_current_tag_write_and_refuses_a_stale_one);
async fn if_match_lets_a_current_tag_write_and_refuses_a_stale_one() {
    let t = TestApp::new().await;
    let s = t.subject("First", None).await;
    let read = tag_of(&t, &format!("/v1/subjects/{s}")).await;
    let (status, new_tag) = patch_title(&t, &s, "Second", Some(&read)).await;
    assert_eq!(status, 200);
    // The write's tag is the one a GET shows next.
    let new_tag = new_tag.expect("PATCH answers with the new ETag");
    assert_eq!(tag_of(&t, &format!("/v1/subjects/{s}")).await, new_tag);
    assert_eq!(patch_title(&t, &s, "Stale", Some(&read)).await.0, 412);
    assert_eq!(title(&t, &s).await, "Second");
    assert_eq!(patch_title(&t, &s, "Any", Some("*")).await.0, 200);
    assert_eq!(patch_title(&t, &s, "Weak", Some(&format!("W/{new_tag}"))).await.0, 412);

    // DELETE: stale refused, current deletes; on what does not exist, 404 as without If-Match.
    let tag = tag_of(&t, &format!("/v1/subjects/{s}")).await;
    let del = |tag: &str| t.req("DELETE", &format!("/v1/subjects/{s}")).header("if-match", tag.to_owned());
    assert_eq!(t.exchange(del(&read)).await.0, 412);
    assert_eq!(t.exchange(del(&tag)).await.0, 204);
    assert_eq!(t.exchange(del("*")).await.0, 404);
    assert_eq!(t.exchange(del(&tag)).await.0, 404);
    assert_eq!(patch_title(&t, &s, "Gone", None).await.0, 404);

    // POST answers with the tag of the new resource.
    let body = json!({"data": {"type": "modules", "attributes": {"title": "M"}}}).to_string();
    let (status, h, doc) = t.exchange(t.req("POST", "/v1/modules").header("content-type", JSONAPI).body(body)).await;
    assert_eq!(status, 201);
    let id = serde_json::from_slice::<Value>(&doc).unwrap()["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(header(&h, "etag").map(str::to_owned), Some(tag_of(&t, &format!("/v1/modules/{id}")).await));
}

on_both!(if_match_guards_relationship_writes);
async fn if_match_guards_relationship_writes() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let (a, b) = (t.subject("A", None).await, t.subject("B", None).await);
    let path = format!("/v1/modules/{m}/relationships/subjects");
    let read = tag_of(&t, &path).await;
    let write = |method: &str, linkage: Value, tag: &str| {
        t.req(method, &path)
            .header("content-type", JSONAPI)
            .header("if-match", tag.to_owned())
            .body(linkage.to_string())
    };
    let (status, h, _) = t.exchange(write("POST", many("subjects", &[&a]), &read)).await;
    assert_eq!(status, 204);
    let after_add = header(&h, "etag").unwrap().to_owned();
    assert_eq!(tag_of(&t, &path).await, after_add);
    // The tag read before the add is stale now: nothing of this replace happens.
    assert_eq!(t.exchange(write("PATCH", many("subjects", &[&b]), &read)).await.0, 412);
    assert_eq!(t.get(&path).await.ids(), vec![a.clone()]);
    let (status, h, _) = t.exchange(write("PATCH", many("subjects", &[&b]), &after_add)).await;
    assert_eq!(status, 200);
    assert_eq!(header(&h, "etag").map(str::to_owned), Some(tag_of(&t, &path).await));
    // To-one: the linkage document's tag.
    let to_one = format!("/v1/subjects/{a}/relationships/module");
    let stale = tag_of(&t, &to_one).await;
    t.write("PATCH", &to_one, one("modules", &m)).await.assert_status(200);
    let req = t.req("PATCH", &to_one).header("content-type", JSONAPI).header("if-match", stale);
    assert_eq!(t.exchange(req.body(json!({"data": null}).to_string())).await.0, 412);
    assert_eq!(t.get(&to_one).await.body["data"]["id"], m.as_str());
}

on_both!(two_editors_racing_with_one_tag_get_one_success_and_one_412);
async fn two_editors_racing_with_one_tag_get_one_success_and_one_412() {
    let (a, b) = TestApp::pair().await;
    let s = a.subject("Start", None).await;
    for round in 0..8 {
        let tag = tag_of(&a, &format!("/v1/subjects/{s}")).await;
        let edits = [(&a, "by a"), (&b, "by b"), (&a, "by a again"), (&b, "by b again")].map(|(t, title)| {
            let (tag, s) = (tag.clone(), s.clone());
            async move { (title, patch_title(t, &s, &format!("{title} {round}"), Some(&tag)).await.0) }
        });
        let results = join_all(edits).await;
        let won: Vec<_> = results.iter().filter(|(_, status)| *status == 200).collect();
        assert_eq!(won.len(), 1, "round {round}: {results:?}");
        assert!(results.iter().all(|(_, status)| *status == 200 || *status == 412), "{results:?}");
        assert_eq!(title(&b, &s).await, format!("{} {round}", won[0].0));
    }
}

on_both!(require_if_match_refuses_blind_writes_with_428);
async fn require_if_match_refuses_blind_writes_with_428() {
    let t = TestApp::new().await.configured(|app| app.require_if_match = true);
    let s = t.subject("S", None).await;
    let r = t.write("PATCH", &format!("/v1/subjects/{s}"), json!({"data": {"type": "subjects", "id": s}})).await;
    r.assert_problem(428);
    t.delete(&format!("/v1/subjects/{s}")).await.assert_problem(428);
    t.write("PATCH", &format!("/v1/subjects/{s}/relationships/module"), json!({"data": null}))
        .await
        .assert_problem(428);
    let tag = tag_of(&t, &format!("/v1/subjects/{s}")).await;
    assert_eq!(patch_title(&t, &s, "T", Some(&tag)).await.0, 200);
}

/// On SQLite a revalidation is answered from the tag remembered with the state it was computed
/// in, without reading the row; any commit moves that state, whoever makes it: the API, or
/// another program writing the file (the `sqlite3` shell, say).
#[tokio::test]
async fn remembered_tags_follow_every_commit_even_of_other_programs() {
    let t = TestApp::new().await;
    let s = t.subject("S", None).await;
    let path = format!("/v1/subjects/{s}");
    let tag = tag_of(&t, &path).await;
    let mut runs = Vec::new();
    for _ in 0..2 {
        let before = t.statements();
        assert_eq!(get_if_none_match(&t, &path, &tag).await.0, 304);
        runs.push(t.statements() - before);
    }
    assert!(runs[1] < runs[0], "the second revalidation read the row again: {runs:?} statements");

    let other = rusqlite::Connection::open(&t.database).unwrap();
    other.execute("UPDATE subjects SET title = 'Changed', title_words = 'changed' WHERE id = ?1", [&s]).unwrap();
    drop(other);
    let (status, _, body) = get_if_none_match(&t, &path, &tag).await;
    assert_eq!(status, 200, "a write by another program must not be answered 304");
    assert!(String::from_utf8_lossy(&body).contains("Changed"));

    let changed = tag_of(&t, &path).await;
    assert_ne!(changed, tag);
    assert_eq!(get_if_none_match(&t, &path, &changed).await.0, 304);
    let patch = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "Again"}}});
    t.write("PATCH", &path, patch).await.assert_status(200);
    assert_eq!(get_if_none_match(&t, &path, &changed).await.0, 200);
}

on_both!(a_304_carries_the_tag_and_vary_its_200_would_have);
async fn a_304_carries_the_tag_and_vary_its_200_would_have() {
    let t = TestApp::new().await;
    let intro = "Fractions and decimals, one after the other. ".repeat(60);
    let s = t.create("subjects", json!({"title": "S", "introduction": intro}), json!({})).await;
    let m = t.module("M").await;
    // A large resource, a collection (tagged by its bytes), and a small resource.
    for (path, large) in
        [(format!("/v1/subjects/{s}"), true), ("/v1/subjects".to_owned(), true), (format!("/v1/modules/{m}"), false)]
    {
        let get = |accept: Option<&str>, inm: Option<&str>| {
            let mut req = t.req("GET", &path);
            if let Some(a) = accept {
                req = req.header("accept-encoding", a);
            }
            if let Some(tag) = inm {
                req = req.header("if-none-match", tag);
            }
            t.exchange(req)
        };
        let (_, plain_h, _) = get(None, None).await;
        let (_, gz_h, _) = get(Some("gzip"), None).await;
        let (plain, gz) = (header(&plain_h, "etag").unwrap().to_owned(), header(&gz_h, "etag").unwrap().to_owned());
        assert_eq!(plain != gz, large, "{path}: {plain} {gz}");
        // The cached copy's own request: the 304 names that copy and varies as its 200 did.
        for (accept, held, expect) in [(Some("gzip"), &gz, &gz), (None, &plain, &plain), (Some("gzip"), &plain, &plain)]
        {
            let (status, h, body) = get(accept, Some(held)).await;
            assert_eq!(status, 304, "{path}");
            assert!(body.is_empty());
            assert_eq!(header(&h, "etag"), Some(expect.as_str()), "{path}, {accept:?}, holding {held}");
            assert!(crate::web::vary(&h).contains("Accept-Encoding"), "{path}");
        }
        // A compressed copy is not what a client that now takes another coding, or none, would
        // get: it is sent the document again (a 304 could only name a copy it does not hold).
        for (accept, held) in [(Some("br"), gz.clone()), (None, format!("W/{gz}"))] {
            let (status, h, _) = get(accept, Some(&held)).await;
            if large {
                assert_eq!(status, 200, "{path}, {accept:?}, holding {held}");
                let expect = if accept.is_some() { gz.replace("-gz\"", "-br\"") } else { plain.clone() };
                assert_eq!(header(&h, "etag"), Some(expect.as_str()), "{path}");
            } else {
                assert_eq!((status.as_u16(), header(&h, "etag")), (304, Some(plain.as_str())), "{path}");
            }
        }
    }
    // With compression off, a 304 is what it was.
    let t = t.configured(|app| app.web = std::sync::Arc::new(coursed::app::Web::new(&[], false, true).unwrap()));
    let path = format!("/v1/subjects/{s}");
    let (_, h, _) = t.exchange(t.req("GET", &path).header("accept-encoding", "gzip")).await;
    let tag = header(&h, "etag").unwrap().to_owned();
    let (status, h, _) =
        t.exchange(t.req("GET", &path).header("accept-encoding", "gzip").header("if-none-match", &tag)).await;
    assert_eq!((status.as_u16(), header(&h, "etag")), (304, Some(tag.as_str())));
    assert!(!crate::web::vary(&h).contains("Accept-Encoding"));
}

on_both!(every_spelling_of_a_resources_url_gets_the_same_document_and_tag);
async fn every_spelling_of_a_resources_url_gets_the_same_document_and_tag() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let s = t.subject("S", Some(&m)).await;
    t.chapter("C", &s, 1).await;
    for (id, tail) in [(&s, ""), (&s, "/module"), (&s, "/chapters"), (&s, "/relationships/chapters"), (&m, "/subjects")]
    {
        let ty = if id == &m { "modules" } else { "subjects" };
        let query = if tail.is_empty() { "?fields[subjects]=title" } else { "" };
        let (_, h, canonical) = t.exchange(t.req("GET", &format!("/v1/{ty}/{id}{tail}{query}"))).await;
        for path in [format!("/v1/{ty}/{}{tail}", id.to_uppercase()), format!("/v1/{ty}/{id}{tail}/")] {
            let (status, other_h, body) = t.exchange(t.req("GET", &format!("{path}{query}"))).await;
            assert_eq!(status, 200, "{path}");
            assert_eq!(body, canonical, "{path}: a strong tag names one byte sequence");
            assert_eq!(header(&other_h, "etag"), header(&h, "etag"), "{path}");
        }
    }
}
