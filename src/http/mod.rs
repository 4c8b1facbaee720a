//! The warp filter tree.
//!
//! Filters only choose a route: the bearer token is checked first (before anything can reveal
//! whether a path exists), then the path shape picks a [`Route`]. Once a route is chosen its
//! handler always replies; method, media type and body rules are applied there, so that a known
//! path with a wrong method is a 405 with `Allow`, never a fall-through. One `recover` turns the
//! remaining rejections (no route, no token) into the same JSON:API error document.

pub(crate) mod access;
mod compress;
mod conditional;
pub mod console;
mod cors;
mod handlers;
mod health;
mod heavy;
mod home;
mod large;
mod openapi;
mod operations;
mod read;
mod related;
mod reply;
pub mod revision_json;
pub mod revisions;
mod route;
mod stream;
mod web;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures_util::future::Either;
use futures_util::{Stream, TryStreamExt};
use warp::http::{HeaderMap, Method};
use warp::path::FullPath;
use warp::reply::Response;
use warp::{Filter, Rejection};

use crate::app::App;
use crate::store::WriteContext;
use crate::tokens::{Caller, Refusal};

pub use access::Template;
pub use operations::{ATOMIC, MAX_OPERATIONS};
pub use reply::{error_reply, JSONAPI};
use route::route;
pub use route::{Allow, Route, COLLECTION, ITEM, OPERATIONS, READ_ONLY, RELATED, TO_MANY, TO_ONE};

pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, warp::Error>> + Send>>;

/// The parts of a request the handlers use.
pub struct Req {
    pub method: Method,
    pub path: FullPath,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: BodyStream,
    /// Who sends it (`None` only for what needs no token).
    pub caller: Option<Caller>,
}

impl Req {
    /// What the revisions of the request's writes name as their author: the caller, as the
    /// access log names it.
    pub fn context(&self) -> WriteContext {
        WriteContext::new(self.caller.as_ref().map_or_else(|| Arc::from("anonymous"), |c| c.name.clone()))
    }
}

/// The whole API: `GET /v1/openapi.json`, `/healthz` and `/readyz` without a token, everything
/// else under `/v1` with one; and the editor console at `/` and `/console/` (see `console`),
/// a page that asks for a token itself.
pub fn routes(app: Arc<App>) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone {
    let web = app.web.clone();
    let log = app.access_log.clone();
    // Requests are marked with their route and caller for the access log and the metrics.
    let on = log.is_some() || crate::metrics::enabled();
    let fixed = move |path| move |r| access::marked(r, on, Some(Template::Fixed(path)), None);
    let openapi =
        warp::path!("v1" / "openapi.json").and(warp::method()).map(openapi::serve).map(fixed("/v1/openapi.json"));
    let healthz = warp::path!("healthz").and(warp::method()).map(health::healthz).map(fixed("/healthz"));
    let state = app.clone();
    let readyz =
        warp::path!("readyz").and(warp::method()).then(move |m| health::readyz(m, state.clone())).map(fixed("/readyz"));
    // A path under /v1 that names nothing is answered here, after authorization, so that the
    // access log names the caller.
    let api = warp::path("v1")
        .and(authorized(app.clone()))
        .untuple_one()
        .and(route())
        .and(request())
        .and(warp::any().map(move || app.clone()))
        .then(
            move |headers, caller: Option<Caller>, route: Option<Route>, method, path, query, body, app| async move {
                let template = route.as_ref().and_then(Route::template);
                // Cloned (a reference count) only for the log that reads it.
                let named = caller.as_ref().filter(|_| on).cloned();
                let answered = handlers::dispatch(headers, caller, route, method, path, query, body, app).await;
                access::marked(answered, on, template, named)
            },
        );
    let (console_on, compression) = (web.console, web.compression);
    let console = warp::path::full()
        .and_then(move |path: FullPath| {
            let ours = console_on && console::is_console(path.as_str());
            std::future::ready(if ours { Ok(path) } else { Err(warp::reject::not_found()) })
        })
        .and(warp::method())
        .and(warp::header::headers_cloned())
        .then(move |path: FullPath, method, headers| async move {
            let template = console::template(path.as_str());
            access::marked(console::serve(method, path.as_str(), headers, compression).await, on, Some(template), None)
        });
    let all = openapi.or(healthz).unify().or(readyz).unify().or(api).unify().or(console).unify();
    access::logged(web::finish(all.recover(reply::rejection).unify(), web), log)
}

