//! Related resources, linkage, and relationship writes, in both directions of each key.

use serde_json::{json, Value};

use crate::helpers::{many, on_both, one, TestApp};

on_both!(a_subjects_module_is_readable_as_related_resource_and_as_linkage);
async fn a_subjects_module_is_readable_as_related_resource_and_as_linkage() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let s = t.subject("S", Some(&m)).await;
    let lonely = t.subject("Lonely", None).await;

    let r = t.get(&format!("/v1/subjects/{s}/module")).await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["type"], "modules");
    assert_eq!(r.id(), m);
    assert_eq!(r.body["links"]["self"], format!("http://localhost:8080/v1/subjects/{s}/module"));

    let r = t.get(&format!("/v1/subjects/{s}/relationships/module")).await;
    assert_eq!(r.body["data"], json!({"type": "modules", "id": m}));
    assert_eq!(r.body["links"]["self"], format!("http://localhost:8080/v1/subjects/{s}/relationships/module"));
    assert_eq!(r.body["links"]["related"], format!("http://localhost:8080/v1/subjects/{s}/module"));

    assert_eq!(t.get(&format!("/v1/subjects/{lonely}/module")).await.body["data"], Value::Null);
    assert_eq!(t.get(&format!("/v1/subjects/{lonely}/relationships/module")).await.body["data"], Value::Null);
    let missing = uuid::Uuid::now_v7();
    t.get(&format!("/v1/subjects/{missing}/module")).await.assert_problem(404);
    t.get(&format!("/v1/subjects/{missing}/relationships/module")).await.assert_problem(404);
    t.get(&format!("/v1/subjects/{s}/teacher")).await.assert_problem(404);
    t.get(&format!("/v1/subjects/{s}/relationships/teacher")).await.assert_problem(404);
}

on_both!(a_subjects_chapters_come_ordered_by_position_then_id);
async fn a_subjects_chapters_come_ordered_by_position_then_id() {
    let t = TestApp::new().await;
    let s = t.subject("S", None).await;
    let c2 = t.chapter("Second", &s, 2).await;
    let c0 = t.chapter("First", &s, 0).await;
    let c2b = t.chapter("Also second", &s, 2).await;
    let expected = vec![c0.clone(), c2.clone(), c2b.clone()];
    let r = t.get(&format!("/v1/subjects/{s}/chapters")).await;
    assert_eq!(r.ids(), expected);
    assert_eq!(r.body["meta"]["page"]["total"], 3);
    assert_eq!(t.get(&format!("/v1/subjects/{s}/relationships/chapters")).await.ids(), expected);
    assert_eq!(
        t.get(&format!("/v1/subjects/{s}/chapters?sort=-title")).await.ids(),
        vec![c2.clone(), c0.clone(), c2b.clone()]
    );
    let r = t.get(&format!("/v1/subjects/{s}?include=chapters")).await;
    let linkage: Vec<&str> = r.body["data"]["relationships"]["chapters"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(linkage, expected.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(t.get(&format!("/v1/chapters?filter[subject]={s}&sort=position")).await.ids(), expected);
}

on_both!(one_foreign_key_answers_both_directions);
async fn one_foreign_key_answers_both_directions() {
    let t = TestApp::new().await;
    let m1 = t.module("M1").await;
    let m2 = t.module("M2").await;
    let s = t.subject("S", Some(&m1)).await;
    assert_eq!(t.get(&format!("/v1/modules/{m1}/subjects")).await.ids(), vec![s.clone()]);

    // Written from the subject's side, seen from the module's.
    let r = t.write("PATCH", &format!("/v1/subjects/{s}/relationships/module"), one("modules", &m2)).await;
    r.assert_status(200);
    assert_eq!(r.body["data"], json!({"type": "modules", "id": m2}));
    assert_eq!(t.get(&format!("/v1/modules/{m1}/relationships/subjects")).await.ids(), Vec::<String>::new());
    assert_eq!(t.get(&format!("/v1/modules/{m2}/relationships/subjects")).await.ids(), vec![s.clone()]);

    // Written from the module's side, seen from the subject's.
    let r = t.write("PATCH", &format!("/v1/modules/{m1}/relationships/subjects"), many("subjects", &[&s])).await;
    r.assert_status(200);
    assert_eq!(r.ids(), vec![s.clone()]);
    assert_eq!(t.get(&format!("/v1/subjects/{s}/relationships/module")).await.body["data"]["id"], m1.as_str());
}

on_both!(to_many_linkage_can_be_replaced_added_to_and_removed_from);
async fn to_many_linkage_can_be_replaced_added_to_and_removed_from() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let [a, b, c] = [t.subject("A", None).await, t.subject("B", None).await, t.subject("C", None).await];
    let path = format!("/v1/modules/{m}/relationships/subjects");

    let r = t.write("POST", &path, many("subjects", &[&a, &b])).await;
    r.assert_status(204);
    assert_eq!(t.get(&path).await.ids(), vec![a.clone(), b.clone()]);
    t.write("POST", &path, many("subjects", &[&b])).await.assert_status(204);
    assert_eq!(t.get(&path).await.ids(), vec![a.clone(), b.clone()], "adding again changes nothing");

    t.write("DELETE", &path, many("subjects", &[&a, &c])).await.assert_status(204);
    assert_eq!(t.get(&path).await.ids(), vec![b.clone()], "removing one not linked is fine");
    t.write("DELETE", &path, many("subjects", &[&a])).await.assert_status(204);

    t.write("PATCH", &path, many("subjects", &[&c])).await.assert_status(200);
    assert_eq!(t.get(&path).await.ids(), vec![c.clone()]);
    t.write("PATCH", &path, json!({"data": []})).await.assert_status(200);
    assert_eq!(t.get(&path).await.ids(), Vec::<String>::new());
    assert_eq!(t.get(&format!("/v1/subjects/{c}/module")).await.body["data"], Value::Null);
}

on_both!(naming_a_resource_that_does_not_exist_is_404_and_changes_nothing);
async fn naming_a_resource_that_does_not_exist_is_404_and_changes_nothing() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let a = t.subject("A", Some(&m)).await;
    let ghost = uuid::Uuid::now_v7().to_string();
    let path = format!("/v1/modules/{m}/relationships/subjects");
    t.write("DELETE", &path, many("subjects", &[&a, &ghost])).await.assert_error(404, "/data/1");
    t.write("PATCH", &path, many("subjects", &[&ghost])).await.assert_error(404, "/data/0");
    t.write("POST", &path, many("subjects", &["not-a-uuid"])).await.assert_error(404, "/data/0");
    assert_eq!(t.get(&path).await.ids(), vec![a.clone()]);
    t.write("PATCH", &format!("/v1/subjects/{a}/relationships/module"), one("modules", &ghost))
        .await
        .assert_error(404, "/data");
    assert_eq!(t.get(&format!("/v1/subjects/{a}/relationships/module")).await.body["data"]["id"], m.as_str());
    t.write("PATCH", &format!("/v1/modules/{ghost}/relationships/subjects"), many("subjects", &[&a]))
        .await
        .assert_problem(404);
}

