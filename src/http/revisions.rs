//! The history of every change as JSON:API (see `store/history.rs`):
//!
//! - `GET /v1/revisions?page[after]=CURSOR&page[size]=N&filter[type]=T,...`: the change feed,
//!   every revision in commit order, each with `meta.cursor`; `links.next` always, the same
//!   cursor again when nothing is new.
//! - `GET /v1/revisions/{id}`: one revision.
//! - `GET /v1/{type}/{id}/revisions`: a resource's revisions, newest first, paged as any
//!   collection; a deleted resource keeps them.
//! - `POST /v1/revisions/{id}/restore`: the resource as it was right after that revision.
//!
//! A revision is the resource type `revisions`, read-only: attributes `action`, `number`, `at`,
//! `by` and `changes` (`{"member": {"before": ..., "after": ...}}`, a to-one relationship as a
//! resource identifier), and a to-one relationship `resource` to what it is about.

use serde_json::{json, Value as Json};
use warp::http::header::IF_NONE_MATCH;
use warp::http::StatusCode;
use warp::reply::Response;

use super::conditional::{tagged, IfMatch};
use super::read::{current_tag, parse_id};
use super::reply::{check_accept, read_body};
use super::Req;
use crate::app::App;
use crate::error::{Error, Problem, Result};
use crate::jsonapi::query::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
use crate::jsonapi::{Accepts, Query};
use crate::render::Base;
use crate::resources::{self, ResourceType};
use crate::store::history::{self, revision_key, Revision};

/// The most bytes of changes one page of a resource's revisions holds (400 past them).
const RESOURCE_PAGE_BYTES: usize = 16 << 20;

/// The most revisions one page of the feed holds, and how many it holds unless asked.
pub const MAX_FEED_PAGE: u64 = 1000;
const DEFAULT_FEED_PAGE: u64 = 100;

/// A feed cursor as clients see it: opaque, the place in the feed.
fn cursor(seq: i64) -> String {
    seq.to_string()
}

fn parse_cursor(raw: &str) -> Option<i64> {
    raw.parse::<i64>().ok().filter(|n| *n >= 0 && !raw.starts_with('+'))
}

/// The revision as a resource object, with its links and its place in the feed.
pub fn object(base: &Base, r: &Revision) -> Json {
    let mut o = r.resource_object();
    let id = history::revision_id(r.key);
    o["relationships"]["resource"]["links"] =
        json!({"related": format!("{}/{}/{}", base.as_str(), r.resource_type, r.resource_id)});
    o["links"] = json!({"self": format!("{}/revisions/{id}", base.as_str())});
    if let Some(seq) = r.seq {
        o["meta"] = json!({"cursor": cursor(seq)});
    }
    o
}

fn body(doc: &Json) -> bytes::Bytes {
    serde_json::to_vec(doc).unwrap_or_default().into()
}

/// 410: the revisions after a cursor were pruned.
pub(super) fn pruned() -> Error {
    Problem::new(
        StatusCode::GONE,
        "history_pruned",
        "The revisions after this cursor were pruned: start again from an export of the catalogue and the feed from its start.",
    )
    .into()
}

/// The query parameters of `query`, decoded; a parameter not in `known` is a 400.
pub(super) fn params(query: Option<&str>, known: &[&str], hint: &str) -> Result<Vec<(String, String)>> {
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(query.unwrap_or("").as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    for (k, _) in &pairs {
        if !known.contains(&k.as_str()) {
            return Err(Problem::bad_param(k, format!("Unknown query parameter `{k}`. Known: {hint}.")).into());
        }
    }
    Ok(pairs)
}

fn number(pairs: &[(String, String)], name: &str, default: u64, max: u64) -> Result<u64> {
    match pairs.iter().rev().find(|(k, _)| k == name) {
        None => Ok(default),
        Some((_, v)) => v.parse::<u64>().ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
            Problem::bad_param(name, format!("`{name}` must be a whole number from 1 to {max}.")).into()
        }),
    }
}

/// The types named by `filter[type]` (comma-separated), each once.
pub(super) fn type_filter(value: &str) -> Result<Vec<&'static ResourceType>> {
    let mut types: Vec<&'static ResourceType> = Vec::new();
    for name in value.split(',') {
        let rt = resources::by_name(name).ok_or_else(|| {
            Error::from(Problem::bad_param(
                "filter[type]",
                format!("Unknown type `{name}` in `filter[type]`. Known: modules, subjects, chapters."),
            ))
        })?;
        if !types.iter().any(|t| t.name == rt.name) {
            types.push(rt);
        }
    }
    Ok(types)
}

