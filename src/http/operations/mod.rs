//! `POST /v1/operations`: the JSON:API Atomic Operations extension
//! (<https://jsonapi.org/ext/atomic>). Several writes (`add`, `update`, `remove` of resources
//! and of relationships) run in order as one transaction: all of them are stored, or none.
//!
//! Each operation goes through the same parsing and store code as the single-resource
//! endpoints, so every rule of those holds inside operations; a failing operation's errors
//! point into it (`/atomic:operations/N/...`). A resource created earlier in the request can be
//! named by its `lid` (local id) wherever an `id` is taken.

mod batch;
mod refs;

use serde_json::{Map, Value as Json};
use warp::http::header::{HeaderValue, CONTENT_TYPE};
use warp::http::{Method, StatusCode};
use warp::reply::Response;

use self::refs::{escape, href, reference, resource_type, Lids, Target};
use super::conditional::IfMatch;
use super::read::{current_tag, parse_id};
use super::related::{write_linkage, LinkageWrite};
use super::reply::{check_accept_ext, check_content_type_ext, document, no_content, read_body, JSONAPI};
use super::{Req, OPERATIONS};
use crate::app::App;
use crate::error::{Error, Problem, Result};
use crate::jsonapi::body::{self, Mode};
use crate::render::response;
use crate::render::Base;
use crate::resources::ResourceType;
use crate::store::select::Record;
use crate::store::{write, Tx};

pub use crate::jsonapi::{ATOMIC, MAX_OPERATIONS};
const MEMBERS: [&str; 5] = ["op", "ref", "href", "data", "meta"];

