//! `GET /v1/openapi.json`: the OpenAPI description, served without a token.

use warp::http::header::{HeaderValue, CONTENT_TYPE};
use warp::http::{Method, StatusCode};
use warp::reply::Response;

use super::reply::error_reply;
use crate::error::Error;

/// Serves the document generated from the resource declarations (built once).
pub fn serve(method: Method) -> Response {
    static DOC: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    if method != Method::GET {
        return error_reply(&Error::method_not_allowed("GET"));
    }
    let body = DOC.get_or_init(|| crate::openapi::document().to_string().into_bytes()).clone();
    let mut r = Response::new(body.into());
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}
