//! Handlers of `/{type}` and `/{type}/{id}`, and what the relationship handlers share.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use warp::http::{HeaderMap, Method, StatusCode};
use warp::path::FullPath;
use warp::reply::Response;

use super::conditional::{if_none_match, not_modified, revalidated_tag, with_tag, IfMatch};
use super::read::{self, current_tag, parse_id, render_one, render_tagged};
use super::reply::options;
use super::reply::{check_accept, check_content_type, created, document, error_reply, no_content, read_body};
use super::{heavy, large, related, BodyStream, Req, Route, COLLECTION, ITEM};
use crate::app::App;
use crate::error::{Error, Result};
use crate::jsonapi::body::{self, Mode};
use crate::jsonapi::{Accepts, Query};
use crate::render::response::{self, Included, RequestUrl};
use crate::render::{etag, Base};
use crate::resources::ResourceType;
use crate::store::select::{Record, Selection};
use crate::store::{snapshot, write, Atomicity, Tx};
use crate::tokens::Caller;

/// Runs the handler of the chosen route; every outcome, a panic included, becomes a response.
#[allow(clippy::too_many_arguments)]
pub async fn dispatch(
    headers: HeaderMap,
    caller: Option<Caller>,
    route: Option<Route>,
    method: Method,
    path: FullPath,
    query: Option<String>,
    body: BodyStream,
    app: Arc<App>,
) -> Response {
    // Whatever the request, not only where links are built from the host.
    if let Err(e) = crate::app::host(&headers) {
        return error_reply(&e);
    }
    match route {
        Some(route) => answer(route, Req { method, path, query, headers, body, caller }, app).await,
        None => error_reply(&Error::no_route()),
    }
}

async fn answer(route: Route, mut req: Req, app: Arc<App>) -> Response {
    if let Some(allow) = route.allow() {
        if req.method == Method::OPTIONS {
            return options(allow);
        }
        if !allow.allows(&req.method) {
            return error_reply(&Error::method_not_allowed(allow.methods));
        }
        // A write the path answers, with a read-only token (a path that names nothing is a
        // 404 for every token, below).
        if let Some(caller) = req.caller.as_ref().filter(|c| !c.scope.writes()) {
            if !matches!(req.method, Method::GET | Method::HEAD) {
                return error_reply(&Error::read_only(&caller.name));
            }
        }
    }
    // A write to a catalogue that follows another's (the same answer on every path that writes).
    if !matches!(req.method, Method::GET | Method::HEAD | Method::OPTIONS) {
        if let Some(refused) = app.follow.refuse_write(&app.db).await {
            return error_reply(&refused);
        }
    }
    // A HEAD is answered as its GET; the body is dropped on the way out (see `super::web`).
    if req.method == Method::HEAD {
        req.method = Method::GET;
    }
    let work = async move {
        match route {
            Route::Collection(rt) => collection(&app, rt, req).await,
            Route::Item(rt, id) => item(&app, rt, &id, req).await,
            Route::Related(rt, id, rel) => related::related(&app, rt, &id, &rel, req).await,
            Route::Relationship(rt, id, rel) => related::relationship(&app, rt, &id, &rel, req).await,
            Route::Home => super::home::home(&app, req).await,
            Route::Operations => super::operations::operations(&app, req).await,
            Route::Feed => super::revisions::feed(&app, req).await,
            Route::Revision(id) => super::revisions::one(&app, &id, req).await,
            Route::History(rt, id) => super::revisions::of_resource(&app, rt, &id, req).await,
            Route::Restore(id) => super::revisions::restore(&app, &id, req).await,
            Route::Stream => super::stream::stream(&app, req).await,
        }
    };
    match AssertUnwindSafe(work).catch_unwind().await {
        Ok(Ok(response)) => response,
        Ok(Err(e)) => error_reply(&e),
        Err(_) => error_reply(&Error::internal("a request handler panicked")),
    }
}

async fn collection(app: &App, rt: &'static ResourceType, req: Req) -> Result<Response> {
    match req.method {
        Method::GET => read::collection(app, rt, req, None).await,
        Method::POST => create(app, rt, req).await,
        _ => Err(Error::method_not_allowed(COLLECTION.methods)),
    }
}

