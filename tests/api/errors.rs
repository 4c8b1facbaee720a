//! Authentication, negotiation and every error row of the contract.

use serde_json::{json, Value};

use crate::helpers::{on_both, one, TestApp, JSONAPI, TOKEN};

on_both!(a_missing_or_wrong_token_is_401_before_routing);
async fn a_missing_or_wrong_token_is_401_before_routing() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    for path in [
        "/v1/modules".to_owned(),
        format!("/v1/modules/{m}"),
        "/v1/no-such-thing".to_owned(),
        format!("/v1/modules/{}", uuid::Uuid::now_v7()),
    ] {
        for auth in [None, Some("Bearer wrong"), Some(&format!("Basic {TOKEN}") as &str), Some("Bearer")] {
            let mut req = warp::test::request().method("GET").path(&path).header("host", "x");
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            let r = t.send(req).await;
            r.assert_problem(401);
            assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{path} {auth:?}");
        }
    }
    let r = t.send(t.req("POST", "/v1/modules").header("authorization", "Bearer nope").body("{")).await;
    r.assert_problem(401);
}

on_both!(unknown_paths_and_ids_are_404);
async fn unknown_paths_and_ids_are_404() {
    let t = TestApp::new().await;
    t.get("/v1/teachers").await.assert_problem(404);
    t.get("/v1/subjects/not-a-uuid").await.assert_problem(404);
    t.get(&format!("/v1/subjects/{}", uuid::Uuid::now_v7())).await.assert_problem(404);
    t.get("/v1/subjects/x/y/z/w").await.assert_problem(404);
    t.get("/elsewhere").await.assert_problem(404);
    let body = json!({"data": {"type": "subjects", "id": "nope", "attributes": {"title": "x"}}});
    t.write("PATCH", "/v1/subjects/nope", body).await.assert_problem(404);
}

on_both!(a_known_path_with_another_method_is_405_with_allow);
async fn a_known_path_with_another_method_is_405_with_allow() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    for (method, path, allow) in [
        ("PUT", "/v1/modules".to_owned(), "GET, POST"),
        ("DELETE", "/v1/subjects".to_owned(), "GET, POST"),
        ("POST", format!("/v1/modules/{m}"), "GET, PATCH, DELETE"),
        ("PATCH", format!("/v1/modules/{m}/subjects"), "GET"),
    ] {
        let r = t.send(t.req(method, &path)).await;
        r.assert_problem(405);
        assert_eq!(r.header("allow"), Some(allow), "{method} {path}");
    }
}

on_both!(accept_is_negotiated_as_json_api_requires);
async fn accept_is_negotiated_as_json_api_requires() {
    let t = TestApp::new().await;
    for accept in [
        JSONAPI,
        "*/*",
        "application/*",
        "application/json",
        "text/html, application/vnd.api+json",
        "application/vnd.api+json; ext=x, application/vnd.api+json",
    ] {
        let r = t.send(t.req("GET", "/v1/modules").header("accept", accept)).await;
        r.assert_status(200);
        assert_eq!(r.header("content-type"), Some(JSONAPI), "{accept}");
    }
    let r = t
        .send(
            warp::test::request()
                .path("/v1/modules")
                .header("host", "x")
                .header("authorization", format!("Bearer {TOKEN}")),
        )
        .await;
    r.assert_status(200);
    for accept in ["application/vnd.api+json; ext=\"x\"", "application/vnd.api+json;profile=y", "text/html"] {
        t.send(t.req("GET", "/v1/modules").header("accept", accept)).await.assert_problem(406);
    }
}

on_both!(bodies_need_exactly_the_json_api_content_type);
async fn bodies_need_exactly_the_json_api_content_type() {
    let t = TestApp::new().await;
    let body = json!({"data": {"type": "modules", "attributes": {"title": "M"}}}).to_string();
    for ct in [Some("application/json"), Some("application/vnd.api+json; charset=utf-8"), Some("text/plain"), None] {
        let mut req = t.req("POST", "/v1/modules").body(body.clone());
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        t.send(req).await.assert_problem(415);
    }
    assert_eq!(t.get("/v1/modules").await.body["meta"]["page"]["total"], 0, "nothing was written");
}

on_both!(a_body_over_the_limit_is_413);
async fn a_body_over_the_limit_is_413() {
    let t = TestApp::new().await;
    let big = "x".repeat(3 << 20);
    let body = json!({"data": {"type": "modules", "attributes": {"title": "M", "content": big}}});
    t.write("POST", "/v1/modules", body).await.assert_problem(413);
}

