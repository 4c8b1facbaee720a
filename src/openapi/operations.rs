//! `POST /operations` (the Atomic Operations extension): one schema per kind of operation on
//! each type and relationship, built from the same declarations and request schemas as the
//! single endpoints.

use serde_json::{json, Map, Value};

use super::schemas::linkage_data;
use super::JSONAPI;
use crate::jsonapi::{ATOMIC, MAX_OPERATIONS};
use crate::resources::{ResourceType, TYPES};

/// The statuses `POST /operations` answers besides its successes.
const ERRORS: &[u16] = &[400, 401, 403, 404, 406, 408, 409, 412, 413, 415, 422, 428, 500, 503];

/// The media type of atomic requests and results.
fn media() -> String {
    format!("{JSONAPI}; ext=\"{ATOMIC}\"")
}

/// The `data` member of the single endpoint's request schema `name`.
fn data_of(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}/properties/data")})
}

/// `ref` to a resource of `rt` (by `id`, or by the `lid` an earlier operation gave it), or to
/// its relationship `rel`.
fn reference(rt: &ResourceType, rel: Option<&str>) -> Value {
    let mut properties =
        json!({"type": {"const": rt.name}, "id": {"type": "string", "format": "uuid"}, "lid": {"type": "string"}});
    let mut required = vec!["type"];
    if let Some(rel) = rel {
        properties["relationship"] = json!({"const": rel});
        required.push("relationship");
    }
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false,
        "oneOf": [{"required": ["id"]}, {"required": ["lid"]}]})
}

/// One kind of operation: `op`, and the members it takes besides `meta` and `href`.
fn operation(op: &str, summary: String, members: Value, required: &[&str], needs_target: bool) -> Value {
    let mut properties = json!({
        "op": {"const": op},
        "href": {"type": "string", "description": "The URL of the target, instead of `ref`."},
        "meta": {"type": "object", "properties": {"ifMatch": {"type": "string",
            "description": "The ETag the target must still have (as If-Match on the single endpoints): 412 otherwise."}}},
    });
    for (name, schema) in members.as_object().into_iter().flatten() {
        properties[name] = schema.clone();
    }
    let mut s = json!({"title": summary, "type": "object", "properties": properties, "required": required,
        "additionalProperties": false, "not": {"required": ["ref", "href"]}});
    if needs_target {
        s["anyOf"] = json!([{"required": ["ref"]}, {"required": ["href"]}]);
    }
    s
}

fn operations_of(rt: &'static ResourceType) -> Vec<Value> {
    let t = rt.name;
    let mut ops = vec![
        operation(
            "add",
            format!("Create one of the {t}; `data.lid` names it for later operations."),
            json!({"data": {"allOf": [data_of(&format!("{t}_create")), {"properties": {"lid": {"type": "string",
                "description": "A local id, unique in the request, that later operations name it by."}}}]}}),
            &["op", "data"],
            false,
        ),
        operation(
            "update",
            format!("Update one of the {t}."),
            json!({"ref": reference(rt, None), "data": data_of(&format!("{t}_update"))}),
            &["op", "data"],
            false,
        ),
        operation("remove", format!("Delete one of the {t}."), json!({"ref": reference(rt, None)}), &["op"], true),
    ];
    for rel in rt.relationships {
        let kinds: &[&str] = if rel.is_to_one() { &["update"] } else { &["update", "add", "remove"] };
        for kind in kinds {
            let data = json!({"data": linkage_data(rel)});
            let mut members = json!({"ref": reference(rt, Some(rel.name))});
            members["data"] = data["data"].clone();
            ops.push(operation(
                kind,
                format!("{kind} the `{}` linkage of one of the {t}.", rel.name),
                members,
                &["op", "data"],
                true,
            ));
        }
    }
    ops
}

/// The path item of `/operations`.
pub fn path() -> Value {
    let ops: Vec<Value> = TYPES.iter().flat_map(|rt| operations_of(rt)).collect();
    let request = json!({"type": "object", "properties": {"atomic:operations": {"type": "array", "minItems": 1,
        "maxItems": MAX_OPERATIONS, "items": {"anyOf": ops}}}, "required": ["atomic:operations"]});
    let result = json!({"type": "object", "properties": {"jsonapi": {"$ref": "#/components/schemas/jsonapi"},
        "atomic:results": {"type": "array", "items": {"type": "object", "properties": {"data": {"type": "object"}}}}},
        "required": ["jsonapi", "atomic:results"]});
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({"description": "Every operation was applied; the resources that add and update operations made, in order \
            (an empty object for the others).", "content": {media(): {"schema": result}}}),
    );
    responses.insert("204".into(), json!({"description": "Every operation was applied; none returns a resource."}));
    for s in ERRORS {
        responses.insert(s.to_string(), json!({"$ref": format!("#/components/responses/{s}")}));
    }
    json!({"post": {
        "operationId": "atomicOperations",
        "summary": "Atomic operations: adds, updates and removes of resources and relationships, in order, as one \
            transaction (all or nothing). A resource added with `data.lid` is named by that `lid` (in `ref.lid` or in \
            linkage) by the later operations. A failing operation answers its error with `source.pointer` under \
            `/atomic:operations/N`, and nothing is stored.",
        "tags": ["operations"],
        "parameters": [],
        "requestBody": {"required": true, "content": {media(): {"schema": request}}},
        "responses": responses,
    }})
}