/// What an operation returns: the resource it created or updated, or nothing.
type Outcome = Option<(&'static ResourceType, Record)>;

/// An operation as the request states it, with the search words of the resource it writes
/// computed beforehand: on the blocking pool, not on the one writer, where a megabyte of text
/// would hold every other write.
pub struct Op {
    json: Map<String, Json>,
    words: Vec<(&'static str, crate::store::Value)>,
}

impl std::ops::Deref for Op {
    type Target = Map<String, Json>;
    fn deref(&self) -> &Map<String, Json> {
        &self.json
    }
}

pub async fn operations(app: &App, req: Req) -> Result<Response> {
    if req.method != Method::POST {
        return Err(Error::method_not_allowed(OPERATIONS.methods));
    }
    check_accept_ext(&req.headers, Some(ATOMIC))?;
    check_content_type_ext(&req.headers, ATOMIC)?;
    if let Some(q) = req.query.as_deref().filter(|q| !q.is_empty()) {
        let name = q.split('&').next().unwrap_or(q).split('=').next().unwrap_or(q);
        let name = form_urlencoded::parse(name.as_bytes()).next().map_or(name.to_owned(), |(k, _)| k.into_owned());
        return Err(Problem::bad_param(name, "`/operations` takes no query parameters.").into());
    }
    let base = app.base(&req.headers)?;
    let ctx = req.context();
    let bytes = read_body(&req.headers, req.body, app.body_limit, app.body_timeout).await?;
    let ops = super::heavy::run(bytes.len(), app.request_timeout, move || parse(&bytes)).await?;
    let required = app.require_if_match;
    let outcomes = app
        .db
        .write(&ctx, move |tx| {
            let mut lids = Lids::default();
            let mut outcomes = Vec::with_capacity(ops.len());
            let mut i = 0;
            while i < ops.len() {
                // A run of adds of one type goes in as one statement when it can; otherwise (or
                // when one of them fails) one by one, which says which operation fails and why.
                let run = batch::run_len(&ops[i..]);
                if run > 1 {
                    if let Some(added) = batch::add_run(tx, &ops[i..i + run], &mut lids)? {
                        outcomes.extend(added);
                        i += run;
                        continue;
                    }
                }
                for (j, op) in ops.iter().enumerate().skip(i).take(run.max(1)) {
                    let at = format!("/atomic:operations/{j}");
                    outcomes.push(apply(tx, &base, op, &mut lids, required).map_err(|e| e.within(&at))?);
                }
                i += run.max(1);
            }
            Ok((base.clone(), outcomes))
        })
        .await?;
    let (base, outcomes) = outcomes;
    if outcomes.iter().all(Option::is_none) {
        return Ok(no_content());
    }
    let results: Vec<_> = outcomes.iter().map(|o| o.as_ref().map(|(rt, rec)| (*rt, rec))).collect();
    let mut r = document(StatusCode::OK, response::atomic_results(&base, &results));
    if let Ok(v) = HeaderValue::from_str(&format!("{JSONAPI}; ext=\"{ATOMIC}\"")) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    Ok(r)
}

/// The operations of the request document, each an object of known members.
fn parse(bytes: &[u8]) -> Result<Vec<Op>> {
    let doc: Json = serde_json::from_slice(bytes)
        .map_err(|e| Problem::malformed("", format!("The body is not valid JSON ({e}); send a JSON:API document.")))?;
    let Json::Object(mut doc) = doc else {
        return Err(Problem::malformed("", "The body must be a JSON object with `atomic:operations`.").into());
    };
    let Some(Json::Array(ops)) = doc.remove("atomic:operations") else {
        return Err(Problem::malformed("", "The document needs `atomic:operations`, an array of operations.").into());
    };
    if ops.is_empty() {
        return Err(Problem::malformed("/atomic:operations", "`atomic:operations` holds no operation.").into());
    }
    if ops.len() > MAX_OPERATIONS {
        return Err(Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_operations",
            format!("At most {MAX_OPERATIONS} operations a request; this one has {}. Split it.", ops.len()),
        )
        .at("/atomic:operations")
        .into());
    }
    ops.into_iter()
        .enumerate()
        .map(|(i, op)| {
            let at = format!("/atomic:operations/{i}");
            let Json::Object(op) = op else {
                return Err(Problem::malformed(at, "An operation must be an object.").into());
            };
            if let Some(name) = op.keys().find(|k| !MEMBERS.contains(&k.as_str())) {
                return Err(Problem::malformed(
                    format!("{at}/{}", escape(name)),
                    format!("An operation has no member `{name}`; it takes {}.", MEMBERS.join(", ")),
                )
                .into());
            }
            let data = op.get("data").filter(|d| d.get("attributes").is_some());
            let rt = data.and_then(|d| d.get("type")).and_then(Json::as_str).and_then(crate::resources::by_name);
            let words = match (rt, data) {
                (Some(rt), Some(data)) => body::words_in(rt, data),
                _ => Vec::new(),
            };
            Ok(Op { json: op, words })
        })
        .collect()
}

fn apply(tx: &mut dyn Tx, base: &Base, op: &Op, lids: &mut Lids, required: bool) -> Result<Outcome> {
    let kind = match op.get("op").and_then(Json::as_str) {
        Some(k @ ("add" | "update" | "remove")) => k,
        _ => return Err(Problem::malformed("/op", "`op` must be \"add\", \"update\" or \"remove\".").into()),
    };
    let target = match (op.get("ref"), op.get("href")) {
        (Some(_), Some(_)) => {
            return Err(Problem::malformed("", "An operation takes `ref` or `href`, not both.").into())
        }
        (Some(r), None) => Some(reference(r, lids, false)?),
        (None, Some(h)) => Some(href(h, base, lids)?),
        (None, None) => None,
    };
    // Like `If-Match`, required (with --require-if-match) on writes to what exists already.
    let writes_existing = kind != "add" || target.as_ref().is_some_and(|t| t.rel.is_some());
    let cond = precondition(op, required && writes_existing)?;
    match (kind, target) {
        ("add", target @ (None | Some(Target { id: None, rel: None, .. }))) => {
            let (rt, lid, changes) = prepare_add(op, target.map(|t| t.rt), lids)?;
            let rec = write::create(tx, rt, &changes)?;
            if let Some(lid) = lid {
                lids.0.insert(lid, (rt, rec.id.clone()));
            }
            Ok(Some((rt, rec)))
        }
        ("update", target @ (None | Some(Target { rel: None, .. }))) => {
            let (rt, mut data) = resource_object(op, target.as_ref().map(|t| t.rt))?;
            let lid = data.remove("lid");
            let id = match (data.get("id"), lid) {
                (Some(Json::String(id)), _) => parse_id(rt, id).map_err(|e| e.within("/data/id"))?,
                (Some(_), _) => return Err(Problem::malformed("/data/id", "`id` must be a string.").into()),
                (None, Some(lid)) => lids.resolve(rt, &lid, "/data/lid")?,
                (None, None) => {
                    return Err(Problem::malformed("/data", "An update needs `id` (or `lid`) in `data`.").into())
                }
            };
            if let Some(Target { id: Some(ref_id), .. }) = &target {
                if *ref_id != id {
                    return Err(Error::conflict("/data/id", format!("`data` names {id}, `ref` names {ref_id}.")));
                }
            }
            data.insert("id".into(), Json::String(id.clone()));
            lids.resolve_relationships(rt, &mut data)?;
            let words = words_for(op, rt);
            let changes = body::resource_data_with(rt, &Json::Object(data), Mode::Update(&id), words)?;
            if !cond.is_absent() {
                cond.check(current_tag(tx, base, rt, &id)?.as_deref()).map_err(|e| e.within("/meta/ifMatch"))?;
            }
            Ok(Some((rt, write::update(tx, rt, &id, &changes)?)))
        }
        ("remove", Some(Target { rt, id: Some(id), rel: None })) => {
            if op.contains_key("data") {
                return Err(Problem::malformed("/data", "Removing a resource takes no `data`.").into());
            }
            if !cond.is_absent() {
                cond.check(current_tag(tx, base, rt, &id)?.as_deref()).map_err(|e| e.within("/meta/ifMatch"))?;
            }
            write::delete(tx, rt, &id)?;
            Ok(None)
        }
        (kind, Some(Target { rt, id: Some(id), rel: Some(rel) })) => {
            let how = match (kind, rel.is_to_one()) {
                ("update", _) => LinkageWrite::Replace,
                ("add", false) => LinkageWrite::Add,
                ("remove", false) => LinkageWrite::Remove,
                _ => {
                    return Err(Problem::malformed(
                        "/op",
                        format!("`{}` is to-one: its linkage is replaced with \"update\", not \"{kind}\".", rel.name),
                    )
                    .into())
                }
            };
            let Some(data) = op.get("data") else {
                return Err(Problem::malformed("", "A relationship operation needs `data`, the linkage.").into());
            };
            let mut data = data.clone();
            lids.resolve_linkage(rel, &mut data, "/data")?;
            let linkage = body::relationship_data(rel, &data)?;
            write_linkage(tx, base, rt, &id, &linkage, how, &cond).map_err(|e| match e.status {
                StatusCode::PRECONDITION_FAILED => e.within("/meta/ifMatch"),
                _ => e,
            })?;
            Ok(None)
        }
        ("remove", _) => {
            Err(Problem::malformed("", "\"remove\" needs `ref` (or `href`) naming a resource or a relationship.")
                .into())
        }
        (_, _) => Err(Problem::malformed(
            "/ref",
            "\"add\" takes no `ref` but to a relationship; \"update\" takes `ref` to the resource or a relationship.",
        )
        .into()),
    }
}

/// What an `add` of a resource creates: its type, its `lid` (not yet taken), and what it sets
/// (the `lid`s of its linkage resolved).
fn prepare_add(
    op: &Op,
    expected: Option<&'static ResourceType>,
    lids: &Lids,
) -> Result<(&'static ResourceType, Option<String>, body::Changes)> {
    let (rt, mut data) = resource_object(op, expected)?;
    let lid = match data.remove("lid") {
        Some(Json::String(lid)) if lids.0.contains_key(&lid) => {
            return Err(Error::conflict("/data/lid", format!("`lid` {lid} is already used in this request.")))
        }
        Some(Json::String(lid)) => Some(lid),
        Some(_) => return Err(Problem::malformed("/data/lid", "`lid` must be a string.").into()),
        None => None,
    };
    lids.resolve_relationships(rt, &mut data)?;
    let changes = body::resource_data_with(rt, &Json::Object(data), Mode::Create, words_for(op, rt))?;
    Ok((rt, lid, changes))
}

/// The operation's `meta.ifMatch`: the entity tag the target must still have (as `If-Match`
/// on the single endpoints); 428 when the server requires it and it is missing.
fn precondition(op: &Map<String, Json>, required: bool) -> Result<IfMatch> {
    if op.get("meta").is_some_and(|m| !m.is_object()) {
        return Err(Problem::malformed("/meta", "`meta` must be an object.").into());
    }
    let value = op.get("meta").and_then(|m| m.get("ifMatch"));
    match value {
        None | Some(Json::String(_)) => {
            IfMatch::parse(value.and_then(Json::as_str), required).map_err(|e| e.within("/meta"))
        }
        Some(_) => Err(Problem::malformed("/meta/ifMatch", "`meta.ifMatch` must be a string: an ETag, or *.").into()),
    }
}

/// The resource object in `data`, its type, and (when a `ref` names one) that its type is the
/// one expected.
fn resource_object(
    op: &Map<String, Json>,
    expected: Option<&'static ResourceType>,
) -> Result<(&'static ResourceType, Map<String, Json>)> {
    let Some(Json::Object(data)) = op.get("data") else {
        return Err(Problem::malformed("/data", "`data` must be a resource object.").into());
    };
    let Some(name) = data.get("type").and_then(Json::as_str) else {
        return Err(Problem::malformed("/data", "The resource object needs a `type` member (a string).").into());
    };
    let rt = resource_type(name, "/data/type")?;
    if let Some(expected) = expected.filter(|e| e.name != rt.name) {
        return Err(Error::conflict("/data/type", format!("`ref` names {}, `data` is of {}.", expected.name, rt.name)));
    }
    Ok((rt, data.clone()))
}

/// The words computed beforehand for `op`, when they were computed for a resource of `rt`.
fn words_for(op: &Op, rt: &'static ResourceType) -> Option<Vec<(&'static str, crate::store::Value)>> {
    let typed = op.get("data").and_then(|d| d.get("type")).and_then(Json::as_str) == Some(rt.name);
    typed.then(|| op.words.clone())
}