on_both!(documents_that_are_not_json_api_are_400);
async fn documents_that_are_not_json_api_are_400() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    for (raw, at) in [
        ("not json", ""),
        ("[1,2]", ""),
        ("{}", ""),
        (r#"{"data": 3}"#, "/data"),
        (r#"{"data": {"type": "modules", "attributes": []}}"#, "/data/attributes"),
        (r#"{"data": {"type": "modules", "attributes": {"title": "x"}, "relationships": 1}}"#, "/data/relationships"),
        (r#"{"data": {"attributes": {"title": "x"}}}"#, "/data"),
    ] {
        let r = t.send(t.req("POST", "/v1/modules").header("content-type", JSONAPI).body(raw)).await;
        r.assert_error(400, at);
    }
    let r = t
        .write("PATCH", &format!("/v1/modules/{m}"), json!({"data": {"type": "modules", "attributes": {"title": "y"}}}))
        .await;
    r.assert_error(400, "/data");
}

on_both!(a_client_id_on_create_is_403);
async fn a_client_id_on_create_is_403() {
    let t = TestApp::new().await;
    let body =
        json!({"data": {"type": "modules", "id": uuid::Uuid::now_v7().to_string(), "attributes": {"title": "M"}}});
    t.write("POST", "/v1/modules", body).await.assert_error(403, "/data/id");
}

on_both!(conflicts_are_409);
async fn conflicts_are_409() {
    let t = TestApp::new().await;
    let m = t.create("modules", json!({"title": "M", "external_id": "E1"}), Value::Null).await;
    t.write("POST", "/v1/modules", json!({"data": {"type": "subjects", "attributes": {"title": "S"}}}))
        .await
        .assert_error(409, "/data/type");
    let other = uuid::Uuid::now_v7().to_string();
    let body = json!({"data": {"type": "modules", "id": other, "attributes": {"title": "N"}}});
    t.write("PATCH", &format!("/v1/modules/{m}"), body).await.assert_error(409, "/data/id");
    let dup = json!({"data": {"type": "modules", "attributes": {"title": "N", "external_id": "E1"}}});
    t.write("POST", "/v1/modules", dup).await.assert_error(409, "/data/attributes/external_id");
    // Unique per type: a subject may reuse a module's external id.
    t.create("subjects", json!({"title": "S", "external_id": "E1"}), Value::Null).await;
    let n = t.create("modules", json!({"title": "N"}), Value::Null).await;
    let body = json!({"data": {"type": "modules", "id": n, "attributes": {"external_id": "E1"}}});
    t.write("PATCH", &format!("/v1/modules/{n}"), body).await.assert_error(409, "/data/attributes/external_id");
    assert_eq!(t.get("/v1/modules?filter[external_id]=E1").await.ids(), vec![m]);
}

on_both!(every_invalid_value_is_reported_at_once_as_422);
async fn every_invalid_value_is_reported_at_once_as_422() {
    let t = TestApp::new().await;
    let body = json!({"data": {"type": "subjects", "attributes": {
        "title": "   ", "introduction": "i".repeat(65_536), "external_id": 7, "available_for_courses": "yes", "colour": "red"},
        "relationships": {"teacher": {"data": null}, "module": {"data": {"type": "modules"}}}}});
    let r = t.write("POST", "/v1/subjects", body).await;
    r.assert_status(422);
    let mut pointers: Vec<&str> =
        r.body["errors"].as_array().unwrap().iter().map(|e| e["source"]["pointer"].as_str().unwrap()).collect();
    pointers.sort();
    assert_eq!(
        pointers,
        vec![
            "/data/attributes/available_for_courses",
            "/data/attributes/colour",
            "/data/attributes/external_id",
            "/data/attributes/introduction",
            "/data/attributes/title",
            "/data/relationships/module/data",
            "/data/relationships/teacher",
        ]
    );
    for e in r.body["errors"].as_array().unwrap() {
        assert_eq!(e["status"], "422");
    }
    let r = t.write("POST", "/v1/subjects", json!({"data": {"type": "subjects", "attributes": {}}})).await;
    r.assert_error(422, "/data/attributes");
    t.write("POST", "/v1/subjects", json!({"data": {"type": "subjects"}})).await.assert_error(422, "/data");
    let r = t
        .write(
            "POST",
            "/v1/chapters",
            json!({"data": {"type": "chapters", "attributes": {"title": "c", "position": -1}}}),
        )
        .await;
    assert_eq!(r.body["errors"].as_array().unwrap().len(), 2, "{}", r.body);
    let long = json!({"data": {"type": "modules", "attributes": {"title": "t".repeat(256)}}});
    t.write("POST", "/v1/modules", long).await.assert_error(422, "/data/attributes/title");
    let utf = json!({"data": {"type": "modules", "attributes": {"title": "é".repeat(255)}}});
    t.write("POST", "/v1/modules", utf).await.assert_status(201);
    assert_eq!(t.get("/v1/subjects").await.body["meta"]["page"]["total"], 0, "nothing was written");
}

on_both!(a_related_resource_that_does_not_exist_is_404_and_nothing_is_written);
async fn a_related_resource_that_does_not_exist_is_404_and_nothing_is_written() {
    let t = TestApp::new().await;
    let ghost = uuid::Uuid::now_v7().to_string();
    let body = json!({"data": {"type": "subjects", "attributes": {"title": "S"}, "relationships": {"module": one("modules", &ghost)}}});
    t.write("POST", "/v1/subjects", body).await.assert_error(404, "/data/relationships/module/data");
    let body = json!({"data": {"type": "chapters", "attributes": {"title": "C"}, "relationships": {"subject": one("subjects", &ghost)}}});
    t.write("POST", "/v1/chapters", body).await.assert_error(404, "/data/relationships/subject/data");
    assert_eq!(t.get("/v1/subjects").await.body["meta"]["page"]["total"], 0);
    assert_eq!(t.get("/v1/chapters").await.body["meta"]["page"]["total"], 0);
}

on_both!(a_failed_write_leaves_earlier_state_untouched);
async fn a_failed_write_leaves_earlier_state_untouched() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let s = t.subject("S", Some(&m)).await;
    let c = t.chapter("C", &s, 0).await;
    // The attribute change is valid, the relationship change is forbidden: neither is kept.
    let body = json!({"data": {"type": "subjects", "id": s, "attributes": {"title": "Changed"},
        "relationships": {"chapters": {"data": []}, "module": {"data": null}}}});
    t.write("PATCH", &format!("/v1/subjects/{s}"), body).await.assert_problem(403);
    let r = t.get(&format!("/v1/subjects/{s}")).await;
    assert_eq!(r.body["data"]["attributes"]["title"], "S");
    assert_eq!(r.body["data"]["relationships"]["module"]["data"]["id"], m.as_str());
    assert_eq!(t.get(&format!("/v1/subjects/{s}/relationships/chapters")).await.ids(), vec![c]);
}

on_both!(the_host_header_builds_links_and_a_bad_one_is_400);
async fn the_host_header_builds_links_and_a_bad_one_is_400() {
    let t = TestApp::new().await;
    let r = t.send(t.req("GET", "/v1/modules").header("host", "school.example:9000")).await;
    assert_eq!(r.body["links"]["self"], "http://school.example:9000/v1/modules");
    t.send(t.req("GET", "/v1/modules").header("host", "bad\"host")).await.assert_problem(400);
}

on_both!(a_write_blocked_by_another_process_is_503_with_retry_after_and_changes_nothing);
async fn a_write_blocked_by_another_process_is_503_with_retry_after_and_changes_nothing() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let blocker = t.block_writes();
    let body = json!({"data": {"type": "modules", "id": m, "attributes": {"title": "Blocked"}}});
    let r = t.write("PATCH", &format!("/v1/modules/{m}"), body.clone()).await;
    r.assert_problem(503);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert!(!r.error()["detail"].as_str().unwrap().contains("locked"), "causes stay in the log: {}", r.body);
    assert_eq!(
        t.get(&format!("/v1/modules/{m}")).await.body["data"]["attributes"]["title"],
        "M",
        "reads go on meanwhile"
    );
    blocker.release();
    t.write("PATCH", &format!("/v1/modules/{m}"), body).await.assert_status(200);
}

on_both!(hostile_requests_get_json_api_errors_and_the_server_keeps_serving);
async fn hostile_requests_get_json_api_errors_and_the_server_keeps_serving() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let long = "a".repeat(50_000);
    let paths = [
        format!("/v1/modules?{long}=1"),
        "/v1/modules?page%5Bsize%5D=%FF%FE".to_owned(),
        "/v1/modules?%ZZ=1&&&=".to_owned(),
        "/v1/modules?include=subjects.subjects.subjects".to_owned(),
        "/v1/modules?sort=-".to_owned(),
        "/v1/modules?fields%5B%5D=x".to_owned(),
        "/v1/modules?filter=1".to_owned(),
        format!("/v1/modules/{m}/relationships/subjects/extra"),
        "/v1/%E2%9C%93".to_owned(),
        "/v1/modules/%00".to_owned(),
    ];
    for p in &paths {
        let r = t.get(p).await;
        assert!(r.status.is_client_error(), "{p}: {}", r.status);
        assert!(r.body["errors"].is_array());
    }
    for raw in [
        r#"{"data": {"type": "modules", "attributes": {"title": "\ud800"}}}"#,
        r#"{"data": {"type": 1}}"#,
        "{\"data\":",
        "null",
        "\"data\"",
    ] {
        let r = t.send(t.req("POST", "/v1/modules").header("content-type", JSONAPI).body(raw)).await;
        assert!(r.status.is_client_error(), "{raw}: {}", r.body);
    }
    let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
    let r = t.send(t.req("POST", "/v1/modules").header("content-type", JSONAPI).body(deep)).await;
    r.assert_problem(400);
    t.get("/v1/modules").await.assert_status(200);
}
