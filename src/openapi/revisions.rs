//! The history of every change (`src/http/revisions.rs`): the change feed, one revision, and
//! a resource's revisions. Written by hand: revisions are not a declared resource type (they
//! are read-only, and no write, bundle or search goes through them).

use serde_json::{json, Map, Value};

use super::READ_ERRORS;
use crate::http::revisions::MAX_FEED_PAGE;
use crate::jsonapi::query::MAX_PAGE_SIZE;
use crate::jsonapi::JSONAPI;
use crate::resources::TYPES;

/// The schema of a revision's resource object.
fn revision_schema() -> Value {
    let types: Vec<&str> = TYPES.iter().map(|t| t.name).collect();
    json!({"type": "object", "required": ["type", "id", "attributes", "relationships"], "properties": {
        "type": {"const": "revisions"},
        "id": {"type": "string", "format": "uuid"},
        "attributes": {"type": "object", "required": ["action", "number", "at", "by", "changes"], "properties": {
            "action": {"enum": ["create", "update", "delete", "restore"]},
            "number": {"type": "integer", "minimum": 1, "description": "The revision's number among its resource's revisions: 1, 2, ..."},
            "at": {"type": "string", "format": "date-time", "description": "When its write committed."},
            "by": {"type": "string", "description": "Who wrote: a database token's name, `config`, `bootstrap`, or the command (`import`, `load`, `generate`, `copy`, `migration`)."},
            "changes": {"type": "object", "description": "Each attribute and to-one relationship that changed: `{\"before\": ..., \"after\": ...}`; a relationship's values are resource identifiers or null. A create holds every member (before null), a delete every member (after null).",
                "additionalProperties": {"type": "object", "required": ["before", "after"], "properties": {"before": {}, "after": {}}}},
        }},
        "relationships": {"type": "object", "properties": {"resource": {"type": "object", "properties": {
            "data": {"type": "object", "properties": {"type": {"enum": types}, "id": {"type": "string"}}},
            "links": {"$ref": "#/components/schemas/links"}}}}},
        "meta": {"type": "object", "properties": {"cursor": {"type": "string", "description": "Its place in the change feed, for `page[after]`."}}},
        "links": {"$ref": "#/components/schemas/links"},
    }})
}

fn ok(description: &str, data: Value) -> Value {
    json!({"description": description, "content": {JSONAPI: {"schema": {"type": "object", "required": ["jsonapi", "data"],
        "properties": {"jsonapi": {"$ref": "#/components/schemas/jsonapi"}, "data": data,
            "meta": {"type": "object"}, "links": {"$ref": "#/components/schemas/links"}}}}}})
}

fn responses(success: Value, extra: &[u16]) -> Map<String, Value> {
    let mut r = Map::new();
    r.insert("200".into(), success);
    for s in READ_ERRORS.iter().chain(extra) {
        r.insert(s.to_string(), json!({"$ref": format!("#/components/responses/{s}")}));
    }
    r
}

/// A feed cursor, as the feed gives them.
fn cursor() -> Value {
    json!({"type": "string", "pattern": "^[0-9]+$"})
}

/// A comma-separated list of resource types.
fn types() -> Value {
    let one = TYPES.iter().map(|t| t.name).collect::<Vec<_>>().join("|");
    json!({"type": "string", "pattern": format!("^({one})(,({one}))*$")})
}

fn param(name: &str, description: String, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description, "schema": schema})
}

