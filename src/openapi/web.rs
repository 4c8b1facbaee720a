//! What every path gains from the HTTP layer (`src/http/web.rs`, `conditional.rs`): `HEAD` for
//! each `GET`, `OPTIONS` everywhere, entity tags with 304, and `If-Match` with 412/428 on the
//! writes to existing resources and relationships.

use serde_json::{json, Map, Value};

/// Adds `HEAD`, `OPTIONS` and the conditional-request members to every path item of `paths`.
pub fn add_web(paths: &mut Map<String, Value>) {
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else { continue };
        let tagged = path != "/openapi.json";
        if let Some(get) = item.get_mut("get") {
            if tagged {
                conditional_get(get);
            }
            let head = head_of(get);
            item.insert("head".into(), head);
        }
        for method in ["patch", "delete", "post"] {
            let Some(op) = item.get_mut(method) else { continue };
            // Atomic operations answer no tag and take their preconditions per operation.
            if path == "/operations" {
                continue;
            }
            // POST on a collection creates; everywhere else a write changes what exists.
            let creates = method == "post" && path.matches('/').count() == 1;
            if !creates {
                conditional_write(op);
            }
            tag_success(op);
        }
        item.insert("options".into(), options(path));
    }
}

fn etag_header() -> Value {
    json!({"ETag": {"description": "The entity tag of the document (strong; compressed responses append -gz or -br).",
        "schema": {"type": "string"}}})
}

fn header_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "header", "required": false, "description": description, "schema": {"type": "string"}})
}

fn params(op: &mut Value) -> &mut Vec<Value> {
    if !op["parameters"].is_array() {
        op["parameters"] = json!([]);
    }
    op["parameters"].as_array_mut().expect("made an array above")
}

fn conditional_get(get: &mut Value) {
    params(get).push(header_param(
        "If-None-Match",
        "Entity tags the client holds (or *): 304 without a body when one is current.",
    ));
    get["responses"]["200"]["headers"] = etag_header();
    get["responses"]["304"] =
        json!({"description": "Not Modified: the tag sent is current.", "headers": etag_header()});
}

fn conditional_write(op: &mut Value) {
    params(op).push(header_param(
        "If-Match",
        "The entity tag of the target as last read (or * for any existing version): 412 when it is no longer current. \
         Required (428 without it) when the server runs with --require-if-match.",
    ));
    op["responses"]["412"] = json!({"$ref": "#/components/responses/412"});
    op["responses"]["428"] = json!({"$ref": "#/components/responses/428"});
}

fn tag_success(op: &mut Value) {
    let Some(responses) = op["responses"].as_object_mut() else { return };
    for (status, r) in responses.iter_mut() {
        if status.starts_with('2') {
            let headers = r.as_object_mut().map(|r| r.entry("headers").or_insert_with(|| json!({})));
            if let Some(Value::Object(h)) = headers {
                h.extend(etag_header().as_object().cloned().unwrap_or_default());
            }
        }
    }
}

/// `HEAD`: the `GET`'s parameters and statuses, no bodies.
fn head_of(get: &Value) -> Value {
    let mut head = get.clone();
    let id = get["operationId"].as_str().unwrap_or("get");
    head["operationId"] = json!(format!("head{}", id.strip_prefix("get").unwrap_or(id)));
    head["summary"] = json!("The headers of the GET, without its body.");
    if let Some(responses) = head["responses"].as_object_mut() {
        for r in responses.values_mut() {
            if let Some(r) = r.as_object_mut() {
                r.remove("content");
                if r.contains_key("$ref") {
                    let status = r["$ref"].as_str().and_then(|s| s.rsplit('/').next()).unwrap_or("").to_owned();
                    *r = Map::from_iter([("description".to_owned(), json!(format!("Error {status}, no body.")))]);
                }
            }
        }
    }
    head
}

fn options(path: &str) -> Value {
    let id = path.trim_start_matches('/').replace(['/', '{', '}', '.'], "_");
    // Answered from the path's shape: any id, looked up or not.
    let params = if path.contains("{id}") {
        json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}])
    } else {
        json!([])
    };
    json!({
        "operationId": format!("options_{id}"),
        "parameters": params,
        "summary": "The methods of this path; a CORS preflight from an origin of --cors-origin gets its permission (no token needed).",
        "security": [],
        "responses": {"204": {"description": "The methods, in Allow.", "headers": {
            "Allow": {"schema": {"type": "string"}},
            "Access-Control-Allow-Origin": {"description": "On a preflight from a configured origin.", "schema": {"type": "string"}},
            "Access-Control-Allow-Methods": {"description": "On a preflight from a configured origin.", "schema": {"type": "string"}},
        }}},
    })
}
