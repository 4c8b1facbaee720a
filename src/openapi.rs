//! The OpenAPI 3.1 description of the whole API, generated from the resource declarations:
//! every path and method the router serves, its parameters, request and response schemas,
//! error statuses and the bearer security scheme.

use serde_json::{json, Map, Value};

use crate::jsonapi::body::singular;
use crate::jsonapi::query::{MAX_IDS, MAX_PAGE_SIZE};
use crate::resources::{Attribute, Kind, Relationship, ResourceType, TYPES};

const JSONAPI: &str = "application/vnd.api+json";

/// The statuses each kind of operation can answer with besides its success.
const READ_ERRORS: &[u16] = &[400, 401, 404, 406, 500, 503];
const WRITE_ERRORS: &[u16] = &[400, 401, 403, 404, 406, 409, 413, 415, 422, 500, 503];
const LINKAGE_WRITE_ERRORS: &[u16] = &[400, 401, 403, 404, 406, 413, 415, 422, 500, 503];

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
    let responses: Map<String, Value> = [400, 401, 403, 404, 406, 409, 413, 415, 422, 500, 503]
        .iter()
        .map(|s| (s.to_string(), error_response(*s)))
        .collect();
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "coursed Course Content API",
            "version": "1.0.0",
            "description": "JSON:API 1.0 server for modules, subjects and chapters. Every request but this document's needs \
                `Authorization: Bearer <token>` (401 otherwise, checked before routing). Bodies are sent with \
                `Content-Type: application/vnd.api+json` (415 otherwise). A known path with an unsupported method answers 405 \
                with an `Allow` header; an unknown path 404. Errors are JSON:API error documents.",
        },
        "servers": [{"url": "/v1"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "A token from --token, --tokens-file or COURSED_TOKENS."}},
            "schemas": schemas,
            "responses": responses,
        },
    })
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
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
    let mut r = ok(reason, "error_document");
    match status {
        401 => r["headers"] = json!({"WWW-Authenticate": {"schema": {"const": "Bearer"}}}),
        503 => r["headers"] = json!({"Retry-After": {"schema": {"type": "integer"}}}),
        _ => {}
    }
    r
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

fn id_param(rt: &ResourceType) -> Value {
    json!({"name": "id", "in": "path", "required": true, "description": format!("The id of the {}.", singular(rt)),
        "schema": {"type": "string", "format": "uuid"}})
}

fn query(name: &str, description: String, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description, "schema": schema})
}

/// `include` and `fields[...]`: taken wherever resources are returned.
fn single_params(rt: &ResourceType) -> Vec<Value> {
    let rels: Vec<&str> = rt.relationships.iter().map(|r| r.name).collect();
    let mut params = vec![query(
        "include",
        format!("Comma-separated relationship paths to include, up to two deep (e.g. {}).", rels.join(", ")),
        json!({"type": "string"}),
    )];
    for t in TYPES {
        let fields: Vec<&str> =
            t.attributes.iter().map(|a| a.name).chain(t.relationships.iter().map(|r| r.name)).collect();
        params.push(query(
            &format!("fields[{}]", t.name),
            format!("Sparse fieldset of {}: a comma-separated list of {}.", t.name, fields.join(", ")),
            json!({"type": "string"}),
        ));
    }
    params
}

