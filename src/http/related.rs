//! Handlers of `/{type}/{id}/{rel}` and `/{type}/{id}/relationships/{rel}`.
//!
//! What they do follows the relationship's cardinality; the queries are in
//! [`crate::store::relations`].

use warp::http::{Method, StatusCode};
use warp::reply::Response;

use super::read::{self, parse_id, render_one};
use super::reply::{check_accept, check_content_type, document, no_content, read_body};
use super::Req;
use crate::app::App;
use crate::error::{Error, Result};
use crate::jsonapi::body::{self, singular};
use crate::jsonapi::response::{self, Included, RequestUrl};
use crate::jsonapi::{Accepts, Query};
use crate::resources::{Relationship, ResourceType};
use crate::store::relations;
use crate::store::select::{must_exist, Record, Selection};
use crate::store::snapshot;

/// `GET /{type}/{id}/{rel}`: the related resource (to-one) or a page of them (to-many).
pub async fn related(app: &App, rt: &'static ResourceType, raw_id: &str, rel: &str, req: Req) -> Result<Response> {
    let rel = relationship_named(rt, rel)?;
    if req.method != Method::GET {
        return Err(Error::method_not_allowed("GET"));
    }
    let id = parse_id(rt, raw_id)?;
    let target = rel.target();
    if !rel.is_to_one() {
        return read::collection(app, target, req, Some((rel, id))).await;
    }
    check_accept(&req.headers)?;
    let q = Query::parse(req.query.as_deref(), target, Accepts::Single)?;
    let base = app.base(&req.headers)?;
    let url = RequestUrl::new(&base, req.path.as_str(), req.query);
    let body = app
        .db
        .read(move |tx| {
            snapshot(tx, |tx| match relations::parent_id(tx, rel, &id)? {
                Some(parent) => render_one(tx, &base, &url, target, &q, &parent),
                None => {
                    let sel = Selection::new(target, q.fieldset(target), &q.include);
                    Ok(response::resource(&base, &url, &sel, None::<&Record>, &Included::new()))
                }
            })
        })
        .await?;
    Ok(document(StatusCode::OK, body))
}

/// `/{type}/{id}/relationships/{rel}`: read or write the linkage.
pub async fn relationship(app: &App, rt: &'static ResourceType, raw_id: &str, rel: &str, req: Req) -> Result<Response> {
    let rel = relationship_named(rt, rel)?;
    let allowed: &[Method] = if rel.is_to_one() {
        &[Method::GET, Method::PATCH]
    } else {
        &[Method::GET, Method::PATCH, Method::POST, Method::DELETE]
    };
    if !allowed.contains(&req.method) {
        return Err(Error::method_not_allowed(if rel.is_to_one() { "GET, PATCH" } else { "GET, PATCH, POST, DELETE" }));
    }
    let id = parse_id(rt, raw_id)?;
    check_accept(&req.headers)?;
    Query::parse(req.query.as_deref(), rt, Accepts::Nothing)?;
    let base = app.base(&req.headers)?;
    if req.method == Method::GET {
        let body = app
            .db
            .read(move |tx| {
                let ids = relations::linkage(tx, rel, &id)?;
                Ok(response::linkage(&base, rt.name, &id, rel, &ids))
            })
            .await?;
        return Ok(document(StatusCode::OK, body));
    }

    check_content_type(&req.headers)?;
    let bytes = read_body(&req.headers, req.body, app.body_limit).await?;
    let linkage = body::relationship(rel, &bytes)?;
    let method = req.method;
    let body = app
        .db
        .write(move |tx| {
            let now = crate::time::now_ms();
            if rel.is_to_one() {
                relations::set_parent(tx, &linkage, &id)?;
            } else {
                must_exist(tx, rt, &id)?;
                relations::check_targets_exist(tx, std::slice::from_ref(&linkage))?;
                match method {
                    Method::PATCH => relations::replace_children(tx, &linkage, &id, now)?,
                    Method::POST => relations::add_children(tx, &linkage, &id, now)?,
                    _ => relations::remove_children(tx, &linkage, &id, now)?,
                }
            }
            if method != Method::PATCH {
                return Ok(None);
            }
            let ids = relations::linkage(tx, rel, &id)?;
            Ok(Some(response::linkage(&base, rt.name, &id, rel, &ids)))
        })
        .await?;
    Ok(match body {
        Some(body) => document(StatusCode::OK, body),
        None => no_content(),
    })
}

fn relationship_named(rt: &'static ResourceType, name: &str) -> Result<&'static Relationship> {
    rt.relationship(name).ok_or_else(|| {
        let names: Vec<&str> = rt.relationships.iter().map(|r| r.name).collect();
        Error::not_found(format!("A {} has no relationship `{name}`; it has: {}.", singular(rt), names.join(", ")))
    })
}
