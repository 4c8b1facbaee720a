//! Handlers of `/{type}` and `/{type}/{id}`, and what the relationship handlers share.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use rusqlite::Connection;
use warp::http::{HeaderMap, Method, StatusCode};
use warp::path::FullPath;
use warp::reply::Response;

use super::reply::{check_accept, check_content_type, created, document, error_reply, no_content, read_body};
use super::{related, BodyStream, Req, Route};
use crate::app::App;
use crate::db;
use crate::error::{Error, Result};
use crate::jsonapi::body::{self, Mode};
use crate::jsonapi::query::{normalize_id, Filter};
use crate::jsonapi::response::{self, Included, RequestUrl};
use crate::jsonapi::{Accepts, Base, Query};
use crate::relations;
use crate::resources::{Relationship, ResourceType};
use crate::store::{self, Record, Selection};

/// Runs the handler of the chosen route; every outcome, a panic included, becomes a response.
pub async fn dispatch(
    headers: HeaderMap,
    route: Route,
    method: Method,
    path: FullPath,
    query: Option<String>,
    body: BodyStream,
    app: Arc<App>,
) -> Response {
    let req = Req { method, path, query, headers, body };
    let work = async move {
        match route {
            Route::Collection(rt) => collection(&app, rt, req).await,
            Route::Item(rt, id) => item(&app, rt, &id, req).await,
            Route::Related(rt, id, rel) => related::related(&app, rt, &id, &rel, req).await,
            Route::Relationship(rt, id, rel) => related::relationship(&app, rt, &id, &rel, req).await,
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
        Method::GET => list(app, rt, req, None).await,
        Method::POST => create(app, rt, req).await,
        _ => Err(Error::method_not_allowed("GET, POST")),
    }
}

async fn item(app: &App, rt: &'static ResourceType, raw_id: &str, req: Req) -> Result<Response> {
    let allow = "GET, PATCH, DELETE";
    if ![Method::GET, Method::PATCH, Method::DELETE].contains(&req.method) {
        return Err(Error::method_not_allowed(allow));
    }
    let id = parse_id(rt, raw_id)?;
    check_accept(&req.headers)?;
    match req.method {
        Method::GET => {
            let q = Query::parse(req.query.as_deref(), rt, Accepts::Single)?;
            let base = app.base(&req.headers)?;
            let url = RequestUrl::new(&base, req.path.as_str(), req.query);
            let body = app
                .db
                .read(move |c| {
                    let read = |c: &Connection| render_one(c, &base, &url, rt, &q, &id);
                    if q.include.is_empty() {
                        read(c)
                    } else {
                        db::snapshot(c, read)
                    }
                })
                .await?;
            Ok(document(StatusCode::OK, body))
        }
        Method::PATCH => {
            check_content_type(&req.headers)?;
            let q = Query::parse(req.query.as_deref(), rt, Accepts::Single)?;
            let base = app.base(&req.headers)?;
            let bytes = read_body(&req.headers, req.body, app.body_limit).await?;
            let changes = body::resource(rt, &bytes, Mode::Update(&id))?;
            let written = app
                .db
                .write(move |c| {
                    store::update(c, rt, &id, &changes)?;
                    Written::read(c, base, rt, q, &id)
                })
                .await?;
            Ok(document(StatusCode::OK, written.document().1))
        }
        _ => {
            Query::parse(req.query.as_deref(), rt, Accepts::Nothing)?;
            app.db.write(move |c| store::delete(c, rt, &id)).await?;
            Ok(no_content())
        }
    }
}

/// `GET` of a collection, or of one parent's children when `scope` is set.
pub(super) async fn list(
    app: &App,
    rt: &'static ResourceType,
    req: Req,
    scope: Option<(&'static Relationship, String)>,
) -> Result<Response> {
    check_accept(&req.headers)?;
    let q = Query::parse(req.query.as_deref(), rt, Accepts::Collection)?;
    let base = app.base(&req.headers)?;
    let url = RequestUrl::new(&base, req.path.as_str(), req.query);
    let bounded = is_bounded(&q);
    let db = app.db.clone();
    let work = move |c: &Connection| {
        db::snapshot(c, |c| {
            let scope = scope.as_ref().map(|(rel, parent)| (*rel, parent.as_str()));
            if let Some((rel, parent)) = scope {
                if !store::exists(c, rel.fk.parent, parent)? {
                    return Err(store::not_found(rel.fk.parent, parent));
                }
            }
            let sel = Selection::new(rt, q.fieldset(rt), &q.include);
            if q.include.is_empty() {
                // Rendered straight from the rows as they are stepped.
                return response::collection(&base, &url, &q, &Included::new(), |items| {
                    store::list(&db, c, &sel, &q, scope, |row| items.push(&sel, row))
                });
            }
            let mut page = Vec::new();
            let total = store::list(&db, c, &sel, &q, scope, |row| page.push(Record::of(row, &sel)))?;
            let included = relations::include(c, &q, &sel, &mut page)?;
            response::collection(&base, &url, &q, &included, |items| {
                page.iter().for_each(|rec| items.push(&sel, rec));
                Ok(total)
            })
        })
    };
    let body = if bounded { app.db.read(work).await? } else { app.db.scan(work).await? };
    Ok(document(StatusCode::OK, body))
}

/// Whether a page is read by walking one index (so it may run inline): at most one sort key,
/// and no filter that must look at rows beyond the page.
fn is_bounded(q: &Query) -> bool {
    q.sort.len() <= 1 && q.filters.iter().all(|f| !matches!(f, Filter::Equals(a, _) if !a.unique))
}

async fn create(app: &App, rt: &'static ResourceType, req: Req) -> Result<Response> {
    check_accept(&req.headers)?;
    check_content_type(&req.headers)?;
    let q = Query::parse(req.query.as_deref(), rt, Accepts::Single)?;
    let base = app.base(&req.headers)?;
    let bytes = read_body(&req.headers, req.body, app.body_limit).await?;
    let changes = body::resource(rt, &bytes, Mode::Create)?;
    let written = app
        .db
        .write(move |c| {
            let id = store::create(c, rt, &changes)?;
            Written::read(c, base, rt, q, &id)
        })
        .await?;
    let (location, body) = written.document();
    Ok(created(&location, body))
}

/// A resource as a write left it: read inside the write's transaction, so it is exactly what
/// was committed. Its document is written after the commit, off the writer thread, unless
/// `include` needs more queries.
enum Written {
    Read { base: Base, sel: &'static Selection, rec: Record },
    Rendered { url: String, body: Vec<u8> },
}

impl Written {
    fn read(c: &Connection, base: Base, rt: &'static ResourceType, q: Query, id: &str) -> Result<Written> {
        if q.include.is_empty() && q.fieldset(rt).is_none() {
            let sel = Selection::whole(rt);
            let rec = store::get(c, sel, id)?.ok_or_else(|| store::not_found(rt, id))?;
            return Ok(Written::Read { base, sel, rec });
        }
        let url = RequestUrl::resource(&base, rt.name, id);
        let body = render_one(c, &base, &url, rt, &q, id)?;
        Ok(Written::Rendered { url: url.path_url, body })
    }

    /// The resource's URL and its document.
    fn document(self) -> (String, Vec<u8>) {
        match self {
            Written::Rendered { url, body } => (url, body),
            Written::Read { base, sel, rec } => {
                let url = RequestUrl::resource(&base, sel.rt.name, &rec.id);
                let body = response::resource(&base, &url, sel, Some(&rec), &Included::new());
                (url.path_url, body)
            }
        }
    }
}

/// The document of resource `id` with what `q` includes; 404 when it does not exist.
pub(super) fn render_one(
    c: &Connection,
    base: &Base,
    url: &RequestUrl,
    rt: &'static ResourceType,
    q: &Query,
    id: &str,
) -> Result<Vec<u8>> {
    let sel = Selection::new(rt, q.fieldset(rt), &q.include);
    if q.include.is_empty() {
        let mut body = None;
        store::get_with(c, &sel, id, |row| {
            body = Some(response::resource(base, url, &sel, Some(row), &Included::new()))
        })?;
        return body.ok_or_else(|| store::not_found(rt, id));
    }
    let rec = store::get(c, &sel, id)?.ok_or_else(|| store::not_found(rt, id))?;
    let mut recs = [rec];
    let included = relations::include(c, q, &sel, &mut recs)?;
    Ok(response::resource(base, url, &sel, Some(&recs[0]), &included))
}

/// The normalized id of a path segment; a segment that is not a UUID names nothing (404).
pub(super) fn parse_id(rt: &ResourceType, raw: &str) -> Result<String> {
    normalize_id(raw).ok_or_else(|| store::not_found(rt, raw))
}