/// Paging, sorting and filtering, plus `include` and `fields`.
fn collection_params(rt: &ResourceType) -> Vec<Value> {
    let sortable: Vec<&str> = rt.sort_fields().collect();
    let mut params = vec![
        query(
            "page[number]",
            "Page number, from 1 (default 1).".into(),
            json!({"type": "integer", "minimum": 1, "default": 1}),
        ),
        query(
            "page[size]",
            format!("Page size, 1 to {MAX_PAGE_SIZE} (default 20)."),
            json!({"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 20}),
        ),
        query(
            "sort",
            format!("Comma-separated sort fields, `-` for descending: {}. Ties are broken by id.", sortable.join(", ")),
            json!({"type": "string"}),
        ),
        query(
            "filter[id]",
            format!("Comma-separated ids (at most {MAX_IDS}); `filter[id][]=` and repeated `filter[id]=` work too."),
            json!({"type": "string"}),
        ),
    ];
    for a in rt.attributes.iter().filter(|a| a.filterable) {
        params.push(query(
            &format!("filter[{}]", a.name),
            format!("Exact match on `{}`.", a.name),
            attribute_schema(a),
        ));
    }
    for r in rt.to_one() {
        params.push(query(
            &format!("filter[{}]", r.name),
            format!("Only {} of this {}.", rt.name, singular(r.target())),
            json!({"type": "string", "format": "uuid"}),
        ));
    }
    params.extend(single_params(rt));
    params
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
        READ_ERRORS,
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

fn attribute_schema(a: &Attribute) -> Value {
    let mut s = match a.kind {
        Kind::Text => json!({"type": "string"}),
        Kind::NullableText => json!({"type": ["string", "null"]}),
        Kind::Bool => json!({"type": "boolean"}),
        Kind::Integer => json!({"type": "integer", "minimum": a.min}),
        Kind::Timestamp => json!({"type": "string", "format": "date-time", "readOnly": true}),
    };
    if matches!(a.kind, Kind::Text | Kind::NullableText) {
        if a.min > 0 {
            s["minLength"] = json!(a.min);
        }
        if a.max < i64::MAX {
            s["maxLength"] = json!(a.max);
        }
    }
    s["description"] = json!(a.doc);
    s
}

fn identifier(rt: &ResourceType) -> Value {
    json!({"type": "object", "properties": {"type": {"const": rt.name}, "id": {"type": "string"}}, "required": ["type", "id"]})
}

fn linkage_data(rel: &Relationship) -> Value {
    let target = identifier(rel.target());
    if rel.is_to_one() {
        json!({"oneOf": [{"type": "null"}, target]})
    } else {
        json!({"type": "array", "items": target})
    }
}

fn add_schemas(schemas: &mut Map<String, Value>, rt: &'static ResourceType) {
    let t = rt.name;
    let attrs: Map<String, Value> = rt.attributes.iter().map(|a| (a.name.to_owned(), attribute_schema(a))).collect();
    let links = json!({"type": "object", "properties": {"self": {"type": "string"}, "related": {"type": "string"}}});
    let rels: Map<String, Value> = rt
        .relationships
        .iter()
        .map(|r| {
            let required = if r.is_to_one() { json!(["links", "data"]) } else { json!(["links"]) };
            (r.name.to_owned(), json!({"type": "object", "properties": {"links": links, "data": linkage_data(r)}, "required": required}))
        })
        .collect();
    let resource = json!({"type": "object", "description": rt.doc, "properties": {
        "type": {"const": t}, "id": {"type": "string", "format": "uuid"},
        "attributes": {"type": "object", "properties": attrs, "additionalProperties": false},
        "relationships": {"type": "object", "properties": rels, "additionalProperties": false},
        "links": {"type": "object", "properties": {"self": {"type": "string"}}, "required": ["self"]}},
        "required": ["type", "id", "links"], "additionalProperties": false});
    let included = json!({"type": "array", "items": {"type": "object", "required": ["type", "id"]}});
    schemas.insert(format!("{t}_resource"), resource);
    schemas.insert(
        format!("{t}_document"),
        json!({"type": "object", "properties": {"jsonapi": schema_ref("jsonapi"), "data": {"oneOf": [{"type": "null"}, schema_ref(&format!("{t}_resource"))]},
            "included": included, "links": schema_ref("links")}, "required": ["jsonapi", "data"]}),
    );
    schemas.insert(
        format!("{t}_collection"),
        json!({"type": "object", "properties": {"jsonapi": schema_ref("jsonapi"), "data": {"type": "array", "items": schema_ref(&format!("{t}_resource"))},
            "included": included, "meta": {"type": "object", "properties": {"page": schema_ref("page_meta")}, "required": ["page"]},
            "links": schema_ref("links")}, "required": ["jsonapi", "data", "meta", "links"]}),
    );

    let writable: Map<String, Value> =
        rt.attributes.iter().filter(|a| !a.read_only()).map(|a| (a.name.to_owned(), attribute_schema(a))).collect();
    let required: Vec<&str> = rt.attributes.iter().filter(|a| a.required).map(|a| a.name).collect();
    let rel_bodies: Map<String, Value> = rt
        .relationships
        .iter()
        .map(|r| {
            (
                r.name.to_owned(),
                json!({"type": "object", "properties": {"data": linkage_data(r)}, "required": ["data"]}),
            )
        })
        .collect();
    let required_rels: Vec<&str> = rt.to_one().filter(|r| !r.fk.nullable).map(|r| r.name).collect();
    let data = |with_id: bool, required: &[&str], required_rels: &[&str]| {
        let mut d = json!({"type": "object", "properties": {"type": {"const": t},
            "attributes": {"type": "object", "properties": writable, "required": required},
            "relationships": {"type": "object", "properties": rel_bodies, "required": required_rels}}, "required": ["type"]});
        if with_id {
            d["properties"]["id"] = json!({"type": "string", "format": "uuid"});
            d["required"] = json!(["type", "id"]);
        }
        json!({"type": "object", "properties": {"data": d}, "required": ["data"]})
    };
    schemas.insert(format!("{t}_create"), data(false, &required, &required_rels));
    schemas.insert(format!("{t}_update"), data(true, &[], &[]));

    for rel in rt.relationships {
        schemas.insert(
            format!("{t}_{}_linkage", rel.name),
            json!({"type": "object", "properties": {"jsonapi": schema_ref("jsonapi"), "data": linkage_data(rel), "links": schema_ref("links")},
                "required": ["jsonapi", "data", "links"]}),
        );
        schemas.insert(
            format!("{t}_{}_linkage_request", rel.name),
            json!({"type": "object", "properties": {"data": linkage_data(rel)}, "required": ["data"]}),
        );
    }
}

fn error_schema() -> Value {
    json!({"type": "object", "properties": {"jsonapi": schema_ref("jsonapi"), "errors": {"type": "array", "minItems": 1, "items": {
        "type": "object", "properties": {
            "status": {"type": "string"}, "code": {"type": "string"}, "title": {"type": "string"}, "detail": {"type": "string"},
            "source": {"type": "object", "properties": {"pointer": {"type": "string"}, "parameter": {"type": "string"}}}},
        "required": ["status", "title", "detail"]}}}, "required": ["jsonapi", "errors"]})
}

fn page_meta_schema() -> Value {
    let int = json!({"type": "integer", "minimum": 0});
    json!({"type": "object", "properties": {"currentPage": int, "perPage": int, "from": int, "to": int, "total": int, "lastPage": int},
        "required": ["currentPage", "perPage", "from", "to", "total", "lastPage"]})
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}
