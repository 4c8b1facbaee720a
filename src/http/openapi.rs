//! `GET /v1/openapi.json`: the OpenAPI description, served without a token.

use warp::http::header::{HeaderValue, CONTENT_TYPE};
use warp::http::{Method, StatusCode};
use warp::reply::Response;

/// Serves the document generated from the resource declarations (built once).
pub fn serve(method: Method) -> Response {
    static DOC: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    if let Some(r) = super::health::read_only(&method) {
        return r;
    }
    let body = DOC.get_or_init(|| crate::openapi::document().to_string().into_bytes()).clone();
    let mut r = Response::new(body.into());
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}
