//! Responses, media-type negotiation, body reading and the one rejection handler.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use warp::http::header::{
    HeaderValue, ACCEPT, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, RETRY_AFTER, WWW_AUTHENTICATE,
};
use warp::http::{HeaderMap, StatusCode};
use warp::reply::Response;
use warp::Rejection;

use super::{BodyStream, Refused};
use crate::error::{Error, Problem};
use crate::tokens::Refusal;

pub use crate::jsonapi::JSONAPI;

/// A JSON:API document response.
pub fn document(status: StatusCode, body: impl Into<warp::hyper::body::Bytes>) -> Response {
    let mut r = Response::new(body.into().into());
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(JSONAPI));
    r
}

/// 201 with `Location`.
pub fn created(location: &str, body: impl Into<warp::hyper::body::Bytes>) -> Response {
    let mut r = document(StatusCode::CREATED, body);
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(LOCATION, v);
    }
    r
}

pub fn no_content() -> Response {
    let mut r = Response::new(warp::hyper::body::Bytes::new().into());
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}

/// 204 to `OPTIONS`, with `Allow` (CORS headers are added on the way out when it is a
/// preflight from a configured origin).
pub fn options(allow: super::Allow) -> Response {
    let mut r = no_content();
    r.headers_mut().insert(ALLOW, HeaderValue::from_static(allow.all));
    r
}

/// The error document, with the headers its status calls for.
pub fn error_reply(e: &Error) -> Response {
    let mut r = document(e.status, e.to_document());
    let h = r.headers_mut();
    match e.status {
        StatusCode::UNAUTHORIZED => {
            h.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        StatusCode::SERVICE_UNAVAILABLE => {
            h.insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        // The rest of a body that came too slowly is not waited for.
        StatusCode::REQUEST_TIMEOUT => {
            h.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        _ => {}
    }
    if let Some(allow) = e.allow {
        h.insert(ALLOW, HeaderValue::from_static(allow));
    }
    r
}

/// Turns what no route took into an error document: a refused token (401, 429, 503) or no
/// such path (404).
pub async fn rejection(r: Rejection) -> Result<Response, Infallible> {
    let e = if let Some(Refused(refusal)) = r.find::<Refused>() {
        match refusal {
            Refusal::Unauthorized => Error::unauthorized(),
            Refusal::Failed(e) => e.clone(),
            Refusal::Throttled(wait) => {
                crate::metrics::M.auth_throttled.inc();
                let mut response = error_reply(&Error::throttled());
                response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(*wait));
                return Ok(response);
            }
        }
    } else if r.is_not_found() {
        Error::no_route()
    } else {
        Error::internal(format!("unhandled rejection: {r:?}"))
    };
    Ok(error_reply(&e))
}

/// 406 when `Accept` asks for the JSON:API media type only with media-type parameters, or
/// for nothing this server can send.
pub fn check_accept(headers: &HeaderMap) -> Result<(), Error> {
    check_accept_ext(headers, None)
}

/// [`check_accept`] on an endpoint that applies the extension `ext`: the JSON:API media type
/// with `ext="<ext>"` as its only parameter is acceptable too.
pub fn check_accept_ext(headers: &HeaderMap, ext: Option<&str>) -> Result<(), Error> {
    let Some(accept) = headers.get(ACCEPT) else { return Ok(()) };
    let accept = accept.to_str().unwrap_or("");
    let mut jsonapi_with_params = false;
    for range in accept.split(',') {
        let (media, params) = media_type(range);
        if media.eq_ignore_ascii_case(JSONAPI) {
            if params.is_empty() || ext.is_some_and(|ext| only_ext(&params, ext)) {
                return Ok(());
            }
            jsonapi_with_params = true;
        } else if ["*/*", "application/*", "application/json"].iter().any(|m| media.eq_ignore_ascii_case(m)) {
            return Ok(());
        }
    }
    let detail = match ext {
        Some(ext) if jsonapi_with_params => format!(
            "`Accept` names {JSONAPI} only with parameters this endpoint does not apply; accept `{JSONAPI}` or \
             `{JSONAPI}; ext=\"{ext}\"`."
        ),
        None if jsonapi_with_params => {
            format!("`Accept` names {JSONAPI} only with media type parameters; accept plain `{JSONAPI}`.")
        }
        _ => format!("This server only sends `{JSONAPI}`; put it (or */*) in `Accept`."),
    };
    Err(Problem::new(StatusCode::NOT_ACCEPTABLE, "not_acceptable", detail).into())
}

/// A media type or range and its parameters before any `q` (names lower-cased, values
/// unquoted), whitespace around `;` and `=` ignored.
fn media_type(range: &str) -> (&str, Vec<(String, String)>) {
    let mut parts = range.split(';').map(str::trim);
    let media = parts.next().unwrap_or("");
    let params = parts
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (name, value) = p.split_once('=').unwrap_or((p, ""));
            (name.trim().to_ascii_lowercase(), value.trim().trim_matches('"').to_owned())
        })
        .take_while(|(name, _)| name != "q")
        .collect();
    (media, params)
}

/// Whether `params` are exactly `ext="..."` naming `ext` and nothing else.
fn only_ext(params: &[(String, String)], ext: &str) -> bool {
    matches!(params, [(name, value)] if name == "ext" && value.split_whitespace().all(|u| u == ext) && !value.trim().is_empty())
}

/// 415 unless `Content-Type` is exactly the JSON:API media type, without parameters.
pub fn check_content_type(headers: &HeaderMap) -> Result<(), Error> {
    let ct = headers.get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or("?"));
    match ct {
        Some(ct) if ct.trim().eq_ignore_ascii_case(JSONAPI) => Ok(()),
        _ => Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("Send the body with `Content-Type: {JSONAPI}` (no parameters); got {}.", ct.unwrap_or("none")),
        )
        .into()),
    }
}

/// 415 unless `Content-Type` is the JSON:API media type with `ext="<ext>"` as its only
/// parameter (whitespace after `;` is allowed).
pub fn check_content_type_ext(headers: &HeaderMap, ext: &str) -> Result<(), Error> {
    let ct = headers.get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or("?"));
    let (media, params) = media_type(ct.unwrap_or(""));
    if media.eq_ignore_ascii_case(JSONAPI) && only_ext(&params, ext) {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!(
            "Send the operations with `Content-Type: {JSONAPI}; ext=\"{ext}\"` (no other parameter or extension); got {}.",
            ct.unwrap_or("none")
        ),
    )
    .into())
}

/// Reads the whole body, refusing (413) as soon as it is known to be over `limit` bytes.
pub async fn read_body(headers: &HeaderMap, body: BodyStream, limit: usize, timeout: Duration) -> Result<Bytes, Error> {
    tokio::time::timeout(timeout, read_limited(headers, body, limit)).await.unwrap_or_else(|_| {
        Err(Problem::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!("The body did not arrive within {} s; send it faster, or send less.", timeout.as_secs_f64()),
        )
        .into())
    })
}

async fn read_limited(headers: &HeaderMap, mut body: BodyStream, limit: usize) -> Result<Bytes, Error> {
    let too_large = || {
        Error::from(Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("The body is larger than {limit} bytes; send less."),
        ))
    };
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut buf = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| Problem::malformed("", format!("The body could not be read: {e}.")))?;
        if buf.len() + chunk.len() > limit {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf.into())
}
