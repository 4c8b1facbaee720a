//! No request can hold the server: what a client sends that would make work or answers grow
//! faster than the request itself is bounded (parameters, error documents, includes, text).

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
