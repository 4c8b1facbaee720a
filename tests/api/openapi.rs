//! The OpenAPI document is kept true: every operation it describes is tried against the server,
//! and every route the server answers is described.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::helpers::{many, on_both, one, Resp, TestApp, JSONAPI};

const METHODS: [&str; 7] = ["GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS"];

/// Resources of each type linked together, plus one more of each linked to nothing of those.
struct Fixtures {
    linked: HashMap<&'static str, String>,
    spare: HashMap<&'static str, String>,
}

async fn fixtures(t: &TestApp) -> Fixtures {
    let m = t.module("Module").await;
    let s = t.subject("Subject", Some(&m)).await;
    let c = t.chapter("Chapter", &s, 0).await;
    let other = t.subject("Other subject", None).await;
    let spare = HashMap::from([
        ("modules", t.module("Spare").await),
        ("subjects", other.clone()),
        ("chapters", t.chapter("Spare", &other, 0).await),
    ]);
    Fixtures { linked: HashMap::from([("modules", m), ("subjects", s), ("chapters", c)]), spare }
}

/// A valid request body for `method` on the documented `path`.
fn request_body(doc: &Value, method: &str, path: &str, fx: &Fixtures) -> Option<Value> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let ty = segments[0];
    match (method, segments.as_slice()) {
        ("post", [_]) => {
            let mut data = json!({"type": ty, "attributes": {"title": "Made from the OpenAPI walk"}});
            let schema = &doc["components"]["schemas"][format!("{ty}_create")]["properties"]["data"]["properties"]
                ["relationships"];
            for rel in schema["required"].as_array().into_iter().flatten() {
                let rel = rel.as_str().unwrap();
                let target = to_one_target(&schema["properties"][rel]["properties"]["data"]);
                data["relationships"][rel] = one(target, &fx.linked[target]);
            }
            Some(json!({ "data": data }))
        }
        ("patch", [_, _]) => {
            Some(json!({"data": {"type": ty, "id": fx.linked[ty], "attributes": {"title": "Renamed"}}}))
        }
        (_, [_, _, "relationships", rel]) if method != "get" => {
            let data = &doc["components"]["schemas"][format!("{ty}_{rel}_linkage_request")]["properties"]["data"];
            match data["items"]["properties"]["type"]["const"].as_str() {
                // To-many: name a resource linked to the fixture (PATCH, POST) or one that is not (DELETE).
                Some(target) => {
                    let id = if method == "delete" { &fx.spare[target] } else { &fx.linked[target] };
                    Some(many(target, &[id]))
                }
                None => {
                    let target = to_one_target(data);
                    Some(one(target, &fx.linked[target]))
                }
            }
        }
        _ => None,
    }
}

/// The type a to-one linkage schema names (an identifier, or null or an identifier).
fn to_one_target(data: &Value) -> &str {
    let identifier = data.get("oneOf").map_or(data, |o| &o[1]);
    identifier["properties"]["type"]["const"].as_str().expect("a to-one linkage names its type")
}

/// Validates `instance` against a schema of the OpenAPI document (a `$ref` into it).
fn assert_matches(doc: &Value, schema: &Value, instance: &Value, what: &str) {
    let root = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "components": doc["components"], "allOf": [schema]});
    let validator = jsonschema::validator_for(&root).expect("the OpenAPI schemas compile");
    let errors: Vec<String> = validator.iter_errors(instance).map(|e| format!("{e} at {}", e.instance_path)).collect();
    assert!(errors.is_empty(), "{what}: the response does not match its documented schema: {errors:?}\n{instance}");
}

/// The response object documented for `status` (following a `$ref`).
fn documented<'a>(doc: &'a Value, op: &'a Value, status: u16) -> Option<&'a Value> {
    let r = op["responses"].get(status.to_string())?;
    match r["$ref"].as_str() {
        Some(reference) => doc["components"]["responses"].get(reference.rsplit('/').next()?),
        None => Some(r),
    }
}

async fn call(t: &TestApp, method: &str, url: &str, body: Option<&Value>) -> Resp {
    let req = t.req(method, url);
    match body {
        Some(b) => t.send(req.header("content-type", JSONAPI).body(b.to_string())).await,
        None => t.send(req).await,
    }
}

