//! `GET /healthz` and `GET /readyz` for load balancers and orchestrators: outside `/v1`, no
//! token, tiny bodies.

use std::sync::Arc;
use std::time::Duration;

use warp::http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use warp::http::{Method, StatusCode};
use warp::reply::Response;

use super::reply::{error_reply, options};
use super::READ_ONLY;
use crate::app::{App, ReadinessChange};
use crate::error::Error;

/// How long `/readyz` waits for the database before calling it not ready.
const READY_WITHIN: Duration = Duration::from_secs(2);

/// `/healthz`: the process is up and serving HTTP.
pub fn healthz(method: Method) -> Response {
    if let Some(r) = read_only(&method) {
        return r;
    }
    reply(StatusCode::OK, r#"{"status":"ok"}"#)
}

/// `/readyz`: the database answers a query (503 with `Retry-After` otherwise), so that a load
/// balancer sends requests only to replicas that can serve them; 503 with the reason, and no
/// `Retry-After`, once a failed sync stopped the writes until a restart.
pub async fn readyz(method: Method, app: Arc<App>) -> Response {
    if let Some(r) = read_only(&method) {
        return r;
    }
    if let Some(reason) = app.db.failure() {
        // Not ready until restarted: no Retry-After.
        let body = serde_json::json!({"status": "failed", "reason": reason}).to_string();
        let mut r = Response::new(body.into());
        *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        return r;
    }
    let answered = matches!(tokio::time::timeout(READY_WITHIN, app.db.ready()).await, Ok(true));
    match app.readiness.note(answered) {
        Some(ReadinessChange::Lost) => log::warn!(
            "the database does not answer: /readyz answers 503 until it does (a load balancer takes this server \
             out meanwhile), and requests that need it get 503 with Retry-After"
        ),
        Some(ReadinessChange::Back(after)) => {
            log::warn!("the database answers again, after {:.0} s: /readyz answers 200", after.as_secs_f64())
        }
        None => {}
    }
    if !answered {
        let mut r = reply(StatusCode::SERVICE_UNAVAILABLE, r#"{"status":"unavailable"}"#);
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
        return r;
    }
    match app.follow.meta(&app.db).await {
        // How far behind the catalogue it follows this one is.
        Some(follow) => {
            let body = serde_json::json!({"status": "ready", "follow": follow}).to_string();
            let mut r = Response::new(body.into());
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        }
        None => reply(StatusCode::OK, r#"{"status":"ready"}"#),
    }
}

/// The answer to `method` on a path that only reads (`OPTIONS`, or 405), unless it is a read.
pub fn read_only(method: &Method) -> Option<Response> {
    match *method {
        Method::GET | Method::HEAD => None,
        Method::OPTIONS => Some(options(READ_ONLY)),
        _ => Some(error_reply(&Error::method_not_allowed(READ_ONLY.methods))),
    }
}

fn reply(status: StatusCode, body: &'static str) -> Response {
    let mut r = Response::new(body.into());
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}