/// Adds the paths and the `revision` schema.
pub fn add(paths: &mut Map<String, Value>, schemas: &mut Map<String, Value>) {
    schemas.insert("revision".into(), revision_schema());
    let one = json!({"$ref": "#/components/schemas/revision"});
    let list = json!({"type": "array", "items": one});
    let mut feed_ok = ok(
        "Revisions after the cursor, in commit order; `links.next` always (the same cursor when nothing is new).",
        list.clone(),
    );
    feed_ok["content"][JSONAPI]["schema"]["properties"]["meta"] = json!({"type": "object", "properties": {
        "head": {"type": "string", "description": "The cursor of the newest revision in the feed."},
        "feed": {"type": "string", "description": "The id of this database's feed: a cursor means something in this feed only (a follower keeps it beside its cursor)."},
        "follow": {"type": "object", "description": "Present when this catalogue follows another coursed's: what it follows and how far behind it is.", "properties": {
            "upstream": {"type": "string", "description": "The address followed, or `bundles` for deltas imported by hand."},
            "cursor": {"type": "string", "description": "The upstream's cursor up to which every revision is applied here."},
            "applied_at": {"type": ["string", "null"], "format": "date-time"},
            "head": {"type": "string", "description": "The upstream's newest cursor, as last heard (when a follower runs in this server)."},
            "lag": {"type": "number", "description": "Seconds since the oldest change known and not yet applied here (0: in step)."},
            "state": {"enum": ["starting", "catching up", "following", "polling", "unreachable", "stopped"]},
            "error": {"type": "string", "description": "Why the follower is stopped or cannot reach its upstream."},
        }},
    }});
    let mut feed_responses = responses(feed_ok, &[]);
    feed_responses.insert(
        "410".into(),
        json!({"description": "The revisions after this cursor were pruned.",
        "content": {JSONAPI: {"schema": {"$ref": "#/components/schemas/error_document"}}}}),
    );
    paths.insert("/revisions".into(), json!({"get": {
        "operationId": "getRevisions",
        "summary": "The change feed: every revision of every resource in commit order. A client that reads on from the last `links.next` it saw never misses a revision.",
        "tags": ["revisions"],
        "parameters": [
            param("page[after]", "A cursor (`meta.cursor` of a revision, or a `links.next`); the start of the feed when absent.".into(), cursor()),
            param("page[size]", format!("Revisions per page, 1 to {MAX_FEED_PAGE} (default 100)."), json!({"type": "integer", "minimum": 1, "maximum": MAX_FEED_PAGE, "default": 100})),
            param("filter[type]", "Only revisions of these types, comma-separated. A page examines at most 10,000 places of the feed; `links.next` goes on from the last one examined.".into(), types()),
        ],
        "responses": feed_responses,
    }}));
    let mut stream_responses = Map::new();
    stream_responses.insert("200".into(), json!({
        "description": "Server-sent events, for as long as the client reads: first `retry: 1000`, then one event per revision (`id:` its cursor, `event: revision`, `data:` the revision's resource object on one line), and a comment line every 15 s while quiet. A client that stops reading is dropped; it reconnects with `Last-Event-ID`.",
        "content": {"text/event-stream": {"schema": {"type": "object", "properties": {
            "id": {"type": "string", "description": "The revision's cursor."},
            "event": {"const": "revision"},
            "data": {"type": "string", "contentMediaType": "application/json", "description": "The revision's resource object."},
        }}}}}));
    for s in READ_ERRORS.iter().filter(|s| **s != 406).chain(&[410]) {
        let r = match s {
            410 => json!({"description": "The revisions after this cursor were pruned.",
                "content": {JSONAPI: {"schema": {"$ref": "#/components/schemas/error_document"}}}}),
            s => json!({"$ref": format!("#/components/responses/{s}")}),
        };
        stream_responses.insert(s.to_string(), r);
    }
    paths.insert("/revisions/stream".into(), json!({"get": {
        "operationId": "streamRevisions",
        "summary": "The change feed, live (server-sent events, for `EventSource`): without a cursor, what commits after the stream opened; with `Last-Event-ID` (or `after`), everything after that cursor first, without a gap. A change made through any replica arrives within a second. At most `--max-streams` at once (503 with `Retry-After` past them).",
        "tags": ["revisions"],
        "parameters": [
            param("after", "A cursor to resume after (`Last-Event-ID` wins when both are sent).".into(), cursor()),
            param("filter[type]", "Only revisions of these types, comma-separated.".into(), types()),
            {"name": "Last-Event-ID", "in": "header", "required": false, "description": "The `id` of the last event received (empty: none).", "schema": {"type": "string", "pattern": "^[0-9]*$"}},
        ],
        "responses": stream_responses,
    }}));
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "format": "uuid"}});
    paths.insert(
        "/revisions/{id}".into(),
        json!({"get": {
            "operationId": "getRevision", "summary": "One revision.", "tags": ["revisions"],
            "parameters": [id], "responses": responses(ok("The revision.", one), &[]),
        }}),
    );
    let restored = responses(
        ok("The resource as restored (a document of its own type).", json!({"type": "object"})),
        &[403, 409, 412, 428],
    );
    paths.insert("/revisions/{id}/restore".into(), json!({"post": {
        "operationId": "restoreRevision",
        "summary": "Brings the resource back to its state right after this revision: attributes and to-one relationships, re-created under its own id when it was deleted since. No body. Recorded as a new revision (`restore`); nothing is written when the resource is already in that state. `If-Match` is the resource's current ETag; `If-None-Match: *` restores only a resource that is deleted now (412 when it exists: someone brought it back meanwhile). 409 when it cannot be restored (the revision is a deletion, a related resource is gone, its `external_id` is taken): nothing changes.",
        "tags": ["revisions"],
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "format": "uuid"}}],
        "responses": restored,
    }}));
    for rt in TYPES {
        let t = rt.name;
        paths.insert(format!("/{t}/{{id}}/revisions"), json!({"get": {
            "operationId": format!("get_{t}_revisions"),
            "summary": format!("The revisions of one of the {t}, newest first; a deleted one keeps them (404 only for an id that never existed)."),
            "tags": [t],
            "parameters": [
                {"name": "id", "in": "path", "required": true, "schema": {"type": "string", "format": "uuid"}},
                param("page[number]", "Page number, from 1.".into(), json!({"type": "integer", "minimum": 1, "maximum": u64::MAX, "default": 1})),
                param("page[size]", format!("Page size, 1 to {MAX_PAGE_SIZE} (default 20)."), json!({"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 20})),
            ],
            "responses": responses(ok("A page of revisions.", list.clone()), &[]),
        }}));
    }
}