on_both!(the_document_is_served_without_a_token);
async fn the_document_is_served_without_a_token() {
    let t = TestApp::new().await;
    let r = t.send(warp::test::request().path("/v1/openapi.json")).await;
    r.assert_status(200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body["openapi"], "3.1.0");
    assert_eq!(r.body, coursed::openapi::document());
    assert_eq!(r.body["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
}

on_both!(every_described_operation_answers_as_described);
async fn every_described_operation_answers_as_described() {
    let doc = coursed::openapi::document();
    let mut tried = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        // Atomic operations take a body of many operations: tests/api/operations.rs; the
        // stream never ends: tests/api/stream.rs.
        if path == "/openapi.json" || path == "/operations" || path == "/revisions/stream" {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            // HEAD answers as GET without a body, OPTIONS before any check: tests/api/web.rs.
            if method == "head" || method == "options" {
                continue;
            }
            let t = TestApp::new().await;
            let fx = fixtures(&t).await;
            let ty = path.trim_start_matches('/').split('/').next().unwrap();
            let id = match ty {
                // The entry point names no resource.
                "" => String::new(),
                // A revision of the fixtures' writes, as the feed gives it.
                "revisions" => t.get("/v1/revisions").await.data()[0]["id"].as_str().unwrap().to_owned(),
                _ => fx.linked[ty].clone(),
            };
            let url = format!("/v1{}", path.replace("{id}", &id)).trim_end_matches('/').to_owned();
            let body = request_body(&doc, method, path, &fx);
            assert_eq!(body.is_some(), op.get("requestBody").is_some(), "{method} {path}: request body documented");
            let r = call(&t, &method.to_uppercase(), &url, body.as_ref()).await;
            let what = format!("{} {path}", method.to_uppercase());
            let success: Vec<u16> = op["responses"]
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| k.starts_with('2'))
                .map(|k| k.parse().unwrap())
                .collect();
            assert_eq!(vec![r.status.as_u16()], success, "{what}: {}", r.body);
            let response = documented(&doc, op, r.status.as_u16()).unwrap();
            match response["content"][JSONAPI]["schema"].as_object() {
                Some(schema) => assert_matches(&doc, &Value::Object(schema.clone()), &r.body, &what),
                None => assert!(r.body.is_null(), "{what}: undocumented body"),
            }
            // Its documented errors are real too: an unknown id for item routes, a bad query for all.
            if path.contains("{id}") {
                let ghost = url.replace(&id, &uuid::Uuid::now_v7().to_string());
                let r = call(&t, &method.to_uppercase(), &ghost, body.as_ref()).await;
                let response = documented(&doc, op, r.status.as_u16());
                assert!(r.status.is_client_error() && response.is_some(), "{what} on a missing id: {}", r.body);
                assert_matches(&doc, &response.unwrap()["content"][JSONAPI]["schema"], &r.body, &what);
            }
            let r = call(&t, &method.to_uppercase(), &format!("{url}?unknown=1"), body.as_ref()).await;
            r.assert_error(400, "unknown");
            assert!(documented(&doc, op, 400).is_some(), "{what}: 400 not documented");
            tried += 1;
        }
    }
    assert!(tried >= 30, "only {tried} operations described");
}

