//! No request can hold the server: what a client sends that would make work or answers grow
//! faster than the request itself is bounded (parameters, error documents, includes, text).

use serde_json::{json, Value};

use crate::helpers::{on_both, TestApp};

on_both!(thousands_of_bad_parameters_get_an_error_document_of_bounded_size);
async fn thousands_of_bad_parameters_get_an_error_document_of_bounded_size() {
    let t = TestApp::new().await;
    // About 55 KB each (a request target is at most 64 KiB).
    let unknown: Vec<String> = (0..7000).map(|i| format!("a{i}=1")).collect();
    let (status, body) = t.raw(&format!("/v1/subjects?{}", unknown.join("&"))).await;
    assert_eq!(status, 400);
    assert!(body.len() < 64 * 1024, "{} bytes", body.len());
    let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
    crate::helpers::assert_valid_jsonapi(&doc);
    assert_eq!(doc["errors"].as_array().unwrap().len(), coursed::error::MAX_PROBLEMS);
    assert_eq!(
        doc["meta"]["errors"],
        serde_json::json!({"total": 7000, "omitted": 7000 - coursed::error::MAX_PROBLEMS})
    );
    // A parameter given again is one problem however often (JSON:API's errors are unique).
    let repeated = vec!["sort=id"; 7000].join("&");
    let r = t.get(&format!("/v1/subjects?{repeated}&page%5Bsize%5D=1&page%5Bsize%5D=1")).await;
    r.assert_error(400, "sort");
    let details: Vec<&str> =
        r.body["errors"].as_array().unwrap().iter().map(|e| e["detail"].as_str().unwrap()).collect();
    assert_eq!(details, ["`sort` is given 7000 times; give it once.", "`page[size]` is given 2 times; give it once."]);
    // A few problems are all listed, without meta.
    let (status, body) = t.raw("/v1/subjects?a=1&b=2").await;
    let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!((status, doc["errors"].as_array().unwrap().len(), doc.get("meta")), (400, 2, None));
}

fn shape(modules: u64, subjects: u64, chapters: u64) -> coursed::dataset::Shape {
    coursed::dataset::Shape { modules, subjects_per_module: subjects, chapters_per_subject: chapters, seed: 3 }
}

on_both!(what_one_document_includes_is_bounded_and_a_larger_one_is_a_400_that_says_how_to_ask_for_less);
async fn what_one_document_includes_is_bounded_and_a_larger_one_is_a_400_that_says_how_to_ask_for_less() {
    let t = TestApp::generated(shape(30, 40, 10)).await;
    // 1,200 subjects and 12,000 chapters: more than one document includes.
    let r = t.get("/v1/modules?page[size]=30&include=subjects.chapters").await;
    r.assert_problem(400);
    assert_eq!(r.error()["code"], "document_too_large");
    assert!(r.error()["detail"].as_str().unwrap().contains("page[size]"), "{}", r.body);
    // Fewer modules a page: the same include, beyond the small budget, is served whole.
    let r = t.get("/v1/modules?page[size]=5&include=subjects.chapters").await;
    r.assert_status(200);
    let included = r.body["included"].as_array().unwrap();
    assert_eq!(included.len(), 5 * 40 + 5 * 40 * 10);
    // And one module's document with everything under it.
    let m = r.ids()[0].clone();
    let r = t.get(&format!("/v1/modules/{m}?include=subjects.chapters")).await;
    assert_eq!(r.assert_status(200).body["included"].as_array().unwrap().len(), 40 + 400);
}

on_both!(a_page_of_long_texts_larger_than_a_document_may_be_is_a_400);
async fn a_page_of_long_texts_larger_than_a_document_may_be_is_a_400() {
    let t = TestApp::new().await;
    let content = "<p>x</p>".repeat((1 << 20) / 8 - 1);
    for i in 0..36 {
        t.create("modules", json!({"title": format!("M{i}"), "content": content}), Value::Null).await;
    }
    let r = t.get("/v1/modules?page[size]=36").await;
    r.assert_problem(400);
    assert_eq!(r.error()["code"], "document_too_large");
    // Half of it is served; so is all of it without the long attribute.
    let r = t.get("/v1/modules?page[size]=18").await;
    assert_eq!(r.assert_status(200).data().len(), 18);
    let r = t.get("/v1/modules?page[size]=36&fields[modules]=title").await;
    assert_eq!(r.assert_status(200).data().len(), 36);
}

