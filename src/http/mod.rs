//! The warp filter tree.
//!
//! Filters only choose a route: the bearer token is checked first (before anything can reveal
//! whether a path exists), then the path shape picks a [`Route`]. Once a route is chosen its
//! handler always replies; method, media type and body rules are applied there, so that a known
//! path with a wrong method is a 405 with `Allow`, never a fall-through. One `recover` turns the
//! remaining rejections (no route, no token) into the same JSON:API error document.

mod access;
mod compress;
mod conditional;
mod cors;
mod handlers;
mod health;
mod openapi;
mod operations;
mod read;
mod related;
mod reply;
mod web;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use futures_util::future::Either;
use futures_util::{Stream, TryStreamExt};
use warp::http::{HeaderMap, Method};
use warp::path::FullPath;
use warp::reply::Response;
use warp::{Filter, Rejection};

use crate::app::App;
use crate::resources::{self, ResourceType};
use crate::tokens::{Caller, Refusal};

pub use access::{AccessLog, Template};
pub use operations::{ATOMIC, MAX_OPERATIONS};
pub use reply::{error_reply, JSONAPI};
pub use web::Web;

/// The chosen route: a path shape with its resolved type and raw segments.
#[derive(Debug)]
pub enum Route {
    Collection(&'static ResourceType),
    Item(&'static ResourceType, String),
    Related(&'static ResourceType, String, String),
    Relationship(&'static ResourceType, String, String),
    /// `/operations`: atomic operations.
    Operations,
}

pub type BodyStream = Pin<Box<dyn Stream<Item = Result<Bytes, warp::Error>> + Send>>;

/// The methods a route answers, as `Allow` lists them.
#[derive(Debug, Clone, Copy)]
pub struct Allow {
    /// In a 405: the methods that act on the resource, as the contract lists them.
    pub methods: &'static str,
    /// In the answer to `OPTIONS` (and a preflight's `Access-Control-Allow-Methods`): every
    /// method, `HEAD` and `OPTIONS` included.
    pub all: &'static str,
}

impl Allow {
    /// Whether `method` is answered.
    pub fn allows(&self, method: &Method) -> bool {
        let method = method.as_str().as_bytes();
        self.all.as_bytes().split(|b| *b == b',').any(|m| m.trim_ascii_start() == method)
    }
}

pub const COLLECTION: Allow = Allow { methods: "GET, POST", all: "GET, POST, HEAD, OPTIONS" };
pub const ITEM: Allow = Allow { methods: "GET, PATCH, DELETE", all: "GET, PATCH, DELETE, HEAD, OPTIONS" };
pub const RELATED: Allow = Allow { methods: "GET", all: "GET, HEAD, OPTIONS" };
pub const TO_ONE: Allow = Allow { methods: "GET, PATCH", all: "GET, PATCH, HEAD, OPTIONS" };
pub const TO_MANY: Allow =
    Allow { methods: "GET, PATCH, POST, DELETE", all: "GET, PATCH, POST, DELETE, HEAD, OPTIONS" };
pub const OPERATIONS: Allow = Allow { methods: "POST", all: "POST, OPTIONS" };
/// Health and the OpenAPI document.
pub const READ_ONLY: Allow = Allow { methods: "GET, HEAD", all: "GET, HEAD, OPTIONS" };

impl Route {
    /// The methods the route answers; `None` when it names a relationship its type does not
    /// have (a 404 whatever the method).
    pub fn allow(&self) -> Option<Allow> {
        match self {
            Route::Collection(_) => Some(COLLECTION),
            Route::Operations => Some(OPERATIONS),
            Route::Item(..) => Some(ITEM),
            Route::Related(rt, _, rel) => rt.relationship(rel).map(|_| RELATED),
            Route::Relationship(rt, _, rel) => {
                rt.relationship(rel).map(|r| if r.is_to_one() { TO_ONE } else { TO_MANY })
            }
        }
    }

    /// The route's template for the access log; `None` for a relationship its type lacks.
    pub fn template(&self) -> Option<Template> {
        Some(match self {
            Route::Collection(rt) => Template::Collection(rt.name),
            Route::Operations => Template::Fixed("/v1/operations"),
            Route::Item(rt, _) => Template::Item(rt.name),
            Route::Related(rt, _, rel) => Template::Related(rt.name, rt.relationship(rel)?.name),
            Route::Relationship(rt, _, rel) => Template::Relationship(rt.name, rt.relationship(rel)?.name),
        })
    }
}

/// The parts of a request the handlers use.
pub struct Req {
    pub method: Method,
    pub path: FullPath,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: BodyStream,
}

/// The whole API: `GET /v1/openapi.json`, `/healthz` and `/readyz` without a token, everything
/// else under `/v1` with one.
pub fn routes(app: Arc<App>) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone {
    let web = app.web.clone();
    let log = app.access_log.clone();
    let on = log.is_some();
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
    let all = openapi.or(healthz).unify().or(readyz).unify().or(api).unify();
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

/// A resource type named by a path segment; any other segment is no route.
struct TypeSegment(&'static ResourceType);

impl FromStr for TypeSegment {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        resources::by_name(s).map(TypeSegment).ok_or(())
    }
}

/// The route the path under `/v1/` names, if any (`None`: a 404 after authorization). One
/// filter reads the whole rest of the path, where a filter per route shape would parse its
/// segments again for each shape tried.
fn route() -> impl Filter<Extract = (Option<Route>,), Error = Infallible> + Clone {
    warp::path::tail().map(|rest: warp::path::Tail| Route::of(rest.as_str()))
}

impl Route {
    /// The route of `rest`, the path after `/v1/`, in segments as sent (not percent-decoded),
    /// none of them empty; one trailing `/` is allowed:
    /// - `operations`: POST runs atomic operations;
    /// - `{type}`: GET lists, POST creates;
    /// - `{type}/{id}`: GET reads, PATCH updates, DELETE deletes;
    /// - `{type}/{id}/{relationship}`: GET reads the related resource(s);
    /// - `{type}/{id}/relationships/{relationship}`: GET and PATCH the linkage; POST adds to
    ///   and DELETE removes from a to-many linkage.
    fn of(rest: &str) -> Option<Route> {
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let mut segments = [""; 4];
        let mut n = 0;
        for segment in rest.split('/') {
            if segment.is_empty() || n == segments.len() {
                return None;
            }
            segments[n] = segment;
            n += 1;
        }
        if segments[..n] == ["operations"] {
            return Some(Route::Operations);
        }
        let rt = segments[0].parse::<TypeSegment>().ok()?.0;
        let owned = |i: usize| segments[i].to_owned();
        match n {
            1 => Some(Route::Collection(rt)),
            2 => Some(Route::Item(rt, owned(1))),
            3 => Some(Route::Related(rt, owned(1), owned(2))),
            _ if segments[2] == "relationships" => Some(Route::Relationship(rt, owned(1), owned(3))),
            _ => None,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::Route;

    fn shape(rest: &str) -> Option<String> {
        Route::of(rest).map(|r| match r {
            Route::Operations => "operations".into(),
            Route::Collection(rt) => format!("collection {}", rt.name),
            Route::Item(rt, id) => format!("item {} {id}", rt.name),
            Route::Related(rt, id, rel) => format!("related {} {id} {rel}", rt.name),
            Route::Relationship(rt, id, rel) => format!("relationship {} {id} {rel}", rt.name),
        })
    }

    #[test]
    fn paths_name_routes_as_warp_segments_would() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(shape("operations"), some("operations"));
        assert_eq!(shape("operations/"), some("operations"));
        assert_eq!(shape("subjects"), some("collection subjects"));
        assert_eq!(shape("subjects/"), some("collection subjects"));
        assert_eq!(shape("subjects/x%20y"), some("item subjects x%20y"), "segments are not decoded");
        assert_eq!(shape("subjects/1/module"), some("related subjects 1 module"));
        assert_eq!(shape("subjects/1/relationships"), some("related subjects 1 relationships"));
        assert_eq!(shape("subjects/1/relationships/chapters/"), some("relationship subjects 1 chapters"));
        for none in [
            "",
            "/",
            "subjects//",
            "/subjects",
            "subjects//1",
            "nothing",
            "nothing/1",
            "subjects/1/other/chapters",
            "subjects/1/relationships/chapters/more",
            "operations/1",
        ] {
            assert_eq!(shape(none), None, "{none:?}");
        }
    }
}
