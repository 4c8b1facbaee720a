//! Cross-origin resource sharing, for web applications served from other origins.
//!
//! Clients authenticate with bearer tokens, never cookies, so no response allows credentials.
//! A configured origin gets its own value echoed (`*` in the configuration admits any origin),
//! and every response of a server with CORS on says `Vary: Origin`, so that caches keep the
//! answers to different origins apart.

use warp::http::header::{
    HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ALLOW, VARY,
};
use warp::reply::Response;

use crate::app::Cors;

/// Request headers a page may send.
const ALLOW_HEADERS: &str = "Authorization, Content-Type, Accept, If-Match, If-None-Match, Last-Event-ID";
/// Response headers a page may read beyond the safelisted ones.
const EXPOSE_HEADERS: &str = "Location, ETag, Retry-After, WWW-Authenticate, Allow";
/// How long a browser may keep a preflight's answer (Chromium keeps at most 2 hours).
const MAX_AGE: &str = "7200";

/// Adds to `r` the CORS headers due to a request from `origin` to a server that admits `cors`;
/// `preflight` when the request was `OPTIONS` with `Access-Control-Request-Method` (then `r`
/// holds `Allow`).
pub fn apply(cors: &Cors, origin: Option<&HeaderValue>, preflight: bool, r: &mut Response) {
    if !cors.enabled() {
        return;
    }
    let h = r.headers_mut();
    // One line for both when compression said its part: a second value costs the header
    // map an allocation and the response a line.
    let only_accept_encoding = {
        let mut vary = h.get_all(VARY).iter();
        vary.next().is_some_and(|v| v == "Accept-Encoding") && vary.next().is_none()
    };
    if only_accept_encoding {
        h.insert(VARY, HeaderValue::from_static("Accept-Encoding, Origin"));
    } else {
        h.append(VARY, HeaderValue::from_static("Origin"));
    }
    let Some(origin) = origin.filter(|o| o.to_str().is_ok_and(|o| cors.admits(o))) else { return };
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    // A preflight of a path that exists gets its permissions; any other answer (a
    // preflight's 404 included) is a response the page reads.
    match h.get(ALLOW).cloned().filter(|_| preflight) {
        Some(allow) => {
            h.insert(ACCESS_CONTROL_ALLOW_METHODS, allow);
            h.insert(ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOW_HEADERS));
            h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE));
        }
        None => {
            h.insert(ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSE_HEADERS));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vary_says_origin_once_beside_what_compression_said() {
        let cors = Cors::new(&["https://app.example".into()]).unwrap();
        let origin = HeaderValue::from_static("https://app.example");
        let vary = |before: Option<&'static str>| {
            let mut r = Response::new(Default::default());
            if let Some(v) = before {
                r.headers_mut().insert(VARY, HeaderValue::from_static(v));
            }
            apply(&cors, Some(&origin), false, &mut r);
            r.headers().get_all(VARY).iter().map(|v| v.to_str().unwrap().to_owned()).collect::<Vec<_>>()
        };
        assert_eq!(vary(Some("Accept-Encoding")), ["Accept-Encoding, Origin"]);
        assert_eq!(vary(None), ["Origin"]);
        assert_eq!(vary(Some("Accept")), ["Accept", "Origin"]);
        // Beside two values already there, the first is not rewritten over the second.
        let mut r = Response::new(Default::default());
        r.headers_mut().append(VARY, HeaderValue::from_static("Accept-Encoding"));
        r.headers_mut().append(VARY, HeaderValue::from_static("Accept"));
        apply(&cors, Some(&origin), false, &mut r);
        let all: Vec<_> = r.headers().get_all(VARY).iter().map(|v| v.to_str().unwrap()).collect();
        assert_eq!(all, ["Accept-Encoding", "Accept", "Origin"]);
    }
}
