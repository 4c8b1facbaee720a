//! A stale tag never lets a write change what the client did not see: a resource's tag covers
//! its to-many linkage, which its plain document shows only as links, so that a `PATCH` (or an
//! atomic `update`) replacing the set of children with a tag read before another client added
//! a child is refused with 412 instead of silently unlinking that child.

use serde_json::{json, Value};

use crate::conditional::tag_of;
use crate::helpers::{many, on_both, one, TestApp, JSONAPI};
use crate::operations::atomic;

/// PATCH of module `m` replacing its subjects with `subjects`, with `If-Match: tag`.
async fn replace_subjects(t: &TestApp, m: &str, subjects: &[&str], tag: &str) -> u16 {
    let body = json!({"data": {"type": "modules", "id": m, "relationships": {"subjects": many("subjects", subjects)}}});
    let req = t.req("PATCH", &format!("/v1/modules/{m}")).header("content-type", JSONAPI).header("if-match", tag);
    t.exchange(req.body(body.to_string())).await.0.as_u16()
}

async fn subjects_of(t: &TestApp, m: &str) -> Value {
    t.get(&format!("/v1/modules/{m}/relationships/subjects")).await.body["data"].clone()
}

on_both!(a_tag_read_before_a_child_was_added_cannot_replace_the_children);
async fn a_tag_read_before_a_child_was_added_cannot_replace_the_children() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let s1 = t.subject("S1", Some(&m)).await;
    let read = tag_of(&t, &format!("/v1/modules/{m}")).await;
    // Another client adds S2 in each of the ways a child can join: the module's tag moves.
    let s2 = t.subject("S2", Some(&m)).await;
    assert_eq!(replace_subjects(&t, &m, &[&s1], &read).await, 412);
    assert_eq!(subjects_of(&t, &m).await, many("subjects", &[&s1, &s2])["data"]);
    let read = tag_of(&t, &format!("/v1/modules/{m}")).await;
    let s3 = t.subject("S3", None).await;
    t.write("PATCH", &format!("/v1/subjects/{s3}/relationships/module"), one("modules", &m)).await.assert_status(200);
    assert_eq!(replace_subjects(&t, &m, &[&s1], &read).await, 412);
    let read = tag_of(&t, &format!("/v1/modules/{m}")).await;
    t.write("POST", &format!("/v1/modules/{m}/relationships/subjects"), many("subjects", &[&s1])).await;
    assert_eq!(tag_of(&t, &format!("/v1/modules/{m}")).await, read, "adding a child it has changes nothing");
    // One child swapped for another leaves the count as it was, and still moves the tag.
    let s4 = t.subject("S4", None).await;
    let swap = json!([
        {"op": "remove", "ref": {"type": "modules", "id": m, "relationship": "subjects"}, "data": many("subjects", &[&s3])["data"]},
        {"op": "add", "ref": {"type": "modules", "id": m, "relationship": "subjects"}, "data": many("subjects", &[&s4])["data"]},
    ]);
    atomic(&t, swap).await.assert_status(204);
    assert_eq!(replace_subjects(&t, &m, &[&s1], &read).await, 412);
    let stale = json!([{"op": "update", "data": {"type": "modules", "id": m,
        "relationships": {"subjects": many("subjects", &[&s1])}}, "meta": {"ifMatch": read}}]);
    atomic(&t, stale).await.assert_error(412, "/atomic:operations/0/meta/ifMatch");
    assert_eq!(subjects_of(&t, &m).await, many("subjects", &[&s1, &s2, &s4])["data"]);

    // With the current tag the replace goes through, and answers with the tag a GET shows next.
    let current = tag_of(&t, &format!("/v1/modules/{m}")).await;
    let body = json!({"data": {"type": "modules", "id": m, "relationships": {"subjects": many("subjects", &[&s1])}}});
    let req = t.req("PATCH", &format!("/v1/modules/{m}")).header("content-type", JSONAPI).header("if-match", current);
    let (status, headers, _) = t.exchange(req.body(body.to_string())).await;
    assert_eq!(status, 200);
    let answered = headers.get("etag").unwrap().to_str().unwrap().to_owned();
    assert_eq!(tag_of(&t, &format!("/v1/modules/{m}")).await, answered);
    assert_eq!(subjects_of(&t, &m).await, many("subjects", &[&s1])["data"]);
    // A chapter added to a subject moves the subject's tag the same way.
    let read = tag_of(&t, &format!("/v1/subjects/{s1}")).await;
    t.chapter("C", &s1, 1).await;
    assert_ne!(tag_of(&t, &format!("/v1/subjects/{s1}")).await, read);
}
