//! The OpenAPI 3.1 description of the whole API, generated from the resource declarations:
//! every path and method the router serves, its parameters, request and response schemas,
//! error statuses and the bearer security scheme.

mod operations;
mod params;
mod patterns;
mod revisions;
mod schemas;
mod web;

use serde_json::{json, Map, Value};

use self::params::{collection_params, id_param, single_params};
use self::schemas::{add_schemas, error_schema, page_meta_schema, schema_ref};

use crate::jsonapi::body::singular;
use crate::jsonapi::JSONAPI;
use crate::resources::{Relationship, ResourceType, TYPES};

/// The statuses each kind of operation can answer with besides its success.
const READ_ERRORS: &[u16] = &[400, 401, 404, 406, 500, 503];
/// A write with a body: 408 when the body arrives slower than `--body-timeout`.
const WRITE_ERRORS: &[u16] = &[400, 401, 403, 404, 406, 408, 409, 413, 415, 422, 500, 503];
/// A delete is a write: a read-only token gets 403.
const DELETE_ERRORS: &[u16] = &[400, 401, 403, 404, 406, 500, 503];
const LINKAGE_WRITE_ERRORS: &[u16] = &[400, 401, 403, 404, 406, 408, 413, 415, 422, 500, 503];

/// The document served at `/v1/openapi.json`.
pub fn document() -> Value {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for rt in TYPES {
        add_schemas(&mut schemas, rt);
        add_paths(&mut paths, rt);
    }
    schemas.insert("error_document".into(), error_schema());
    schemas.insert("page_meta".into(), page_meta_schema());
    schemas
        .insert("links".into(), json!({"type": "object", "additionalProperties": {"type": "string", "format": "uri"}}));
    schemas.insert(
        "jsonapi".into(),
        json!({"type": "object", "properties": {"version": {"const": "1.0"}}, "required": ["version"]}),
    );
    paths.insert(
        "/openapi.json".into(),
        json!({"get": {"operationId": "getOpenApi", "summary": "This document (no token needed).", "security": [],
            "responses": {"200": {"description": "The OpenAPI document.", "content": {"application/json": {"schema": {"type": "object"}}}}}}}),
    );
    paths.insert("/".into(), entry_point());
    paths.insert("/operations".into(), operations::path());
    revisions::add(&mut paths, &mut schemas);
    web::add_web(&mut paths);
    add_throttled(&mut paths);
    add_unreadable(&mut paths);
    add_links(&mut paths);
    let responses: Map<String, Value> =
        [400, 401, 403, 404, 406, 408, 409, 412, 413, 414, 415, 422, 428, 429, 431, 500, 503]
            .iter()
            .map(|s| (s.to_string(), error_response(*s)))
            .collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "coursed Course Content API",
            "version": "1.0.0",
            "description": "JSON:API 1.0 server for modules, subjects and chapters. Every request but this document's needs \
                `Authorization: Bearer <token>` (401 otherwise, checked before routing; an expired or revoked token is \
                refused like an unknown one). A token of scope `read` may GET and HEAD; its writes answer 403. An \
                address that sent many refused tokens gets 429 with `Retry-After` for a while. Bodies are sent with \
                `Content-Type: application/vnd.api+json` (415 otherwise). A known path with an unsupported method answers 405 \
                with an `Allow` header; an unknown path 404. Errors are JSON:API error documents.",
        },
        "servers": [{"url": "/v1"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "A token from `coursed token create` (scope read, write or admin), or one configured with --token, --tokens-file or COURSED_TOKENS (full access)."}},
            "schemas": schemas,
            "responses": responses,
        },
    })
}

/// `GET /v1`: who the token is, and where everything is.
fn entry_point() -> Value {
    let urls: Map<String, Value> = TYPES
        .iter()
        .map(|t| t.name)
        .chain(["revisions", "openapi"])
        .map(|name| (name.to_owned(), json!({"type": "string", "format": "uri"})))
        .collect();
    let schema = json!({"type": "object", "required": ["jsonapi", "meta", "links"], "properties": {
        "jsonapi": schema_ref("jsonapi"),
        "meta": {"type": "object", "required": ["caller", "resources"], "properties": {
            "caller": {"type": "object", "required": ["name", "scope", "writes"], "properties": {
                "name": {"type": "string", "description": "The token's name (`config` for a configured token, `bootstrap` for the one made at first start)."},
                "scope": {"enum": ["read", "write", "admin"]},
                "writes": {"type": "boolean", "description": "Whether the token may write (a `read` token's writes answer 403)."}}},
            "resources": {"type": "object", "description": "Where each collection, the change feed and the OpenAPI document are.", "properties": urls}}},
        "links": {"type": "object", "properties": {"self": {"type": "string", "format": "uri"}}}}});
    let op = operation(
        "getEntryPoint".into(),
        "Who the token is (name, scope) and where everything is: what a client reads first.".into(),
        "entry point",
        vec![],
        (200, json!({"description": "The entry point.", "content": {JSONAPI: {"schema": schema}}})),
        READ_ERRORS,
    );
    json!({"get": op})
}