on_both!(large_documents_wait_for_a_permit_and_then_are_503_while_small_ones_are_served);
async fn large_documents_wait_for_a_permit_and_then_are_503_while_small_ones_are_served() {
    let t = TestApp::generated(shape(4, 30, 10)).await.configured(|app| {
        // Every permit taken elsewhere.
        app.large_documents = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        app.request_timeout = std::time::Duration::from_millis(300);
    });
    let r = t.get("/v1/modules?include=subjects.chapters").await;
    r.assert_problem(503);
    assert_eq!(r.header("retry-after"), Some("1"));
    t.get("/v1/modules?include=subjects").await.assert_status(200);
}

on_both!(a_read_that_runs_away_is_stopped_at_the_request_timeout_and_its_connection_goes_on);
async fn a_read_that_runs_away_is_stopped_at_the_request_timeout_and_its_connection_goes_on() {
    let limit = std::time::Duration::from_millis(300);
    let t = TestApp::with_options(move |o| o.request_timeout = limit).await;
    t.module("M").await;
    // More runaway reads than there are readers: each is stopped, or waits its turn no longer
    // than the limit; either way a 503 that says so, and nothing holds a connection for ever.
    let forever = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n";
    let runaways = (0..12).map(|_| {
        let db = t.app.db.clone();
        tokio::spawn(async move { db.scan(move |tx| Ok(tx.first(forever, &[])?)).await })
    });
    let outcomes = tokio::time::timeout(std::time::Duration::from_secs(60), futures_util::future::join_all(runaways))
        .await
        .expect("every runaway read ends");
    for outcome in outcomes {
        let e = outcome.unwrap().expect_err("a runaway read is stopped");
        assert_eq!(e.status.as_u16(), 503, "{e:?}");
        let reply = coursed::http::error_reply(&e);
        assert_eq!(reply.headers().get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
    }
    // The connections are as good as before.
    for _ in 0..12 {
        t.get("/v1/modules").await.assert_status(200);
    }
}

on_both!(pathological_text_is_stored_searched_and_excerpted_like_any_other);
async fn pathological_text_is_stored_searched_and_excerpted_like_any_other() {
    let t = TestApp::new().await;
    // Just under the body limit once wrapped in a document: runs that once cost quadratic time.
    let amps = "&".repeat(600_000) + " needle " + &"&#".repeat(100_000);
    let tags = "<a ".repeat(100_000) + "> needle";
    let m = t.create("modules", json!({"title": "Amps", "content": amps}), Value::Null).await;
    let n = t.create("modules", json!({"title": "Tags", "content": tags}), Value::Null).await;
    // A hundred thousand one-letter words, then the one searched for (within the words kept).
    let body =
        json!({"data": {"type": "modules", "id": n, "attributes": {"content": "a ".repeat(100_000) + "needle"}}});
    t.write("PATCH", &format!("/v1/modules/{n}"), body).await.assert_status(200);
    let ops = json!({"atomic:operations": [{"op": "add", "data": {"type": "modules",
        "attributes": {"title": "Marks", "content": format!("a{} needle", "\u{301}".repeat(200_000))}}}]});
    let req = t.req("POST", "/v1/operations").header("content-type", crate::helpers::ATOMIC).body(ops.to_string());
    assert_eq!(t.exchange(req).await.0, 200);
    let r = t.get("/v1/modules?filter[search]=needle&fields[modules]=title").await;
    r.assert_status(200);
    assert_eq!(r.data().len(), 3, "{}", r.body);
    let excerpt = |id: &str| {
        let found = r.data().iter().find(|d| d["id"] == id).unwrap_or_else(|| panic!("{id} not found"));
        found["meta"]["search"]["excerpt"].as_str().unwrap_or("").to_owned()
    };
    // Each match is beyond the first 64 KiB of its text: no excerpt, the resource found all the
    // same; a short text shows its match.
    assert_eq!(excerpt(&m), "");
    assert_eq!(r.data().iter().filter(|d| d["meta"]["search"]["excerpt"].is_string()).count(), 0, "{}", r.body);
    let short = t
        .create("modules", json!({"title": "Short", "content": "a\u{301}\u{301} &&& the needle <a <a"}), Value::Null)
        .await;
    let r = t.get("/v1/modules?filter[search]=needle&fields[modules]=title&page[size]=10").await;
    let found = r.data().iter().find(|d| d["id"] == short.as_str()).unwrap();
    assert_eq!(found["meta"]["search"]["excerpt"], "a\u{301}\u{301} &amp;&amp;&amp; the <mark>needle</mark>");
}