/// `GET /v1/revisions`: the change feed.
pub async fn feed(app: &App, req: Req) -> Result<Response> {
    check_accept(&req.headers)?;
    let pairs = params(
        req.query.as_deref(),
        &["page[after]", "page[size]", "filter[type]"],
        "page[after], page[size], filter[type]",
    )?;
    let size = number(&pairs, "page[size]", DEFAULT_FEED_PAGE, MAX_FEED_PAGE)?;
    let after = match pairs.iter().rev().find(|(k, _)| k == "page[after]") {
        None => None,
        Some((_, v)) => Some(parse_cursor(v).ok_or_else(|| {
            Error::from(Problem::bad_param(
                "page[after]",
                "`page[after]` takes a cursor given by this feed (`meta.cursor`).",
            ))
        })?),
    };
    let mut types: Vec<&'static ResourceType> = Vec::new();
    let mut filter = None;
    if let Some((_, v)) = pairs.iter().rev().find(|(k, _)| k == "filter[type]") {
        types = type_filter(v)?;
        filter = Some(v.clone());
    }
    let base = app.base(&req.headers)?;
    // What any replica committed before this request is in its answer.
    app.db.sync_feed().await?;
    let feed = app.follow.feed_id(&app.db).await?;
    let page = app
        .db
        .scan(move |tx| {
            // Without a cursor, from the start of what is kept.
            let from = match after {
                Some(after) => after,
                None => history::floor(tx)?,
            };
            history::feed(tx, from, size as usize, &types)
        })
        .await?;
    if page.pruned {
        return Err(pruned());
    }
    let data: Vec<Json> = page.revisions.iter().map(|r| object(&base, r)).collect();
    let link = |after: i64| {
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("page[after]", &cursor(after));
        q.append_pair("page[size]", &size.to_string());
        if let Some(f) = &filter {
            q.append_pair("filter[type]", f);
        }
        format!("{}/revisions?{}", base.as_str(), q.finish())
    };
    let self_link = match (after, &req.query) {
        (_, Some(q)) if !q.is_empty() => format!("{}/revisions?{q}", base.as_str()),
        _ => format!("{}/revisions", base.as_str()),
    };
    let mut doc = json!({
        "jsonapi": {"version": "1.0"},
        "data": data,
        "meta": {"page": {"size": size}, "head": cursor(page.head), "feed": feed},
        "links": {"self": self_link, "next": link(page.next)},
    });
    if let Some(follow) = app.follow.meta(&app.db).await {
        doc["meta"]["follow"] = follow;
    }
    Ok(tagged(&req.headers, app.web.compression, body(&doc)))
}

/// `GET /v1/revisions/{id}`.
pub async fn one(app: &App, raw_id: &str, req: Req) -> Result<Response> {
    check_accept(&req.headers)?;
    params(req.query.as_deref(), &[], "none")?;
    let gone = || Error::not_found(format!("No revision {raw_id}."));
    let key = revision_key(raw_id).ok_or_else(gone)?;
    let base = app.base(&req.headers)?;
    let found = app.db.read(move |tx| Ok(history::get(tx, key)?)).await?.ok_or_else(gone)?;
    let doc = json!({"jsonapi": {"version": "1.0"}, "data": object(&base, &found), "links": {"self": format!("{}/revisions/{raw_id}", base.as_str())}});
    Ok(tagged(&req.headers, app.web.compression, body(&doc)))
}