fn body(name: &str) -> Value {
    json!({"content": {JSONAPI: {"schema": schema_ref(name)}}})
}

fn ok(description: &str, schema: &str) -> Value {
    let mut r = body(schema);
    r["description"] = json!(description);
    r
}

fn error_response(status: u16) -> Value {
    let reason = warp::http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error");
    let description = match status {
        401 => "Unauthorized: no token, or one that is unknown, expired or revoked.",
        403 => {
            "Forbidden: the token is read-only (scope read, code `read_only_token`), the catalogue follows another \
            coursed's and changes only as that one does (code `followed_catalogue`), or the change breaks a rule of \
            the API (a chapter left without a subject)."
        }
        408 => {
            "Request Timeout: the body did not arrive within the server's body timeout (`--body-timeout`); \
            nothing was changed and the connection is closed."
        }
        429 => {
            "Too Many Requests: this address sent too many refused tokens; every request from it that needs a \
            token is refused until the seconds of `Retry-After` have passed."
        }
        414 => "URI Too Long: the request target is 65,535 bytes or more; the connection is closed.",
        431 => {
            "Request Header Fields Too Large: more than 100 header fields, or a header section over about \
            400 KiB; the connection is closed."
        }
        _ => reason,
    };
    let mut r = ok(description, "error_document");
    let retry_after = json!({"Retry-After": {"schema": {"type": "integer"}}});
    match status {
        401 => r["headers"] = json!({"WWW-Authenticate": {"schema": {"const": "Bearer"}}}),
        429 | 503 => r["headers"] = retry_after,
        _ => {}
    }
    r
}

/// 429 on every operation that needs a token (those that answer 401).
fn add_throttled(paths: &mut Map<String, Value>) {
    for op in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|item| item.values_mut()) {
        let responses = op.get_mut("responses").and_then(Value::as_object_mut);
        if let Some(responses) = responses.filter(|r| r.contains_key("401")) {
            responses.insert("429".into(), json!({"$ref": "#/components/responses/429"}));
        }
    }
}

/// 400, 414 and 431 on every operation: a request that cannot be read (malformed, or too large)
/// is refused before it is routed.
fn add_unreadable(paths: &mut Map<String, Value>) {
    for op in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|item| item.values_mut()) {
        if let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) {
            for status in ["400", "414", "431"] {
                responses.entry(status).or_insert_with(|| json!({"$ref": format!("#/components/responses/{status}")}));
            }
        }
    }
}

fn operation(
    id: String,
    summary: String,
    tag: &str,
    params: Vec<Value>,
    success: (u16, Value),
    errors: &[u16],
) -> Value {
    let mut responses = Map::new();
    responses.insert(success.0.to_string(), success.1);
    for s in errors {
        responses.insert(s.to_string(), json!({"$ref": format!("#/components/responses/{s}")}));
    }
    json!({"operationId": id, "summary": summary, "tags": [tag], "parameters": params, "responses": responses})
}

fn with_body(mut op: Value, schema: &str) -> Value {
    let mut b = body(schema);
    b["required"] = json!(true);
    op["requestBody"] = b;
    op
}

