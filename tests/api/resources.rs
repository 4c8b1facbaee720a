//! Create, read, update and delete of each resource type.

use serde_json::{json, Value};

use crate::helpers::{many, on_both, one, TestApp};

on_both!(creating_a_module_returns_201_with_location_and_the_whole_resource);
async fn creating_a_module_returns_201_with_location_and_the_whole_resource() {
    let t = TestApp::new().await;
    let r = t
        .write(
            "POST",
            "/v1/modules",
            json!({"data": {"type": "modules", "attributes": {"title": "Algebra", "content": "<p>x &amp; y</p>"}}}),
        )
        .await;
    r.assert_status(201);
    let id = r.id();
    let self_link = format!("http://localhost:8080/v1/modules/{id}");
    assert_eq!(r.header("location"), Some(self_link.as_str()));
    assert_eq!(r.header("content-type"), Some("application/vnd.api+json"));
    let data = &r.body["data"];
    assert_eq!(data["type"], "modules");
    assert_eq!(data["links"]["self"], self_link);
    let a = &data["attributes"];
    assert_eq!(a["title"], "Algebra");
    assert_eq!(a["content"], "<p>x &amp; y</p>", "HTML is stored and returned verbatim");
    assert_eq!(a["introduction"], "");
    assert_eq!(a["external_id"], Value::Null);
    assert_eq!(a["created_at"], a["updated_at"]);
    let rel = &data["relationships"]["subjects"];
    assert_eq!(rel["links"]["self"], format!("{self_link}/relationships/subjects"));
    assert_eq!(rel["links"]["related"], format!("{self_link}/subjects"));
    assert!(rel.get("data").is_none(), "to-many data only when included: {rel}");
    assert!(uuid::Uuid::parse_str(&id).is_ok_and(|u| u.get_version_num() == 7), "{id}");
}

on_both!(timestamps_are_rfc3339_utc_with_milliseconds);
async fn timestamps_are_rfc3339_utc_with_milliseconds() {
    let t = TestApp::new().await;
    let id = t.module("Time").await;
    let r = t.get(&format!("/v1/modules/{id}")).await;
    let created = r.body["data"]["attributes"]["created_at"].as_str().unwrap().to_owned();
    assert_eq!(created.len(), 24, "{created}");
    assert!(created.ends_with('Z') && created.as_bytes()[10] == b'T' && created.as_bytes()[19] == b'.', "{created}");
    let year: i32 = created[..4].parse().unwrap();
    assert!(year >= 2024, "{created}");
}

on_both!(a_new_subject_gets_defaults_and_its_module_linkage);
async fn a_new_subject_gets_defaults_and_its_module_linkage() {
    let t = TestApp::new().await;
    let m = t.module("Physics").await;
    let s = t.subject("Optics", Some(&m)).await;
    let r = t.get(&format!("/v1/subjects/{s}")).await;
    r.assert_status(200);
    let data = &r.body["data"];
    assert_eq!(data["attributes"]["available_for_courses"], false);
    assert_eq!(data["attributes"]["content"], "");
    assert_eq!(data["relationships"]["module"]["data"], json!({"type": "modules", "id": m}));
    assert_eq!(r.body["links"]["self"], format!("http://localhost:8080/v1/subjects/{s}"));
}

on_both!(titles_are_trimmed_and_every_attribute_is_stored);
async fn titles_are_trimmed_and_every_attribute_is_stored() {
    let t = TestApp::new().await;
    let attrs = json!({"title": "  Waves  ", "introduction": "intro", "content": "", "external_id": "EXT-1",
        "available_for_courses": true});
    let id = t.create("subjects", attrs, Value::Null).await;
    let a = t.get(&format!("/v1/subjects/{id}")).await.body["data"]["attributes"].clone();
    assert_eq!(a["title"], "Waves");
    assert_eq!(a["introduction"], "intro");
    assert_eq!(a["external_id"], "EXT-1");
    assert_eq!(a["available_for_courses"], true);
}

on_both!(patch_is_partial_and_moves_updated_at_only);
async fn patch_is_partial_and_moves_updated_at_only() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let id = t
        .create("subjects", json!({"title": "Old", "introduction": "keep me"}), json!({"module": one("modules", &m)}))
        .await;
    let before = t.get(&format!("/v1/subjects/{id}")).await.body["data"].clone();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await; // timestamps have millisecond resolution
    let body = json!({"data": {"type": "subjects", "id": id, "attributes": {"title": "New",
        "created_at": "1999-01-01T00:00:00.000Z", "updated_at": "1999-01-01T00:00:00.000Z"}}});
    let r = t.write("PATCH", &format!("/v1/subjects/{id}"), body).await;
    r.assert_status(200);
    let after = &r.body["data"];
    assert_eq!(after["attributes"]["title"], "New");
    assert_eq!(after["attributes"]["introduction"], "keep me");
    assert_eq!(after["relationships"]["module"]["data"]["id"], m.as_str(), "absent relationships keep their value");
    assert_eq!(after["attributes"]["created_at"], before["attributes"]["created_at"]);
    assert!(after["attributes"]["updated_at"].as_str() > before["attributes"]["updated_at"].as_str());
    assert_eq!(t.get(&format!("/v1/subjects/{id}")).await.body["data"], *after, "the response is what was stored");
}

