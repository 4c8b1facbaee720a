//! Random writes applied in the same order to both engines: updates of every attribute with
//! values that are right, too long, empty, of the wrong type, duplicated or read-only; moves
//! through relationships and relationship endpoints, to resources that exist and that do not;
//! creates and deletes; malformed documents. Each answer must be the same on both engines but
//! for the ids and timestamps the server makes, and afterwards every resource of the catalogue
//! must read the same.

use serde_json::{json, Value};

use super::{Draw, MODULES, SUBJECTS};
use crate::helpers::{TestApp, JSONAPI};

/// The catalogue's ids (`copy.rs`): modules 1-11, subjects 100-139, chapters 500-559.
fn id(n: usize) -> String {
    format!("01900000-0000-7000-8000-{n:012}")
}
const MISSING: &str = "01900000-0000-7000-8000-000000099999";

/// `text` with what only the server decides masked: timestamps, and ids that are not the
/// catalogue's (made by a create).
fn masked(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while let Some(i) = rest.find(['"', '0', '1']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let stamp = ["\"created_at\":\"", "\"updated_at\":\""].into_iter().find(|k| rest.starts_with(k));
        if let Some(key) = stamp {
            let end = rest[key.len()..].find('"').map_or(rest.len(), |e| key.len() + e + 1);
            out.push_str(key);
            out.push_str("T\"");
            rest = &rest[end..];
        } else if is_uuid(rest) && !rest.starts_with("01900000-0000-7000-8000-") {
            out.push_str("NEW");
            rest = &rest[36..];
        } else {
            out.push_str(&rest[..1]);
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 36
        && b[..36].iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// A value for one of a subject's or a module's attributes: mostly right, sometimes not.
fn attribute(d: &mut Draw, name: &str, n: usize) -> Value {
    match (name, d.below(6)) {
        ("title", 0) => json!(""),
        ("title", 1) => json!("x".repeat(256)),
        ("title", 2) => json!(42),
        ("title", 3) => json!(format!("  Zürich {n}  ")),
        ("title", _) => json!(format!("Title {n} é")),
        ("external_id", 0) => json!(null),
        ("external_id", 1) => json!("S-5"),
        ("external_id", 2) => json!("s-5"),
        ("external_id", 3) => json!("ext-b"),
        ("external_id", _) => json!(format!("new-{n}")),
        ("available_for_courses", 0) => json!("yes"),
        ("available_for_courses", k) => json!(k % 2 == 0),
        ("position", 0) => json!(-1),
        ("position", 1) => json!("3"),
        ("position", k) => json!(k),
        ("created_at", _) => json!("2020-01-01T00:00:00.000Z"),
        (_, 0) => json!(7),
        (_, _) => json!(format!("<p>Text {n} \"q\"</p>")),
    }
}

fn attributes(d: &mut Draw, names: &[&str], n: usize) -> Value {
    let mut attrs = serde_json::Map::new();
    for name in names {
        if d.chance(35) {
            attrs.insert((*name).to_owned(), attribute(d, name, n));
        }
    }
    if d.chance(5) {
        attrs.insert("colour".into(), json!("red"));
    }
    Value::Object(attrs)
}

/// Linkage to a resource of `kind` that exists, to one that does not, of the wrong type, or null.
fn linkage(d: &mut Draw, kind: &str, known: &[&str]) -> Value {
    match d.below(8) {
        0 => json!(null),
        1 => json!({"type": kind, "id": MISSING}),
        2 => json!({"type": "nothing", "id": known[0]}),
        _ => json!({"type": kind, "id": d.one(known)}),
    }
}

/// One random write: method, path, body.
fn write(d: &mut Draw, n: usize) -> (&'static str, String, String) {
    const SUBJECT_ATTRS: &[&str] =
        &["title", "introduction", "content", "external_id", "available_for_courses", "created_at"];
    const MODULE_ATTRS: &[&str] = &["title", "introduction", "content", "external_id"];
    let chapters: Vec<String> = (0..6).map(|i| id(500 + i * 7)).collect();
    let chapters: Vec<&str> = chapters.iter().map(String::as_str).collect();
    let subject = id(100 + d.below(12));
    let (method, path, body) = match d.below(10) {
        0..=2 => {
            let mut data = json!({"type": "subjects", "id": subject, "attributes": attributes(d, SUBJECT_ATTRS, n)});
            if d.chance(30) {
                data["relationships"] = json!({"module": {"data": linkage(d, "modules", MODULES)}});
            }
            if d.chance(5) {
                data["type"] = json!("modules");
            }
            ("PATCH", format!("/v1/subjects/{subject}"), json!({ "data": data }))
        }
        3 => {
            let module = d.one(MODULES);
            let data = json!({"type": "modules", "id": module, "attributes": attributes(d, MODULE_ATTRS, n)});
            ("PATCH", format!("/v1/modules/{module}"), json!({ "data": data }))
        }
        4 => {
            let mut data = json!({"type": "subjects", "attributes": attributes(d, SUBJECT_ATTRS, n)});
            if d.chance(70) {
                data["attributes"]["title"] = json!(format!("Created {n}"));
            }
            if d.chance(40) {
                data["relationships"] = json!({"module": {"data": linkage(d, "modules", MODULES)}});
            }
            ("POST", "/v1/subjects".to_owned(), json!({ "data": data }))
        }
        5 => {
            let chapter = d.one(&chapters);
            let mut data =
                json!({"type": "chapters", "id": chapter, "attributes": attributes(d, &["title", "position"], n)});
            if d.chance(40) {
                data["relationships"] = json!({"subject": {"data": linkage(d, "subjects", SUBJECTS)}});
            }
            ("PATCH", format!("/v1/chapters/{chapter}"), json!({ "data": data }))
        }
        6 => (
            "PATCH",
            format!("/v1/subjects/{subject}/relationships/module"),
            json!({"data": linkage(d, "modules", MODULES)}),
        ),
        7 => {
            let method = d.one(&["POST", "PATCH", "DELETE"]);
            let data: Vec<Value> =
                (0..d.below(3)).map(|_| json!({"type": "chapters", "id": d.one(&chapters)})).collect();
            (method, format!("/v1/subjects/{subject}/relationships/chapters"), json!({ "data": data }))
        }
        8 if d.chance(30) => ("DELETE", format!("/v1/subjects/{subject}"), Value::Null),
        8 => ("DELETE", format!("/v1/modules/{}", id(6 + d.below(6))), Value::Null),
        _ => {
            let bodies = ["{", "[]", "{\"data\":[]}", "{\"data\":{\"type\":\"subjects\"}}", "null"];
            return ("PATCH", format!("/v1/subjects/{subject}"), d.one(&bodies).to_owned());
        }
    };
    (method, path, if body.is_null() { String::new() } else { body.to_string() })
}

async fn send(t: &TestApp, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut req = t.req(method, path);
    if !body.is_empty() {
        req = req.header("content-type", JSONAPI).body(body);
    }
    let (status, _, bytes) = t.exchange(req).await;
    (status.as_u16(), masked(&bytes))
}

#[tokio::test]
async fn random_writes_get_the_same_answers_on_sqlite_and_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let Some((a, b)) = crate::copy::catalogue_on_both_engines(dir.path()).await else { return };
    let mut d = Draw(0x9E37_79B9_7F4A_7C15);
    let mut statuses = std::collections::BTreeMap::new();
    for n in 0..300 {
        let (method, path, body) = write(&mut d, n);
        let on_sqlite = send(&a, method, &path, &body).await;
        let on_postgres = send(&b, method, &path, &body).await;
        assert_eq!(on_sqlite, on_postgres, "{method} {path} {body}: answered differently on SQLite and PostgreSQL");
        *statuses.entry(on_sqlite.0).or_insert(0) += 1;
    }
    // Every kind of answer came up: writes done, refused as malformed, forbidden by the model,
    // missing, in conflict, invalid.
    for status in [200, 201, 204, 400, 403, 404, 409, 422] {
        assert!(statuses.get(&status).copied().unwrap_or(0) >= 3, "{status}: {statuses:?}");
    }
    // And afterwards the catalogue reads the same, resource by resource.
    let paths = (1..=11)
        .map(|n| format!("/v1/modules/{}?include=subjects", id(n)))
        .chain((100..140).map(|n| format!("/v1/subjects/{}?include=module,chapters", id(n))))
        .chain((500..560).map(|n| format!("/v1/chapters/{}", id(n))))
        .chain(["/v1/subjects?sort=-external_id,title&page[size]=100", "/v1/modules?sort=title"].map(String::from));
    for path in paths {
        assert_eq!(send(&a, "GET", &path, "").await, send(&b, "GET", &path, "").await, "{path}");
    }
    // The history of it all is the same too: every resource's revisions, with the same
    // numbers, actions, authors and changes (times masked). Their order across resources
    // within one write (the subjects a deleted module lets go) is the order the engine
    // happened to update the rows in.
    let (on_sqlite, on_postgres) = (history(&a).await, history(&b).await);
    assert!(
        on_sqlite.len() > 111 + 100,
        "the catalogue's creates and the writes that changed something: {}",
        on_sqlite.len()
    );
    assert_eq!(on_sqlite.keys().collect::<Vec<_>>(), on_postgres.keys().collect::<Vec<_>>());
    for (key, revision) in &on_sqlite {
        assert_eq!(revision, &on_postgres[key], "{key:?}");
    }
}

/// Every revision of the feed by (type, id, number), times masked, without what places it in
/// the feed (its id, cursor and links).
async fn history(t: &TestApp) -> std::collections::BTreeMap<(String, String, i64), Value> {
    let mut out = std::collections::BTreeMap::new();
    let mut path = "/v1/revisions?page[size]=200".to_owned();
    loop {
        let (status, body) = send(t, "GET", &path, "").await;
        assert_eq!(status, 200, "{path}: {body}");
        // The catalogue was loaded into SQLite and copied from there into PostgreSQL.
        let doc: Value =
            serde_json::from_str(&masked_times(&body).replace(r#""by":"copy""#, r#""by":"load""#)).unwrap();
        let data = doc["data"].as_array().unwrap();
        if data.is_empty() {
            return out;
        }
        for r in data {
            let resource = &r["relationships"]["resource"]["data"];
            let key = (
                resource["type"].as_str().unwrap().to_owned(),
                resource["id"].as_str().unwrap().to_owned(),
                r["attributes"]["number"].as_i64().unwrap(),
            );
            out.insert(key, r["attributes"].clone());
        }
        path = doc["links"]["next"].as_str().unwrap().strip_prefix("http://localhost:8080").unwrap().to_owned();
    }
}

/// `text` with every time as the API writes them (`2026-01-31T12:00:00.000Z`) masked.
fn masked_times(text: &str) -> String {
    let shape = |w: &[u8]| {
        w.len() == 24
            && w.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                19 => *c == b'.',
                23 => *c == b'Z',
                _ => c.is_ascii_digit(),
            })
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if i + 24 <= b.len() && shape(&b[i..i + 24]) {
            out.push_str("TIME");
            i += 24;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}