fn add_paths(paths: &mut Map<String, Value>, rt: &'static ResourceType) {
    let (t, one) = (rt.name, capitalize(singular(rt)));
    let list = operation(
        format!("list{}", capitalize(t)),
        format!("List {t}."),
        t,
        collection_params(rt),
        (200, ok("A page.", &format!("{t}_collection"))),
        READ_ERRORS,
    );
    let mut created = ok("Created.", &format!("{t}_document"));
    created["headers"] =
        json!({"Location": {"description": "The new resource's URL.", "schema": {"type": "string", "format": "uri"}}});
    let create = with_body(
        operation(
            format!("create{one}"),
            format!("Create a {}.", singular(rt)),
            t,
            single_params(rt),
            (201, created),
            WRITE_ERRORS,
        ),
        &format!("{t}_create"),
    );
    paths.insert(format!("/{t}"), json!({"get": list, "post": create}));

    let mut item_params = vec![id_param(rt)];
    item_params.extend(single_params(rt));
    let get = operation(
        format!("get{one}"),
        format!("Read a {}.", singular(rt)),
        t,
        item_params.clone(),
        (200, ok("The resource.", &format!("{t}_document"))),
        READ_ERRORS,
    );
    let update = operation(
        format!("update{one}"),
        "Update: absent members keep their values.".into(),
        t,
        item_params,
        (200, ok("The updated resource.", &format!("{t}_document"))),
        WRITE_ERRORS,
    );
    let delete = operation(
        format!("delete{one}"),
        format!("Delete a {}.", singular(rt)),
        t,
        vec![id_param(rt)],
        (204, json!({"description": "Deleted."})),
        DELETE_ERRORS,
    );
    paths.insert(
        format!("/{t}/{{id}}"),
        json!({"get": get, "patch": with_body(update, &format!("{t}_update")), "delete": delete}),
    );

    for rel in rt.relationships {
        add_relationship_paths(paths, rt, rel);
    }
}

fn add_relationship_paths(paths: &mut Map<String, Value>, rt: &'static ResourceType, rel: &'static Relationship) {
    let (t, one, r, target) = (rt.name, capitalize(singular(rt)), capitalize(rel.name), rel.target());
    let mut params = vec![id_param(rt)];
    let related = if rel.is_to_one() {
        params.extend(single_params(target));
        ok("The related resource, or null.", &format!("{}_document", target.name))
    } else {
        params.extend(collection_params(target));
        ok("A page of the related resources.", &format!("{}_collection", target.name))
    };
    let summary = format!("Read the {} of a {}.", rel.name, singular(rt));
    let get_related = operation(format!("get{one}{r}"), summary, t, params, (200, related), READ_ERRORS);
    paths.insert(format!("/{t}/{{id}}/{}", rel.name), json!({ "get": get_related }));

    let linkage = format!("{t}_{}_linkage", rel.name);
    let id = vec![id_param(rt)];
    let mut item = Map::new();
    let get = operation(
        format!("get{one}{r}Relationship"),
        format!("Read the {} linkage.", rel.name),
        t,
        id.clone(),
        (200, ok("The linkage.", &linkage)),
        READ_ERRORS,
    );
    item.insert("get".into(), get);
    let replace = operation(
        format!("replace{one}{r}Relationship"),
        "Replace the whole linkage.".into(),
        t,
        id.clone(),
        (200, ok("The new linkage.", &linkage)),
        LINKAGE_WRITE_ERRORS,
    );
    item.insert("patch".into(), with_body(replace, &format!("{linkage}_request")));
    if !rel.is_to_one() {
        for (method, verb, what) in [
            ("post", "add", "Add to the linkage (idempotent)."),
            ("delete", "remove", "Remove from the linkage (idempotent)."),
        ] {
            let op = operation(
                format!("{verb}{one}{r}Relationship"),
                what.into(),
                t,
                id.clone(),
                (204, json!({"description": "Done."})),
                LINKAGE_WRITE_ERRORS,
            );
            item.insert(method.into(), with_body(op, &format!("{linkage}_request")));
        }
    }
    paths.insert(format!("/{t}/{{id}}/relationships/{}", rel.name), Value::Object(item));
}

/// OpenAPI links from each create to every operation on the new resource's paths (its id is
/// `data.id` of the 201 document), so that clients and fuzzers can follow a resource's life.
fn add_links(paths: &mut Map<String, Value>) {
    for rt in TYPES {
        let prefix = format!("/{}/{{id}}", rt.name);
        let links: Map<String, Value> = paths
            .iter()
            .filter(|(path, _)| path.starts_with(&prefix))
            .flat_map(|(_, item)| item.as_object().into_iter().flat_map(|ops| ops.values()))
            .filter_map(|op| op["operationId"].as_str())
            .map(|id| (id.to_owned(), json!({"operationId": id, "parameters": {"path.id": "$response.body#/data/id"}})))
            .collect();
        if let Some(created) =
            paths.get_mut(&format!("/{}", rt.name)).and_then(|item| item.pointer_mut("/post/responses/201"))
        {
            created["links"] = Value::Object(links);
        }
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}
