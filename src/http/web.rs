//! What every response passes through on its way out, whatever answered it: compression by
//! `Accept-Encoding`, the body dropped for `HEAD`, and the CORS headers.

use std::convert::Infallible;
use std::sync::Arc;

use std::future::Future as _;

use http_body_util::BodyExt;
use warp::http::header::{HeaderValue, CONTENT_ENCODING, CONTENT_LENGTH, ETAG, VARY};
use warp::http::{HeaderMap, Method, StatusCode};
use warp::reply::Response;
use warp::Filter;

use super::compress::{self, Coding};
use super::cors;
use super::reply::error_reply;
use crate::app::Web;
use crate::error::Error;

/// `inner` with every response finished.
pub fn finish<F>(inner: F, web: Arc<Web>) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone
where
    F: Filter<Extract = (Response,), Error = Infallible> + Clone + Send + Sync + 'static,
{
    // Finishing never waits (the bodies are in memory, see `in_memory`): a ready future, and
    // no future of its own, unless a large body is to be compressed, which goes to the
    // blocking pool (see `super::heavy`).
    warp::method().and(asked()).and(inner).then(move |method: Method, asked: Asked, r: Response| {
        let web = web.clone();
        if web.compression && large(&r) && coding(&asked).is_some() {
            let finished = tokio::task::spawn_blocking(move || {
                crate::priority::lower();
                finish_one(&web, &method, &asked, r)
            });
            return futures_util::future::Either::Right(async move {
                finished.await.unwrap_or_else(|e| error_reply(&Error::internal(e)))
            });
        }
        futures_util::future::Either::Left(std::future::ready(finish_one(&web, &method, &asked, r)))
    })
}

/// Whether compressing `r`'s body is more work than the async threads should do.
fn large(r: &Response) -> bool {
    http_body::Body::size_hint(r.body()).exact().unwrap_or(0) > super::heavy::INLINE_BYTES as u64
}

/// The coding the request accepts, if any.
fn coding(asked: &Asked) -> Option<Coding> {
    asked.accept_encoding.as_ref().and_then(|v| v.to_str().ok()).and_then(compress::negotiate)
}

/// What finishing a response needs of its request: three of its headers, each taken as it
/// came (a reference-counted handle on the bytes hyper parsed, not a copy).
struct Asked {
    accept_encoding: Option<HeaderValue>,
    origin: Option<HeaderValue>,
    /// A preflight's `Access-Control-Request-Method` is present (whatever its value).
    preflight: bool,
}

fn asked() -> impl Filter<Extract = (Asked,), Error = Infallible> + Clone {
    fn header(name: &'static str) -> impl Filter<Extract = (Option<HeaderValue>,), Error = Infallible> + Clone {
        warp::header::value(name).map(Some).or(warp::any().map(|| None)).unify()
    }
    header("accept-encoding").and(header("origin")).and(header("access-control-request-method")).map(
        |accept_encoding, origin, method: Option<HeaderValue>| Asked {
            accept_encoding,
            origin,
            preflight: method.is_some(),
        },
    )
}

fn finish_one(web: &Web, method: &Method, asked: &Asked, mut r: Response) -> Response {
    if web.compression {
        r = compress(coding(asked), r);
    }
    if *method == Method::HEAD {
        // The headers of the GET, its length included; no body.
        let length = http_body::Body::size_hint(r.body()).exact();
        *r.body_mut() = Default::default();
        if let Some(n) = length.filter(|_| !r.headers().contains_key(CONTENT_LENGTH)) {
            r.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(n));
        }
    }
    let preflight = *method == Method::OPTIONS && asked.preflight;
    cors::apply(&web.cors, asked.origin.as_ref(), preflight, &mut r);
    r
}

/// `r` compressed in the coding `accept_encoding` chooses (a value that is not visible ASCII
/// chooses none), when its body is worth it.
///
/// Every response that has a body, or revalidates one (304), says `Vary: Accept-Encoding`,
/// whatever its size: a 304 is not rendered, so it could not tell whether its 200 would have
/// been large enough, and it must say what that 200 says (RFC 9110 §15.4.5). Its tag is already
/// that of the coding the request accepts (see `conditional::if_none_match`).
fn compress(coding: Option<Coding>, mut r: Response) -> Response {
    if r.status() == StatusCode::NO_CONTENT || r.headers().contains_key(CONTENT_ENCODING) {
        return r;
    }
    r.headers_mut().append(VARY, HeaderValue::from_static("Accept-Encoding"));
    let size = http_body::Body::size_hint(r.body()).exact().unwrap_or(0);
    if size < compress::MIN_SIZE as u64 || r.status() == StatusCode::NOT_MODIFIED {
        return r;
    }
    let (mut parts, body) = r.into_parts();
    let Some(coding) = coding else { return Response::from_parts(parts, body) };
    let Some(bytes) = in_memory(body) else {
        return error_reply(&Error::internal("a response body was not in memory"));
    };
    let compressed = coding.compress(&bytes);
    encoded(&mut parts.headers, coding);
    Response::from_parts(parts, compressed.into())
}

/// The bytes of a body that is in memory, as every body of this API is (documents are
/// rendered whole before they are sent): it is read without waiting, or `None`.
fn in_memory<B: http_body::Body<Data = bytes::Bytes>>(body: B) -> Option<bytes::Bytes> {
    let mut collecting = std::pin::pin!(body.collect());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match collecting.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(collected)) => Some(collected.to_bytes()),
        _ => None,
    }
}

/// Marks headers of a body sent in `coding`: `Content-Encoding`, and the tag of that coding.
fn encoded(headers: &mut HeaderMap, coding: Coding) {
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.name()));
    headers.remove(CONTENT_LENGTH);
    let tag = headers.get(ETAG).and_then(|t| t.to_str().ok()).and_then(|t| t.strip_suffix('"'));
    if let Some(v) = tag.and_then(|t| HeaderValue::from_str(&format!("{t}{}\"", coding.tag_suffix())).ok()) {
        headers.insert(ETAG, v);
    }
}