/// `GET /v1/{type}/{id}/revisions`: newest first. Numbers are consecutive for each resource
/// (a rolled back write takes none, a prune cuts the oldest), so a page is found by number.
pub async fn of_resource(app: &App, rt: &'static ResourceType, raw_id: &str, req: Req) -> Result<Response> {
    check_accept(&req.headers)?;
    let pairs = params(req.query.as_deref(), &["page[number]", "page[size]"], "page[number], page[size]")?;
    let size = number(&pairs, "page[size]", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)?;
    let page = number(&pairs, "page[number]", 1, u64::MAX)?;
    let id = parse_id(rt, raw_id)?;
    let base = app.base(&req.headers)?;
    let read_id = id.clone();
    let found = app
        .db
        .read(move |tx| {
            let Some((min, max)) = history::numbers(tx, rt, &read_id)? else { return Ok(None) };
            let skipped = i64::try_from((page - 1).saturating_mul(size)).unwrap_or(i64::MAX);
            let below = max.saturating_sub(skipped);
            let revisions = if below < min {
                Some(Vec::new())
            } else {
                history::of_resource(tx, rt, &read_id, below, size as usize, RESOURCE_PAGE_BYTES)?
            };
            Ok(Some(((max - min + 1) as u64, revisions)))
        })
        .await?;
    let Some((total, revisions)) = found else {
        return Err(crate::store::select::not_found(rt, raw_id));
    };
    let revisions = revisions.ok_or_else(|| {
        Error::from(Problem::bad_param(
            "page[size]",
            format!(
                "These revisions hold more than {} MiB of changes, more than a document may: ask for a smaller `page[size]`.",
                RESOURCE_PAGE_BYTES >> 20
            ),
        ))
    })?;
    let path = format!("{}/{}/{}/revisions", base.as_str(), rt.name, id);
    let last = total.div_ceil(size).max(1);
    let count = revisions.len() as u64;
    let (from, to) = if count == 0 { (0, 0) } else { ((page - 1) * size + 1, (page - 1) * size + count) };
    let at = |n: u64| format!("{path}?page%5Bnumber%5D={n}&page%5Bsize%5D={size}");
    let mut links = json!({"self": at(page), "first": at(1), "last": at(last)});
    if page > 1 {
        links["prev"] = json!(at((page - 1).min(last)));
    }
    if page < last {
        links["next"] = json!(at(page + 1));
    }
    let doc = json!({
        "jsonapi": {"version": "1.0"},
        "data": revisions.iter().map(|r| object(&base, r)).collect::<Vec<_>>(),
        "meta": {"page": {"currentPage": page, "perPage": size, "from": from, "to": to, "total": total, "lastPage": last}},
        "links": links,
    });
    Ok(tagged(&req.headers, app.web.compression, body(&doc)))
}

/// `POST /v1/revisions/{id}/restore` (no body): brings the resource back to its state right
/// after the revision, as a new revision (`restore`); `If-Match` is the resource's current tag,
/// `If-None-Match: *` restores only a resource that is deleted. Answers 200 with the resource.
pub async fn restore(app: &App, raw_id: &str, req: Req) -> Result<Response> {
    check_accept(&req.headers)?;
    params(req.query.as_deref(), &[], "none")?;
    let key = revision_key(raw_id).ok_or_else(|| Error::not_found(format!("No revision {raw_id}.")))?;
    // `If-None-Match: *`: only while the resource does not exist (bringing a deleted one back,
    // never over what someone restored or wrote meanwhile); a precondition of its own, so
    // `--require-if-match` asks for no `If-Match` beside it.
    let only_if_gone = req.headers.get(IF_NONE_MATCH).is_some_and(|v| v.to_str().is_ok_and(|v| v.trim() == "*"));
    let cond = if only_if_gone { IfMatch::Absent } else { IfMatch::of(&req.headers, app.require_if_match)? };
    let base = app.base(&req.headers)?;
    let ctx = req.context().restoring();
    let bytes = read_body(&req.headers, req.body, app.body_limit, app.body_timeout).await?;
    if !bytes.is_empty() {
        return Err(Problem::malformed("", "A restore takes no body: the revision says everything.").into());
    }
    let check_base = base.clone();
    let (rt, rec) = app
        .db
        .write(&ctx, move |tx| {
            let check = |tx: &mut dyn crate::store::Tx, rt: &'static ResourceType, id: &str| {
                if only_if_gone {
                    return match current_tag(tx, &check_base, rt, id)? {
                        None => Ok(()),
                        Some(tag) => Err(Problem::new(
                            StatusCode::PRECONDITION_FAILED,
                            "precondition_failed",
                            format!(
                                "`If-None-Match: *` asks to restore only a deleted resource, and this one exists \
                                 (its ETag is {tag}): someone restored or re-created it meanwhile. Nothing was changed."
                            ),
                        )
                        .into()),
                    };
                }
                if cond.is_absent() {
                    return Ok(());
                }
                cond.check(current_tag(tx, &check_base, rt, id)?.as_deref())
            };
            history::restore(tx, key, &check)
        })
        .await?;
    let q = Query::parse(None, rt, Accepts::Single)?;
    Ok(super::handlers::written(app, base, rt, q, rec, StatusCode::OK).await)
}