async fn item(app: &App, rt: &'static ResourceType, raw_id: &str, req: Req) -> Result<Response> {
    let id = parse_id(rt, raw_id)?;
    check_accept(&req.headers)?;
    match req.method {
        Method::GET => {
            let q = Query::parse(req.query.as_deref(), rt, Accepts::Single)?;
            let base = app.base(&req.headers)?;
            // The resource's own URL (its id as stored), so that the document, like its tag,
            // is the same whichever spelling of the id the request used.
            let url = RequestUrl { query: req.query, ..RequestUrl::resource(&base, rt.name, &id) };
            let inm = if_none_match(&req.headers, app.web.compression);
            let ((tag, body), permit) = large::read(app, q.include.is_empty(), &q, |q| {
                let (base, url, id, inm) = (base.clone(), url.clone(), id.clone(), inm.clone());
                move |tx: &mut dyn Tx| {
                    let read = |tx: &mut dyn Tx| render_tagged(tx, &base, &url, rt, &q, &id, inm.as_deref());
                    let (tag, body) = if q.include.is_empty() { read(tx)? } else { snapshot(tx, read)? };
                    // A 304 names the validator that matched (see `revalidated_tag`).
                    Ok(match body {
                        Some(_) => (tag, body),
                        None => (revalidated_tag(&tag, inm.as_deref()), None),
                    })
                }
            })
            .await?;
            Ok(match body {
                Some(body) => with_tag(document(StatusCode::OK, large::body(body, permit)), &tag),
                None => not_modified(&tag),
            })
        }
        Method::PATCH => {
            check_content_type(&req.headers)?;
            let q = Query::parse(req.query.as_deref(), rt, Accepts::Single)?;
            let base = app.base(&req.headers)?;
            let cond = IfMatch::of(&req.headers, app.require_if_match)?;
            let ctx = req.context();
            let bytes = read_body(&req.headers, req.body, app.body_limit, app.body_timeout).await?;
            let changes = {
                let id = id.clone();
                heavy::run(bytes.len(), app.request_timeout, move || body::resource(rt, &bytes, Mode::Update(&id)))
                    .await?
            };
            let atomicity = if cond.is_absent() { write::atomicity(&changes) } else { Atomicity::Transaction };
            let rec = {
                let base = base.clone();
                app.db
                    .write_in(&ctx, atomicity, move |tx| {
                        if !cond.is_absent() {
                            cond.check(current_tag(tx, &base, rt, &id)?.as_deref())?;
                        }
                        write::update(tx, rt, &id, &changes)
                    })
                    .await?
            };
            Ok(written(app, base, rt, q, rec, StatusCode::OK).await)
        }
        Method::DELETE => {
            Query::parse(req.query.as_deref(), rt, Accepts::Nothing)?;
            let cond = IfMatch::of(&req.headers, app.require_if_match)?;
            let base = if cond.is_absent() { None } else { Some(app.base(&req.headers)?) };
            let atomicity = if cond.is_absent() { write::delete_atomicity(rt) } else { Atomicity::Transaction };
            app.db
                .write_in(&req.context(), atomicity, move |tx| {
                    if let Some(base) = &base {
                        cond.check(current_tag(tx, base, rt, &id)?.as_deref())?;
                    }
                    write::delete(tx, rt, &id)
                })
                .await?;
            Ok(no_content())
        }
        _ => Err(Error::method_not_allowed(ITEM.methods)),
    }
}

async fn create(app: &App, rt: &'static ResourceType, req: Req) -> Result<Response> {
    check_accept(&req.headers)?;
    check_content_type(&req.headers)?;
    let q = Query::parse(req.query.as_deref(), rt, Accepts::Single)?;
    let base = app.base(&req.headers)?;
    let ctx = req.context();
    let bytes = read_body(&req.headers, req.body, app.body_limit, app.body_timeout).await?;
    let changes =
        heavy::run(bytes.len(), app.request_timeout, move || body::resource(rt, &bytes, Mode::Create)).await?;
    let rec = app.db.write_in(&ctx, write::atomicity(&changes), move |tx| write::create(tx, rt, &changes)).await?;
    Ok(written(app, base, rt, q, rec, StatusCode::CREATED).await)
}

/// The answer to a write that stored `rec` (every field, as committed, read by the write's
/// own statement): its document, with the tag of its plain document (what `If-Match` compares
/// with next, whatever the response shows) and, for 201, `Location`. With `include` or sparse
/// fieldsets the document is read after the commit, within a budget like any read, never on
/// the writer; should that read fail (the resource deleted meanwhile, a document too large),
/// the write still stands and the plain document is sent.
pub(super) async fn written(
    app: &App,
    base: Base,
    rt: &'static ResourceType,
    q: Query,
    rec: Record,
    status: StatusCode,
) -> Response {
    let whole = Selection::whole(rt);
    let tag = etag::resource(&base, None, whole, &rec);
    let url = RequestUrl::resource(&base, rt.name, &rec.id);
    let plain = || bytes::Bytes::from(response::resource(&base, &url, whole, Some(&rec), &Included::new()));
    let body = if q.include.is_empty() && q.fieldset(rt).is_none() {
        plain()
    } else {
        let read = large::read(app, false, &q, |q| {
            let (base, url, id) = (base.clone(), url.clone(), rec.id.clone());
            move |tx: &mut dyn Tx| render_one(tx, &base, &url, rt, &q, &id)
        });
        match read.await {
            Ok((body, permit)) => large::body(body, permit),
            Err(e) => {
                log::info!("the document of a write to {} could not be read: {e}", url.path_url);
                plain()
            }
        }
    };
    let r = if status == StatusCode::CREATED { created(&url.path_url, body) } else { document(status, body) };
    with_tag(r, &tag)
}