on_both!(to_one_relationship_urls_allow_only_get_and_patch);
async fn to_one_relationship_urls_allow_only_get_and_patch() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let s = t.subject("S", Some(&m)).await;
    for method in ["POST", "DELETE"] {
        let r = t.write(method, &format!("/v1/subjects/{s}/relationships/module"), one("modules", &m)).await;
        r.assert_problem(405);
        assert_eq!(r.header("allow"), Some("GET, PATCH"));
    }
    let r = t.send(t.req("PUT", &format!("/v1/modules/{m}/relationships/subjects"))).await;
    r.assert_problem(405);
    assert_eq!(r.header("allow"), Some("GET, PATCH, POST, DELETE"));
    let r = t.send(t.req("POST", &format!("/v1/subjects/{s}/module"))).await;
    assert_eq!(r.header("allow"), Some("GET"));
}

on_both!(linkage_of_the_wrong_type_is_422);
async fn linkage_of_the_wrong_type_is_422() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let s = t.subject("S", None).await;
    t.write("PATCH", &format!("/v1/subjects/{s}/relationships/module"), one("subjects", &s))
        .await
        .assert_error(422, "/data");
    t.write("POST", &format!("/v1/modules/{m}/relationships/subjects"), many("modules", &[&m]))
        .await
        .assert_error(422, "/data/0");
    t.write("PATCH", &format!("/v1/modules/{m}/relationships/subjects"), one("subjects", &s))
        .await
        .assert_error(422, "/data");
    t.write("PATCH", &format!("/v1/subjects/{s}/relationships/module"), many("modules", &[&m]))
        .await
        .assert_error(422, "/data");
    let body = json!({"data": {"type": "subjects", "attributes": {"title": "X"}, "relationships": {"module": one("subjects", &s)}}});
    t.write("POST", "/v1/subjects", body).await.assert_error(422, "/data/relationships/module/data");
}

on_both!(a_chapter_can_never_be_left_without_a_subject);
async fn a_chapter_can_never_be_left_without_a_subject() {
    let t = TestApp::new().await;
    let s = t.subject("S", None).await;
    let other = t.subject("Other", None).await;
    let c = t.chapter("C", &s, 0).await;
    let r = t.write("PATCH", &format!("/v1/chapters/{c}/relationships/subject"), json!({"data": null})).await;
    r.assert_error(403, "/data");
    assert!(r.error()["detail"].as_str().unwrap().contains("subject"), "{}", r.body);
    t.write("DELETE", &format!("/v1/subjects/{s}/relationships/chapters"), many("chapters", &[&c]))
        .await
        .assert_error(403, "/data");
    t.write("PATCH", &format!("/v1/subjects/{s}/relationships/chapters"), json!({"data": []}))
        .await
        .assert_error(403, "/data");
    let body = json!({"data": {"type": "chapters", "id": c, "relationships": {"subject": {"data": null}}}});
    t.write("PATCH", &format!("/v1/chapters/{c}"), body).await.assert_error(403, "/data/relationships/subject/data");
    assert_eq!(t.get(&format!("/v1/chapters/{c}/relationships/subject")).await.body["data"]["id"], s.as_str());

    // Moving it is fine, from either side.
    t.write("PATCH", &format!("/v1/chapters/{c}/relationships/subject"), one("subjects", &other))
        .await
        .assert_status(200);
    t.write("POST", &format!("/v1/subjects/{s}/relationships/chapters"), many("chapters", &[&c]))
        .await
        .assert_status(204);
    assert_eq!(t.get(&format!("/v1/subjects/{s}/relationships/chapters")).await.ids(), vec![c.clone()]);
}

on_both!(linkage_writes_move_the_childs_updated_at);
async fn linkage_writes_move_the_childs_updated_at() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let s = t.subject("S", None).await;
    let before = t.get(&format!("/v1/subjects/{s}")).await.body["data"]["attributes"]["updated_at"].clone();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    t.write("POST", &format!("/v1/modules/{m}/relationships/subjects"), many("subjects", &[&s]))
        .await
        .assert_status(204);
    let after = t.get(&format!("/v1/subjects/{s}")).await.body["data"]["attributes"]["updated_at"].clone();
    assert!(after.as_str() > before.as_str(), "{before} {after}");
}
