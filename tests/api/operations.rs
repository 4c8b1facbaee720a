//! Atomic operations (`POST /v1/operations`, the JSON:API Atomic Operations extension): in
//! order, one transaction, `lid`s, the single endpoints' rules inside each operation, and
//! errors that point into the failing operation.

use serde_json::{json, Value};

use crate::helpers::{assert_valid_jsonapi, many, on_both, one, Resp, TestApp, ATOMIC, JSONAPI};

pub async fn atomic(t: &TestApp, ops: Value) -> Resp {
    atomic_as(t, ATOMIC, ops).await
}

async fn atomic_as(t: &TestApp, content_type: &str, ops: Value) -> Resp {
    let body = json!({ "atomic:operations": ops }).to_string();
    t.send(t.req("POST", "/v1/operations").header("content-type", content_type).body(body)).await
}

/// How many modules, subjects and chapters the database holds.
async fn counts(t: &TestApp) -> [i64; 3] {
    [
        t.sql_i64("SELECT COUNT(*) FROM modules", vec![]).await,
        t.sql_i64("SELECT COUNT(*) FROM subjects", vec![]).await,
        t.sql_i64("SELECT COUNT(*) FROM chapters", vec![]).await,
    ]
}

on_both!(a_course_is_created_in_one_request_with_local_ids);
async fn a_course_is_created_in_one_request_with_local_ids() {
    let t = TestApp::new().await;
    let ops = json!([
        {"op": "add", "data": {"type": "modules", "lid": "m", "attributes": {"title": "Optics", "external_id": "OPT"}}},
        {"op": "add", "data": {"type": "subjects", "lid": "s1", "attributes": {"title": "Lenses"},
            "relationships": {"module": {"data": {"type": "modules", "lid": "m"}}}}},
        {"op": "add", "data": {"type": "subjects", "lid": "s2", "attributes": {"title": "Mirrors"}}},
        {"op": "add", "data": {"type": "chapters", "attributes": {"title": "Focal length", "position": 1},
            "relationships": {"subject": {"data": {"type": "subjects", "lid": "s1"}}}}},
        {"op": "add", "ref": {"type": "modules", "lid": "m", "relationship": "subjects"},
            "data": [{"type": "subjects", "lid": "s2"}]},
        {"op": "update", "data": {"type": "subjects", "lid": "s2", "attributes": {"available_for_courses": true}}},
    ]);
    let r = atomic(&t, ops).await;
    r.assert_status(200);
    assert_eq!(r.header("content-type"), Some(ATOMIC));
    let results = r.body["atomic:results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    assert_eq!(results[4], json!({}), "a relationship operation returns no data");
    for (i, ty) in [(0, "modules"), (1, "subjects"), (2, "subjects"), (3, "chapters"), (5, "subjects")] {
        assert_eq!(results[i]["data"]["type"], ty, "{}", r.body);
        assert_valid_jsonapi(&json!({"jsonapi": {"version": "1.0"}, "data": results[i]["data"]}));
    }
    let (module, s1, s2) = (
        results[0]["data"]["id"].as_str().unwrap(),
        results[1]["data"]["id"].as_str().unwrap(),
        results[2]["data"]["id"].as_str().unwrap(),
    );
    assert_eq!(results[5]["data"]["id"], s2);
    assert_eq!(results[5]["data"]["attributes"]["available_for_courses"], true);
    assert_eq!(results[3]["data"]["relationships"]["subject"]["data"]["id"], s1);

    // What the results say is what is stored.
    let subjects = t.get(&format!("/v1/modules/{module}/subjects?sort=title")).await;
    assert_eq!(subjects.ids(), vec![s1.to_owned(), s2.to_owned()]);
    let stored = t.get(&format!("/v1/subjects/{s2}")).await;
    assert_eq!(stored.body["data"], results[5]["data"]);
    assert_eq!(t.get(&format!("/v1/subjects/{s1}/chapters")).await.data().len(), 1);
}

on_both!(a_failing_operation_stores_nothing_and_says_which_it_was);
async fn a_failing_operation_stores_nothing_and_says_which_it_was() {
    let t = TestApp::new().await;
    let existing = t.create("modules", json!({"title": "Taken", "external_id": "X1"}), json!({})).await;
    let subject = t.subject("Kept", Some(&existing)).await;
    let chapter = t.chapter("Kept", &subject, 0).await;
    let before = counts(&t).await;
    let add = |title: &str, ext: &str| json!({"op": "add", "data": {"type": "modules", "attributes": {"title": title, "external_id": ext}}});
    let cases: Vec<(Value, u16, &str)> = vec![
        // 409: a duplicate external_id, at the attribute of the third operation.
        (
            json!([add("A", "A1"), add("B", "B1"), add("C", "X1")]),
            409,
            "/atomic:operations/2/data/attributes/external_id",
        ),
        // 422: an invalid value.
        (
            json!([add("A", "A1"), {"op": "add", "data": {"type": "modules", "attributes": {"title": 5}}}]),
            422,
            "/atomic:operations/1/data/attributes/title",
        ),
        // 404: an unknown id, and an unknown lid.
        (
            json!([add("A", "A1"), {"op": "remove", "ref": {"type": "subjects", "id": uuid::Uuid::now_v7().to_string()}}]),
            404,
            "/atomic:operations/1",
        ),
        (
            json!([add("A", "A1"), {"op": "update", "ref": {"type": "chapters", "id": chapter, "relationship": "subject"},
            "data": {"type": "subjects", "lid": "nope"}}]),
            404,
            "/atomic:operations/1/data/lid",
        ),
        // 403: a chapter left without a subject.
        (
            json!([add("A", "A1"), {"op": "update", "ref": {"type": "chapters", "id": chapter, "relationship": "subject"}, "data": null}]),
            403,
            "/atomic:operations/1/data",
        ),
        // 409: a type that is not the one `ref` names.
        (
            json!([{"op": "update", "ref": {"type": "modules", "id": existing}, "data": {"type": "subjects", "id": subject}}]),
            409,
            "/atomic:operations/0/data/type",
        ),
        // 400: structure.
        (json!([add("A", "A1"), {"op": "upsert"}]), 400, "/atomic:operations/1/op"),
        (
            json!([add("A", "A1"), {"op": "add", "data": {"type": "modules", "attributes": {"title": "B"}}, "extra": 1}]),
            400,
            "/atomic:operations/1/extra",
        ),
        (
            json!([{"op": "remove", "ref": {"type": "modules", "id": existing}, "href": format!("/modules/{existing}")}]),
            400,
            "/atomic:operations/0",
        ),
        (
            json!([{"op": "add", "ref": {"type": "subjects", "id": subject, "relationship": "module"},
            "data": {"type": "modules", "id": existing}}]),
            400,
            "/atomic:operations/0/op",
        ),
        (
            json!([add("A", "A1"), add("B", "B1")].into_iter().chain([json!("not an operation")]).collect::<Vec<_>>()),
            400,
            "/atomic:operations/2",
        ),
        (json!([]), 400, "/atomic:operations"),
        // 412: a stale precondition, at the operation's `meta.ifMatch`.
        (
            json!([add("A", "A1"), {"op": "update", "data": {"type": "modules", "id": existing, "attributes": {"title": "New"}},
            "meta": {"ifMatch": "\"stale\""}}]),
            412,
            "/atomic:operations/1/meta/ifMatch",
        ),
    ];
    for (ops, status, pointer) in cases {
        let r = atomic(&t, ops.clone()).await;
        r.assert_error(status, pointer);
        assert_eq!(counts(&t).await, before, "{ops} changed the database");
    }
    // The existing resources are as they were.
    assert_eq!(t.get(&format!("/v1/modules/{existing}")).await.body["data"]["attributes"]["title"], "Taken");
    assert_eq!(t.get(&format!("/v1/chapters/{chapter}/relationships/subject")).await.body["data"]["id"], subject);
}

on_both!(updates_removes_and_linkage_writes_run_in_order);
async fn updates_removes_and_linkage_writes_run_in_order() {
    let t = TestApp::new().await;
    let (m1, m2) = (t.module("One").await, t.module("Two").await);
    let (s1, s2) = (t.subject("S1", Some(&m1)).await, t.subject("S2", None).await);
    let chapter = t.chapter("C", &s1, 0).await;
    let tag = t.get(&format!("/v1/subjects/{s2}")).await.header("etag").unwrap().to_owned();
    let ops = json!([
        {"op": "update", "ref": {"type": "modules", "id": m2, "relationship": "subjects"}, "data": many("subjects", &[&s1, &s2])["data"]},
        {"op": "remove", "ref": {"type": "modules", "id": m2, "relationship": "subjects"}, "data": many("subjects", &[&s1])["data"]},
        {"op": "update", "href": format!("/v1/chapters/{chapter}/relationships/subject"), "data": one("subjects", &s2)["data"]},
        {"op": "remove", "href": format!("http://localhost:8080/v1/subjects/{s1}")},
        {"op": "remove", "ref": {"type": "modules", "id": m1}, "meta": {"ifMatch": "*"}},
        {"op": "update", "ref": {"type": "subjects", "id": s2, "relationship": "module"}, "data": null},
        {"op": "update", "ref": {"type": "subjects", "id": s2, "relationship": "module"}, "data": one("modules", &m2)["data"]},
    ]);
    let r = atomic(&t, ops).await;
    r.assert_status(204);
    assert!(r.body.is_null());
    assert_eq!(
        t.get(&format!("/v1/modules/{m2}/relationships/subjects")).await.body["data"],
        many("subjects", &[&s2])["data"]
    );
    assert_eq!(
        t.get(&format!("/v1/chapters/{chapter}/relationships/subject")).await.body["data"],
        one("subjects", &s2)["data"]
    );
    t.get(&format!("/v1/subjects/{s1}")).await.assert_status(404);
    t.get(&format!("/v1/modules/{m1}")).await.assert_status(404);
    // The subject's module changed, so the tag read before is stale now.
    let stale = json!([{"op": "update", "data": {"type": "subjects", "id": s2, "attributes": {"title": "2"}}, "meta": {"ifMatch": tag}}]);
    atomic(&t, stale).await.assert_error(412, "/atomic:operations/0/meta/ifMatch");
    let current = t.get(&format!("/v1/subjects/{s2}")).await.header("etag").unwrap().to_owned();
    let fresh = json!([{"op": "update", "data": {"type": "subjects", "id": s2, "attributes": {"title": "2"}}, "meta": {"ifMatch": current}}]);
    assert_eq!(
        atomic(&t, fresh).await.assert_status(200).body["atomic:results"][0]["data"]["attributes"]["title"],
        "2"
    );
}

on_both!(media_types_limits_and_methods);
async fn media_types_limits_and_methods() {
    let t = TestApp::new().await;
    let add = json!([{"op": "add", "data": {"type": "modules", "attributes": {"title": "M"}}}]);
    for ct in [
        ATOMIC,
        "application/vnd.api+json;ext=\"https://jsonapi.org/ext/atomic\"",
        "application/vnd.api+json ;  ext=https://jsonapi.org/ext/atomic",
    ] {
        atomic_as(&t, ct, add.clone()).await.assert_status(200);
    }
    for ct in [
        JSONAPI,
        "application/json",
        "application/vnd.api+json; ext=\"https://jsonapi.org/ext/atomic https://example.com/ext\"",
        "application/vnd.api+json; ext=\"https://jsonapi.org/ext/atomic\"; profile=\"https://example.com/p\"",
        "application/vnd.api+json; charset=utf-8",
    ] {
        atomic_as(&t, ct, add.clone()).await.assert_problem(415);
    }
    let body = json!({ "atomic:operations": add }).to_string();
    let with_accept = |accept: &str| {
        t.req("POST", "/v1/operations").header("content-type", ATOMIC).header("accept", accept).body(body.clone())
    };
    t.send(with_accept(ATOMIC)).await.assert_status(200);
    t.send(with_accept("application/vnd.api+json; ext=\"https://example.com/ext\"")).await.assert_problem(406);
    t.send(with_accept("text/html")).await.assert_problem(406);

    let too_many: Vec<Value> = (0..1001)
        .map(|i| json!({"op": "add", "data": {"type": "modules", "attributes": {"title": format!("M{i}")}}}))
        .collect();
    atomic(&t, json!(too_many)).await.assert_error(413, "/atomic:operations");
    let most: Vec<Value> = (0..1000)
        .map(|i| json!({"op": "add", "data": {"type": "modules", "attributes": {"title": format!("M{i}")}}}))
        .collect();
    assert_eq!(atomic(&t, json!(most)).await.assert_status(200).body["atomic:results"].as_array().unwrap().len(), 1000);

    let r = t.send(t.req("GET", "/v1/operations")).await;
    r.assert_problem(405);
    assert_eq!(r.header("allow"), Some("POST"));
    t.send(t.req("POST", "/v1/operations?include=x").header("content-type", ATOMIC).body(body.clone()))
        .await
        .assert_error(400, "include");
    t.send(t.req("POST", "/v1/operations").header("content-type", ATOMIC).body("{")).await.assert_problem(400);
}

on_both!(require_if_match_applies_to_operations_on_what_exists);
async fn require_if_match_applies_to_operations_on_what_exists() {
    let t = TestApp::new().await.configured(|app| app.require_if_match = true);
    let m = t.module("M").await;
    let add = json!({"op": "add", "data": {"type": "modules", "attributes": {"title": "New"}}});
    atomic(&t, json!([add])).await.assert_status(200);
    let update = json!({"op": "update", "data": {"type": "modules", "id": m, "attributes": {"title": "2"}}});
    atomic(&t, json!([add, update])).await.assert_error(428, "/atomic:operations/1/meta");
    let mut with_tag = update.clone();
    with_tag["meta"] = json!({"ifMatch": "*"});
    atomic(&t, json!([with_tag])).await.assert_status(200);
}

on_both!(runs_of_adds_go_in_together_and_still_fail_precisely);
async fn runs_of_adds_go_in_together_and_still_fail_precisely() {
    let t = TestApp::new().await;
    let subject = t.subject("S", None).await;
    let chapter = |i: usize, subject: &str| {
        json!({"op": "add", "data": {"type": "chapters", "attributes": {"title": format!("C{i}"), "position": i},
            "relationships": {"subject": {"data": {"type": "subjects", "id": subject}}}}})
    };
    // 120 chapters in one request: a few statements, not one per chapter.
    let before = t.statements();
    let ops: Vec<Value> = (0..120).map(|i| chapter(i, &subject)).collect();
    let r = atomic(&t, json!(ops)).await;
    r.assert_status(200);
    let results = r.body["atomic:results"].as_array().unwrap();
    let positions: Vec<i64> = results.iter().map(|r| r["data"]["attributes"]["position"].as_i64().unwrap()).collect();
    assert_eq!(positions, (0..120).collect::<Vec<_>>(), "results in the order of the operations");
    assert!(t.statements() - before < 20, "{} statements for 120 adds", t.statements() - before);
    assert_eq!(
        t.get(&format!("/v1/subjects/{subject}/chapters?page[size]=100")).await.body["meta"]["page"]["total"],
        120
    );

    // One bad add in the middle of a run: its own error, and nothing of the request stored.
    let counted = counts(&t).await;
    let mut ops: Vec<Value> = (0..10).map(|i| chapter(i, &subject)).collect();
    ops[6] = chapter(6, &uuid::Uuid::now_v7().to_string());
    atomic(&t, json!(ops)).await.assert_error(404, "/atomic:operations/6/data/relationships/subject/data");
    let mut ops: Vec<Value> = (0..10).map(|i| chapter(i, &subject)).collect();
    ops[3]["data"]["relationships"]["subject"]["data"] = Value::Null;
    atomic(&t, json!(ops)).await.assert_error(403, "/atomic:operations/3/data/relationships/subject/data");
    let modules: Vec<Value> = (0..5)
        .map(|i| json!({"op": "add", "data": {"type": "modules", "lid": format!("m{}", i % 4), "attributes": {"title": "M"}}}))
        .collect();
    atomic(&t, json!(modules)).await.assert_error(409, "/atomic:operations/4/data/lid");
    assert_eq!(counts(&t).await, counted);
}
