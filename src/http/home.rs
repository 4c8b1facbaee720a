//! `GET /v1`: the API's entry point. Who the token is (its name and scope) in `meta.caller`,
//! so that a client (the console among them) can tell a read-only token before it offers a
//! write; and where every collection, the change feed and the OpenAPI document are, in
//! `meta.resources` (JSON:API 1.0 allows no other top-level link than `self` in a document
//! without `data`).

use serde_json::{json, Map, Value};
use warp::http::StatusCode;
use warp::reply::Response;

use super::reply::{check_accept, document};
use super::Req;
use crate::app::App;
use crate::error::Result;
use crate::resources::TYPES;

pub async fn home(app: &App, req: Req) -> Result<Response> {
    check_accept(&req.headers)?;
    super::revisions::params(req.query.as_deref(), &[], "none (this document takes no parameter)")?;
    let base = app.base(&req.headers)?;
    let base = base.as_str();
    let mut resources = Map::new();
    for rt in TYPES {
        resources.insert(rt.name.into(), json!(format!("{base}/{}", rt.name)));
    }
    resources.insert("revisions".into(), json!(format!("{base}/revisions")));
    resources.insert("openapi".into(), json!(format!("{base}/openapi.json")));
    let caller = req
        .caller
        .as_ref()
        .map_or(Value::Null, |c| json!({"name": &*c.name, "scope": c.scope.as_str(), "writes": c.scope.writes()}));
    let doc = json!({"jsonapi": {"version": "1.0"}, "meta": {"caller": caller, "resources": resources},
        "links": {"self": base}});
    Ok(document(StatusCode::OK, doc.to_string()))
}
