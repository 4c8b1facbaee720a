//! The component schemas of the OpenAPI document: each resource type's resource object, its
//! create and update bodies, linkage, errors and paging, all from the declarations.

use serde_json::{json, Map, Value};

use crate::resources::{Attribute, Kind, Relationship, ResourceType};

pub fn attribute_schema(a: &Attribute) -> Value {
    let mut s = match a.kind {
        Kind::Text => json!({"type": "string"}),
        Kind::NullableText => json!({"type": ["string", "null"]}),
        Kind::Bool => json!({"type": "boolean"}),
        Kind::Integer => json!({"type": "integer", "minimum": a.min, "maximum": i64::MAX}),
        Kind::Timestamp => json!({"type": "string", "format": "date-time", "readOnly": true}),
    };
    if matches!(a.kind, Kind::Text | Kind::NullableText) {
        // No U+0000 (PostgreSQL cannot store it); a required text (trimmed) needs a visible character.
        s["pattern"] = json!(super::patterns::text(a.min > 0));
        if a.min > 0 {
            s["minLength"] = json!(a.min);
        }
        if a.max < i64::MAX {
            s["maxLength"] = json!(a.max);
        }
        if a.max_bytes < i64::MAX {
            // JSON Schema counts characters; the server also bounds the bytes of UTF-8.
            s["x-max-bytes"] = json!(a.max_bytes);
        }
    }
    s["description"] = json!(a.doc);
    s
}

/// A filter's value: as the attribute's type, but any text (a value no resource can have
/// matches nothing, it is not refused).
pub fn filter_schema(a: &Attribute) -> Value {
    match a.kind {
        Kind::Bool | Kind::Integer => attribute_schema(a),
        _ => json!({"type": "string", "description": a.doc}),
    }
}

pub fn identifier(rt: &ResourceType) -> Value {
    json!({"type": "object", "properties": {"type": {"const": rt.name}, "id": {"type": "string"}}, "required": ["type", "id"]})
}

pub fn linkage_data(rel: &Relationship) -> Value {
    let target = identifier(rel.target());
    if rel.is_to_one() && !rel.fk.nullable {
        // A chapter always has a subject: null is refused (403).
        target
    } else if rel.is_to_one() {
        json!({"oneOf": [{"type": "null"}, target]})
    } else {
        json!({"type": "array", "items": target})
    }
}

pub fn add_schemas(schemas: &mut Map<String, Value>, rt: &'static ResourceType) {
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
        "meta": search_meta_schema(rt),
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
            "attributes": {"type": "object", "properties": writable, "required": required, "additionalProperties": false},
            "relationships": {"type": "object", "properties": rel_bodies, "required": required_rels, "additionalProperties": false}},
            "required": ["type"]});
        // `attributes` (and `relationships`) must be sent when they hold a required member.
        for (member, optional) in [("attributes", required.is_empty()), ("relationships", required_rels.is_empty())] {
            if !optional {
                d["required"].as_array_mut().expect("an array").push(json!(member));
            }
        }
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

pub fn error_schema() -> Value {
    json!({"type": "object", "properties": {"jsonapi": schema_ref("jsonapi"), "errors": {"type": "array", "minItems": 1, "items": {
        "type": "object", "properties": {
            "status": {"type": "string"}, "code": {"type": "string"}, "title": {"type": "string"}, "detail": {"type": "string"},
            "source": {"type": "object", "properties": {"pointer": {"type": "string"}, "parameter": {"type": "string"}}}},
        "required": ["status", "title", "detail"]}}}, "required": ["jsonapi", "errors"]})
}

pub fn page_meta_schema() -> Value {
    let int = json!({"type": "integer", "minimum": 0});
    json!({"type": "object", "properties": {"currentPage": int, "perPage": int, "from": int, "to": int, "total": int, "lastPage": int},
        "required": ["currentPage", "perPage", "from", "to", "total", "lastPage"]})
}

pub fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// A resource's `meta` in the results of `filter[search]`: where a term matched, and an
/// excerpt with the matches marked.
fn search_meta_schema(rt: &ResourceType) -> Value {
    let attrs: Vec<&str> = crate::search::columns(rt).map(|(a, _)| a.name).collect();
    json!({"type": "object", "description": "Only in the results of `filter[search]`.", "properties": {"search": {
        "type": "object", "properties": {
            "attribute": {"enum": attrs, "description": "The first searchable attribute in which a term matches."},
            "excerpt": {"type": "string", "description": "Its text around the first match, HTML-escaped, matches in <mark>...</mark>."}},
        "required": ["attribute", "excerpt"], "additionalProperties": false}},
        "additionalProperties": false})
}
