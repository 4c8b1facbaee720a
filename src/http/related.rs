//! Handlers of `/{type}/{id}/{rel}` and `/{type}/{id}/relationships/{rel}`.
//!
//! What they do follows the relationship's cardinality; the queries are in
//! [`crate::store::relations`].

use warp::http::{Method, StatusCode};
use warp::reply::Response;

use super::conditional::{tagged, with_tag, IfMatch};
use super::large;
use super::read::{self, parse_id, render_one};
use super::reply::{check_accept, check_content_type, document, no_content, read_body};
use super::{Req, RELATED, TO_MANY, TO_ONE};
use crate::app::App;
use crate::error::{Error, Result};
use crate::jsonapi::body::{self, singular, Linkage};
use crate::jsonapi::{Accepts, Query};
use crate::render::response::{self, Included, RequestUrl};
use crate::render::{etag, Base};
use crate::resources::{Relationship, ResourceType};
use crate::store::relations;
use crate::store::select::{exists, lock_row, must_exist, Record, Selection};
use crate::store::{snapshot, Tx};

/// `GET /{type}/{id}/{rel}`: the related resource (to-one) or a page of them (to-many).
pub async fn related(app: &App, rt: &'static ResourceType, raw_id: &str, rel: &str, req: Req) -> Result<Response> {
    let rel = relationship_named(rt, rel)?;
    if req.method != Method::GET {
        return Err(Error::method_not_allowed(RELATED.methods));
    }
    let id = parse_id(rt, raw_id)?;
    let target = rel.target();
    if !rel.is_to_one() {
        return read::collection(app, target, req, Some((rel, id))).await;
    }
    check_accept(&req.headers)?;
    let q = Query::parse(req.query.as_deref(), target, Accepts::Single)?;
    let base = app.base(&req.headers)?;
    let url = RequestUrl::related(&base, rt.name, &id, rel.name, req.query);
    let (body, permit) = large::read(app, q.include.is_empty(), &q, |q| {
        let (base, url, id) = (base.clone(), url.clone(), id.clone());
        move |tx: &mut dyn Tx| {
            snapshot(tx, |tx| match relations::parent_id(tx, rel, &id)? {
                Some(parent) => render_one(tx, &base, &url, target, &q, &parent),
                None => {
                    let sel = Selection::new(target, q.fieldset(target), &q.include);
                    Ok(response::resource(&base, &url, &sel, None::<&Record>, &Included::new()))
                }
            })
        }
    })
    .await?;
    Ok(tagged(&req.headers, app.web.compression, large::body(body, permit)))
}

/// `/{type}/{id}/relationships/{rel}`: read or write the linkage.
pub async fn relationship(app: &App, rt: &'static ResourceType, raw_id: &str, rel: &str, req: Req) -> Result<Response> {
    let rel = relationship_named(rt, rel)?;
    let allow = if rel.is_to_one() { TO_ONE } else { TO_MANY };
    if !allow.allows(&req.method) || req.method == Method::OPTIONS {
        return Err(Error::method_not_allowed(allow.methods));
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
        return Ok(tagged(&req.headers, app.web.compression, body.into()));
    }

    check_content_type(&req.headers)?;
    let cond = IfMatch::of(&req.headers, app.require_if_match)?;
    let ctx = req.context();
    let bytes = read_body(&req.headers, req.body, app.body_limit, app.body_timeout).await?;
    let linkage = super::heavy::run(bytes.len(), app.request_timeout, move || body::relationship(rel, &bytes)).await?;
    let how = match req.method {
        Method::PATCH => LinkageWrite::Replace,
        Method::POST => LinkageWrite::Add,
        _ => LinkageWrite::Remove,
    };
    let (tag, body) = app.db.write(&ctx, move |tx| write_linkage(tx, &base, rt, &id, &linkage, how, &cond)).await?;
    // The new linkage document is the answer to PATCH; POST and DELETE answer 204.
    let body = (how == LinkageWrite::Replace).then_some(body);
    let r = match body {
        Some(body) => document(StatusCode::OK, body),
        None => no_content(),
    };
    Ok(with_tag(r, &tag))
}

/// What a write to a relationship does with the linkage sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkageWrite {
    /// PATCH: the linkage becomes the one sent (to-one or to-many).
    Replace,
    /// POST to a to-many relationship: the members sent are added.
    Add,
    /// DELETE from a to-many relationship: the members sent are removed.
    Remove,
}

/// Writes `linkage` to relationship `rel` of resource `id` of `rt`, when `cond` holds for the
/// current linkage document (compared as a GET would show it now, the resource's row locked);
/// returns the new linkage document and its tag (what the next `If-Match` names).
pub fn write_linkage(
    tx: &mut dyn Tx,
    base: &Base,
    rt: &'static ResourceType,
    id: &str,
    linkage: &Linkage,
    how: LinkageWrite,
    cond: &IfMatch,
) -> Result<(String, Vec<u8>)> {
    let rel = linkage.rel;
    let now = crate::time::now_ms();
    if !cond.is_absent() {
        lock_row(tx, rt, id)?;
        let current = match exists(tx, rt, id)? {
            true => Some(etag::bytes(&response::linkage(base, rt.name, id, rel, &relations::linkage(tx, rel, id)?))),
            false => None,
        };
        cond.check(current.as_deref())?;
    }
    if rel.is_to_one() {
        relations::set_parent(tx, linkage, id)?;
    } else {
        must_exist(tx, rt, id)?;
        relations::check_targets_exist(tx, std::slice::from_ref(linkage))?;
        match how {
            LinkageWrite::Replace => relations::replace_children(tx, linkage, id, now)?,
            LinkageWrite::Add => relations::add_children(tx, linkage, id, now)?,
            LinkageWrite::Remove => relations::remove_children(tx, linkage, id, now)?,
        }
    }
    let body = response::linkage(base, rt.name, id, rel, &relations::linkage(tx, rel, id)?);
    Ok((etag::bytes(&body), body))
}

pub fn relationship_named(rt: &'static ResourceType, name: &str) -> Result<&'static Relationship> {
    rt.relationship(name).ok_or_else(|| {
        let names: Vec<&str> = rt.relationships.iter().map(|r| r.name).collect();
        Error::not_found(format!("A {} has no relationship `{name}`; it has: {}.", singular(rt), names.join(", ")))
    })
}