on_both!(the_server_answers_no_route_that_the_document_omits);
async fn the_server_answers_no_route_that_the_document_omits() {
    let doc = coursed::openapi::document();
    let t = TestApp::new().await;
    let fx = fixtures(&t).await;
    let mut shapes: Vec<String> = Vec::new();
    for rt in coursed::resources::TYPES {
        shapes.push(format!("/{}", rt.name));
        shapes.push(format!("/{}/{{id}}", rt.name));
        for rel in ["module", "subjects", "subject", "chapters", "teacher", "relationships"] {
            shapes.push(format!("/{}/{{id}}/{rel}", rt.name));
            shapes.push(format!("/{}/{{id}}/relationships/{rel}", rt.name));
        }
    }
    shapes.extend(["/teachers".into(), "/teachers/{id}".into(), "/".into(), "/openapi.json".into()]);
    let mut served = 0;
    for shape in &shapes {
        let ty = shape.trim_start_matches('/').split('/').next().unwrap();
        let id = fx.linked.get(ty).cloned().unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let url = format!("/v1{}", shape.replace("{id}", &id));
        for method in METHODS {
            // A HEAD has no body to tell a missing route from a missing resource by; it is
            // answered as the GET is.
            if method == "HEAD" {
                continue;
            }
            let body = json!({"data": []});
            let r = call(&t, method, &url, (method != "GET").then_some(&body)).await;
            let described = doc["paths"].get(shape).and_then(|item| item.get(method.to_lowercase()));
            match r.status.as_u16() {
                404 if r.body["errors"][0]["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("No such path") || d.contains("no relationship")) =>
                {
                    assert!(doc["paths"].get(shape).is_none(), "{method} {shape} is described but not routed")
                }
                405 => {
                    assert!(described.is_none(), "{method} {shape} is described but answers 405");
                    let allow = r.header("allow").unwrap();
                    for m in allow.split(", ") {
                        assert!(
                            doc["paths"][shape].get(m.to_lowercase()).is_some(),
                            "{shape}: Allow names {m}, undescribed"
                        );
                    }
                }
                status => {
                    assert!(described.is_some(), "{method} {shape} answers {status} but is not described: {}", r.body);
                    served += 1;
                }
            }
        }
    }
    assert!(served >= 30, "{served}");
}

on_both!(links_lead_from_each_create_to_the_new_resource);
async fn links_lead_from_each_create_to_the_new_resource() {
    let doc = coursed::openapi::document();
    let t = TestApp::new().await;
    let fx = fixtures(&t).await;
    let operations: HashMap<&str, (&str, &str)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| item.as_object().unwrap().iter().map(move |(m, op)| (path.as_str(), m.as_str(), op)))
        .filter_map(|(path, method, op)| Some((op["operationId"].as_str()?, (path, method))))
        .collect();
    let mut followed = 0;
    for rt in coursed::resources::TYPES {
        let path = format!("/{}", rt.name);
        let links = doc["paths"][&path]["post"]["responses"]["201"]["links"].as_object().expect("a create has links");
        let body = request_body(&doc, "post", &path, &fx).unwrap();
        let created = call(&t, "POST", &format!("/v1{path}"), Some(&body)).await;
        created.assert_status(201);
        for (name, link) in links {
            let (target, method) = operations[link["operationId"].as_str().unwrap()];
            assert_eq!(link["operationId"], name.as_str());
            let expression = link["parameters"]["path.id"].as_str().unwrap();
            let id = created.body.pointer(expression.strip_prefix("$response.body#").unwrap()).unwrap();
            assert!(target.starts_with(&format!("{path}/{{id}}")), "{name} leads to {target}");
            if method == "get" {
                let r = call(&t, "GET", &format!("/v1{}", target.replace("{id}", id.as_str().unwrap())), None).await;
                r.assert_status(200);
                followed += 1;
            }
        }
    }
    // Each type's GETs: the resource, its revisions, and the related resource(s) and linkage of
    // each relationship.
    let gets: usize = coursed::resources::TYPES.iter().map(|rt| 2 + 2 * rt.relationships.len()).sum();
    assert_eq!(followed, gets);
}

on_both!(the_documented_text_rules_are_the_servers);
async fn the_documented_text_rules_are_the_servers() {
    let doc = coursed::openapi::document();
    let root = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "components": doc["components"],
        "allOf": [{"$ref": "#/components/schemas/modules_create"}]});
    let validator = jsonschema::validator_for(&root).expect("the OpenAPI schemas compile");
    let t = TestApp::new().await;
    // Unicode White_Space is what the server trims (U+0085 and U+3000 are, U+FEFF and U+200B are
    // not); JSON Schema's own `\s` differs on exactly such characters.
    for title in ["a", " ", "\u{2003}\u{85}\u{85}", "\u{feff}", "\u{200b}", "\u{3000}x", "\t\n", "\u{a0}", "a\u{0}"] {
        let body = json!({"data": {"type": "modules", "attributes": {"title": title}}});
        let documented = validator.is_valid(&body);
        let r = t.write("POST", "/v1/modules", body).await;
        assert_eq!(documented, r.status == 201, "title {title:?}: schema says {documented}, server {}", r.status);
    }
}