on_both!(a_patch_that_changes_nothing_leaves_the_resource_as_it_was);
/// A PATCH of the values a resource already has, or of only a to-many set (whose rows are the
/// children's), answers 200 with the resource as it was: same `updated_at`, same tag. One real
/// change among them moves `updated_at`.
async fn a_patch_that_changes_nothing_leaves_the_resource_as_it_was() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let other = t.module("Other").await;
    let attrs = json!({"title": "Same", "introduction": "intro", "external_id": null, "available_for_courses": true});
    let id = t.create("subjects", attrs.clone(), json!({"module": one("modules", &m)})).await;
    let path = format!("/v1/subjects/{id}");
    let before = t.get(&path).await;
    let tag = before.header("etag").unwrap().to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await; // timestamps have millisecond resolution
    let same = json!({"data": {"type": "subjects", "id": id, "attributes": attrs,
        "relationships": {"module": one("modules", &m)}}});
    let r = t.write("PATCH", &path, same).await;
    r.assert_status(200);
    assert_eq!(r.body["data"], before.body["data"], "the same values change nothing");
    assert_eq!(r.header("etag"), Some(tag.as_str()));
    let r = t.write("PATCH", &path, json!({"data": {"type": "subjects", "id": id}})).await;
    r.assert_status(200);
    assert_eq!(r.body["data"], before.body["data"], "no members change nothing");
    // A stale or absent resource is still a 404.
    let gone = "019b0000-0000-7000-8000-000000000000";
    let r = t
        .write(
            "PATCH",
            &format!("/v1/subjects/{gone}"),
            json!({"data": {"type": "subjects", "id": gone,
        "attributes": {"title": "Same"}}}),
        )
        .await;
    r.assert_status(404);
    // Replacing a module's subjects moves the subjects' rows, not the module's.
    let m_before = t.get(&format!("/v1/modules/{other}")).await.body["data"]["attributes"].clone();
    let r = t
        .write(
            "PATCH",
            &format!("/v1/modules/{other}"),
            json!({"data": {"type": "modules", "id": other,
        "relationships": {"subjects": {"data": [{"type": "subjects", "id": id}]}}}}),
        )
        .await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["attributes"], m_before, "a to-many set is the children's rows");
    let moved = t.get(&path).await.body["data"].clone();
    assert_eq!(moved["relationships"]["module"]["data"]["id"], other.as_str());
    assert!(moved["attributes"]["updated_at"].as_str() > before.body["data"]["attributes"]["updated_at"].as_str());
    // One value that differs among the same ones is a change.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let r = t
        .write(
            "PATCH",
            &path,
            json!({"data": {"type": "subjects", "id": id,
        "attributes": {"title": "Same", "introduction": "changed"}}}),
        )
        .await;
    r.assert_status(200);
    assert!(r.body["data"]["attributes"]["updated_at"].as_str() > moved["attributes"]["updated_at"].as_str());
    assert_ne!(r.header("etag"), Some(tag.as_str()));
}

on_both!(patch_can_clear_a_nullable_attribute_and_the_module);
async fn patch_can_clear_a_nullable_attribute_and_the_module() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let id =
        t.create("subjects", json!({"title": "S", "external_id": "E"}), json!({"module": one("modules", &m)})).await;
    let body = json!({"data": {"type": "subjects", "id": id, "attributes": {"external_id": null},
        "relationships": {"module": {"data": null}}}});
    let r = t.write("PATCH", &format!("/v1/subjects/{id}"), body).await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["attributes"]["external_id"], Value::Null);
    assert_eq!(r.body["data"]["relationships"]["module"]["data"], Value::Null);
}

on_both!(relationships_in_create_and_update_bodies_are_whole_sets);
async fn relationships_in_create_and_update_bodies_are_whole_sets() {
    let t = TestApp::new().await;
    let s1 = t.subject("One", None).await;
    let s2 = t.subject("Two", None).await;
    let s3 = t.subject("Three", None).await;
    let m = t.create("modules", json!({"title": "M"}), json!({"subjects": many("subjects", &[&s1, &s2])})).await;
    assert_eq!(t.get(&format!("/v1/modules/{m}/relationships/subjects")).await.ids(), vec![s1.clone(), s2.clone()]);
    let body =
        json!({"data": {"type": "modules", "id": m, "relationships": {"subjects": many("subjects", &[&s2, &s3])}}});
    t.write("PATCH", &format!("/v1/modules/{m}"), body).await.assert_status(200);
    assert_eq!(t.get(&format!("/v1/modules/{m}/relationships/subjects")).await.ids(), vec![s2.clone(), s3.clone()]);
    let r = t.get(&format!("/v1/subjects/{s1}/relationships/module")).await;
    assert_eq!(r.body["data"], Value::Null, "a subject left out of the set has no module any more");
}