/// A request refused before routing: no token or a bad one (401), a throttled address (429),
/// or a database that could not be asked (503).
#[derive(Debug)]
struct Refused(Refusal);
impl warp::reject::Reject for Refused {}

/// The address of the client, when a request carries it in its extensions (as tests do); the
/// server makes it known through [`with_peer`] instead.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

/// Passes the request headers on, with the [`Caller`], when they carry an accepted bearer
/// token, or when the request is an `OPTIONS`: preflights carry no token, so `OPTIONS` is
/// answered before authentication (by [`handlers::dispatch`], from the path's shape alone: the
/// shapes it confirms are those of the public OpenAPI document, and ids are not looked up).
fn authorized(app: Arc<App>) -> impl Filter<Extract = ((HeaderMap, Option<Caller>),), Error = Rejection> + Clone {
    let peer = warp::ext::optional::<Peer>().map(|p: Option<Peer>| {
        let addr = PEER.try_with(|a| *a).ok().or(p.map(|p| p.0));
        addr.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip())
    });
    warp::method().and(warp::header::headers_cloned()).and(peer).and_then(
        move |method: Method, headers: HeaderMap, peer: IpAddr| {
            let peer = app.auth.client(peer, &headers);
            let known = if method == Method::OPTIONS {
                Some(Ok(None))
            } else {
                app.auth.check(headers.get(warp::http::header::AUTHORIZATION), peer).map(|r| r.map(Some))
            };
            // Configured tokens are told in memory, without a future of their own; only
            // database tokens wait.
            match known {
                Some(outcome) => Either::Left(std::future::ready(authorized_as(headers, outcome))),
                None => {
                    let app = app.clone();
                    Either::Right(Box::pin(async move {
                        let authorization = headers.get(warp::http::header::AUTHORIZATION);
                        let outcome = app.auth.database(&app.db, authorization, peer).await.map(Some);
                        authorized_as(headers, outcome)
                    }))
                }
            }
        },
    )
}

type Authorized = Result<(HeaderMap, Option<Caller>), Rejection>;

fn authorized_as(headers: HeaderMap, outcome: Result<Option<Caller>, Refusal>) -> Authorized {
    outcome.map(|caller| (headers, caller)).map_err(|refusal| warp::reject::custom(Refused(refusal)))
}

tokio::task_local! {
    /// The peer address of the connection the request being polled came on.
    static PEER: SocketAddr;
}

/// Runs `f` (a request's call, or one poll of its handler) with the peer address `addr` known to
/// authentication. Set around each request rather than around its connection's task: HTTP/2
/// runs each stream's handler in a task of its own. A task-local costs a request nothing, where
/// a request extension would cost it a map of its own.
pub fn with_peer<R>(addr: SocketAddr, f: impl FnOnce() -> R) -> R {
    PEER.sync_scope(addr, f)
}

tokio::task_local! {
    /// The connection the request being polled came on, as its handler may tell it things.
    static CONN: Arc<dyn crate::app::ConnHook>;
}

/// [`with_peer`], with the connection's hook known to the handler (see [`conn_hook`]).
pub fn with_conn<R>(addr: SocketAddr, hook: Arc<dyn crate::app::ConnHook>, f: impl FnOnce() -> R) -> R {
    CONN.sync_scope(hook, || with_peer(addr, f))
}

/// The hook of the connection the request being polled came on; `None` outside the server
/// (a test calling the routes directly).
pub fn conn_hook() -> Option<Arc<dyn crate::app::ConnHook>> {
    CONN.try_with(Arc::clone).ok()
}

/// Method, path, query string and (unread) body of the request.
fn request() -> impl Filter<Extract = (Method, FullPath, Option<String>, BodyStream), Error = Rejection> + Clone {
    let query = warp::query::raw().map(Some).or(warp::any().map(|| None)).unify();
    let body = warp::body::stream().map(boxed_body);
    warp::method().and(warp::path::full()).and(query).and(body)
}

fn boxed_body<S, B>(body: S) -> BodyStream
where
    S: Stream<Item = Result<B, warp::Error>> + Send + 'static,
    B: Buf,
{
    Box::pin(body.map_ok(|mut b| b.copy_to_bytes(b.remaining())))
}
