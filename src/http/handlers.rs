//! Handlers of `/{type}` and `/{type}/{id}`, and what the relationship handlers share.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use warp::http::{HeaderMap, Method, StatusCode};
use warp::path::FullPath;
use warp::reply::Response;

use super::read::{self, parse_id, render_one};
use super::reply::{check_accept, check_content_type, created, document, error_reply, no_content, read_body};
use super::{related, BodyStream, Req, Route};
use crate::app::App;
use crate::error::{Error, Result};
use crate::jsonapi::body::{self, Mode};
use crate::jsonapi::response::{self, Included, RequestUrl};
use crate::jsonapi::{Accepts, Base, Query};
use crate::resources::ResourceType;
use crate::store::select::{Record, Selection};
use crate::store::{snapshot, write, Tx};

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
        Method::GET => read::collection(app, rt, req, None).await,
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
                .read(move |tx| {
                    let read = |tx: &mut dyn Tx| render_one(tx, &base, &url, rt, &q, &id);
                    if q.include.is_empty() {
                        read(tx)
                    } else {
                        snapshot(tx, read)
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
                .write_in(write::atomicity(&changes), move |tx| {
                    let rec = write::update(tx, rt, &id, &changes)?;
                    Written::read(tx, &base, rt, &q, rec)
                })
                .await?;
            Ok(document(StatusCode::OK, written.document().1))
        }
        _ => {
            Query::parse(req.query.as_deref(), rt, Accepts::Nothing)?;
            app.db.write_in(write::delete_atomicity(rt), move |tx| write::delete(tx, rt, &id)).await?;
            Ok(no_content())
        }
    }
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
        .write_in(write::atomicity(&changes), move |tx| {
            let rec = write::create(tx, rt, &changes)?;
            Written::read(tx, &base, rt, &q, rec)
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
    /// `rec` is the resource as the write returned it (every field); with `include` or sparse
    /// fieldsets the document is read and rendered here.
    fn read(tx: &mut dyn Tx, base: &Base, rt: &'static ResourceType, q: &Query, rec: Record) -> Result<Written> {
        if q.include.is_empty() && q.fieldset(rt).is_none() {
            return Ok(Written::Read { base: base.clone(), sel: Selection::whole(rt), rec });
        }
        let url = RequestUrl::resource(base, rt.name, &rec.id);
        let body = render_one(tx, base, &url, rt, q, &rec.id)?;
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