on_both!(chapters_can_be_moved_to_a_new_subject_on_create);
async fn chapters_can_be_moved_to_a_new_subject_on_create() {
    let t = TestApp::new().await;
    let old = t.subject("Old", None).await;
    let c = t.chapter("Intro", &old, 0).await;
    let new = t.create("subjects", json!({"title": "New"}), json!({"chapters": many("chapters", &[&c])})).await;
    assert_eq!(t.get(&format!("/v1/subjects/{new}/relationships/chapters")).await.ids(), vec![c.clone()]);
    assert_eq!(t.get(&format!("/v1/subjects/{old}/relationships/chapters")).await.ids(), Vec::<String>::new());
}

on_both!(a_chapter_is_a_full_resource);
async fn a_chapter_is_a_full_resource() {
    let t = TestApp::new().await;
    let s = t.subject("S", None).await;
    let c = t.chapter("First", &s, 3).await;
    let r = t.get(&format!("/v1/chapters/{c}")).await;
    r.assert_status(200);
    assert_eq!(r.body["data"]["attributes"]["position"], 3);
    assert_eq!(r.body["data"]["relationships"]["subject"]["data"]["id"], s.as_str());
    let body = json!({"data": {"type": "chapters", "id": c, "attributes": {"position": 1, "content": "<p>x</p>"}}});
    let r = t.write("PATCH", &format!("/v1/chapters/{c}"), body).await;
    assert_eq!(r.body["data"]["attributes"]["position"], 1);
    assert_eq!(t.get(&format!("/v1/chapters/{c}/subject")).await.id(), s);
    assert_eq!(t.get("/v1/chapters").await.ids(), vec![c.clone()]);
}

on_both!(deleting_a_resource_returns_204_then_404);
async fn deleting_a_resource_returns_204_then_404() {
    let t = TestApp::new().await;
    let m = t.module("Gone").await;
    let r = t.delete(&format!("/v1/modules/{m}")).await;
    r.assert_status(204);
    assert!(r.body.is_null());
    t.get(&format!("/v1/modules/{m}")).await.assert_problem(404);
    t.delete(&format!("/v1/modules/{m}")).await.assert_status(404);
}

on_both!(deleting_a_module_unlinks_its_subjects_and_moves_their_updated_at);
async fn deleting_a_module_unlinks_its_subjects_and_moves_their_updated_at() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let s = t.subject("S", Some(&m)).await;
    let before = t.get(&format!("/v1/subjects/{s}")).await.body["data"]["attributes"]["updated_at"].clone();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    t.delete(&format!("/v1/modules/{m}")).await.assert_status(204);
    let after = t.get(&format!("/v1/subjects/{s}")).await;
    assert_eq!(after.body["data"]["relationships"]["module"]["data"], Value::Null);
    assert!(after.body["data"]["attributes"]["updated_at"].as_str() > before.as_str());
}

on_both!(deleting_a_subject_deletes_its_chapters);
async fn deleting_a_subject_deletes_its_chapters() {
    let t = TestApp::new().await;
    let s = t.subject("S", None).await;
    let c = t.chapter("C", &s, 0).await;
    let other = t.subject("Other", None).await;
    let kept = t.chapter("Kept", &other, 0).await;
    t.delete(&format!("/v1/subjects/{s}")).await.assert_status(204);
    t.get(&format!("/v1/chapters/{c}")).await.assert_status(404);
    assert_eq!(t.get("/v1/chapters").await.ids(), vec![kept]);
    assert_eq!(t.get("/v1/chapters").await.body["meta"]["page"]["total"], 1);
}

on_both!(a_whole_number_written_with_a_fraction_part_is_a_whole_number);
async fn a_whole_number_written_with_a_fraction_part_is_a_whole_number() {
    let t = TestApp::new().await;
    let s = t.subject("S", None).await;
    let chapter = |position: Value| {
        json!({"data": {"type": "chapters", "attributes": {"title": "C", "position": position},
            "relationships": {"subject": {"data": {"type": "subjects", "id": s}}}}})
    };
    let r = t.write("POST", "/v1/chapters", chapter(json!(3.0))).await;
    r.assert_status(201);
    assert_eq!(r.body["data"]["attributes"]["position"], 3);
    for bad in [json!(2.5), json!(1e300), json!(-1.0)] {
        t.write("POST", "/v1/chapters", chapter(bad)).await.assert_error(422, "/data/attributes/position");
    }
}
