//! What browsers and caches need: CORS, HEAD and OPTIONS, compression. Entity tags and
//! conditional requests: `conditional.rs`.

use std::io::Read;
use std::sync::Arc;

use serde_json::json;

use crate::conditional::get_if_none_match;
use crate::helpers::{on_both, TestApp, JSONAPI};
use coursed::app::Web;

const SITE: &str = "https://app.school.example";

fn with_cors(t: TestApp, origins: &[&str]) -> TestApp {
    let origins: Vec<String> = origins.iter().map(|o| o.to_string()).collect();
    t.configured(|app| app.web = Arc::new(Web::new(&origins, true, true).unwrap()))
}

pub fn header<'a>(h: &'a warp::http::HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Every `Vary` value, joined.
pub fn vary(h: &warp::http::HeaderMap) -> String {
    h.get_all("vary").iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>().join(", ")
}

fn preflight(path: &str, origin: &str, method: &str) -> warp::test::RequestBuilder {
    warp::test::request()
        .method("OPTIONS")
        .path(path)
        .header("host", "localhost:8080")
        .header("origin", origin)
        .header("access-control-request-method", method)
        .header("access-control-request-headers", "authorization, content-type, if-match")
}

on_both!(a_preflight_from_a_configured_origin_is_answered_without_a_token);
async fn a_preflight_from_a_configured_origin_is_answered_without_a_token() {
    let t = with_cors(TestApp::new().await, &[SITE, "http://localhost:3000"]);
    let s = t.subject("S", None).await;
    for (path, method, allowed) in [
        ("/v1/subjects".to_owned(), "POST", "GET, POST, HEAD, OPTIONS"),
        (format!("/v1/subjects/{s}"), "PATCH", "GET, PATCH, DELETE, HEAD, OPTIONS"),
        (format!("/v1/subjects/{s}/relationships/chapters"), "POST", "GET, PATCH, POST, DELETE, HEAD, OPTIONS"),
        (format!("/v1/subjects/{s}/relationships/module"), "PATCH", "GET, PATCH, HEAD, OPTIONS"),
        (format!("/v1/subjects/{s}/chapters"), "GET", "GET, HEAD, OPTIONS"),
    ] {
        let (status, h, body) = t.exchange(preflight(&path, SITE, method)).await;
        assert_eq!(status, 204, "{path}");
        assert!(body.is_empty());
        assert_eq!(header(&h, "access-control-allow-origin"), Some(SITE), "{path}");
        assert!(vary(&h).contains("Origin"));
        assert_eq!(header(&h, "access-control-allow-methods"), Some(allowed), "{path}");
        let allowed_headers = header(&h, "access-control-allow-headers").unwrap().to_ascii_lowercase();
        for name in ["authorization", "content-type", "accept", "if-match", "if-none-match"] {
            assert!(allowed_headers.contains(name), "{allowed_headers}");
        }
        assert!(header(&h, "access-control-max-age").unwrap().parse::<u32>().unwrap() > 0);
        assert_eq!(header(&h, "access-control-allow-credentials"), None);
    }
    // A preflight is known by its Access-Control-Request-Method being there, whatever its value.
    let odd = warp::http::HeaderValue::from_bytes("PATCH\u{e9}".as_bytes()).unwrap();
    let mut req = preflight(&format!("/v1/subjects/{s}"), SITE, "PATCH");
    req = req.header("access-control-request-method", odd);
    let (status, h, _) = t.exchange(req).await;
    assert_eq!(status, 204);
    assert_eq!(header(&h, "access-control-allow-methods"), Some("GET, PATCH, DELETE, HEAD, OPTIONS"));
    // A preflight of a path that does not exist gets a 404 the page can read, not permissions.
    let (status, h, _) = t.exchange(preflight("/v1/nope", SITE, "GET")).await;
    assert_eq!(status, 404);
    assert_eq!(header(&h, "access-control-allow-origin"), Some(SITE));
    assert!(header(&h, "access-control-expose-headers").is_some_and(|e| e.contains("ETag")));
    assert_eq!(header(&h, "access-control-allow-methods"), None);
    // Another origin gets no permission, only what any OPTIONS gets.
    let (status, h, _) = t.exchange(preflight("/v1/subjects", "https://evil.example", "POST")).await;
    assert_eq!(status, 204);
    assert_eq!(header(&h, "allow"), Some("GET, POST, HEAD, OPTIONS"));
    for name in ["access-control-allow-origin", "access-control-allow-methods", "access-control-allow-headers"] {
        assert_eq!(header(&h, name), None, "{name}");
    }
    // `*` admits any origin, echoed.
    let t = with_cors(TestApp::new().await, &["*"]);
    let (_, h, _) = t.exchange(preflight("/v1/modules", "http://192.168.1.20:8000", "POST")).await;
    assert_eq!(header(&h, "access-control-allow-origin"), Some("http://192.168.1.20:8000"));
}

on_both!(responses_to_a_configured_origin_carry_cors_headers_errors_included);
async fn responses_to_a_configured_origin_carry_cors_headers_errors_included() {
    let t = with_cors(TestApp::new().await, &[SITE]);
    let m = t.module("M").await;
    let body = json!({"data": {"type": "subjects", "attributes": {"title": "S"}}}).to_string();
    let requests = [
        (t.req("GET", &format!("/v1/modules/{m}")), 200),
        (t.req("POST", "/v1/subjects").header("content-type", JSONAPI).body(body), 201),
        (t.req("GET", "/v1/nothing"), 404),
        (t.req("PUT", "/v1/subjects"), 405),
        (warp::test::request().method("GET").path("/v1/subjects").header("host", "localhost:8080"), 401),
        (warp::test::request().method("GET").path("/healthz"), 200),
        (warp::test::request().method("GET").path("/v1/openapi.json"), 200),
    ];
    for (req, status) in requests {
        let (got, h, _) = t.exchange(req.header("origin", SITE)).await;
        assert_eq!(got, status);
        assert_eq!(header(&h, "access-control-allow-origin"), Some(SITE), "{status}");
        assert!(vary(&h).contains("Origin"));
        let exposed = header(&h, "access-control-expose-headers").unwrap();
        assert!(exposed.contains("Location") && exposed.contains("ETag"), "{exposed}");
        assert_eq!(header(&h, "access-control-allow-credentials"), None);
    }
    let odd = warp::http::HeaderValue::from_bytes("https://app.school.example\u{e9}".as_bytes()).unwrap();
    for origin in [warp::http::HeaderValue::from_static("https://other.example"), odd] {
        let (status, h, _) = t.exchange(t.req("GET", "/v1/modules").header("origin", origin)).await;
        assert_eq!(status, 200);
        assert_eq!(header(&h, "access-control-allow-origin"), None);
        assert!(vary(&h).contains("Origin"));
    }
    // Without --cors-origin nothing changes.
    let plain = TestApp::new().await;
    let (_, h, _) = plain.exchange(plain.req("GET", "/v1/modules").header("origin", SITE)).await;
    assert_eq!(header(&h, "access-control-allow-origin"), None);
    assert!(!vary(&h).contains("Origin"));
}

on_both!(head_answers_as_get_without_a_body_and_options_says_what_is_allowed);
async fn head_answers_as_get_without_a_body_and_options_says_what_is_allowed() {
    let t = TestApp::new().await;
    let m = t.module("M").await;
    let s = t.subject("S", Some(&m)).await;
    for path in [
        format!("/v1/subjects/{s}"),
        "/v1/subjects".to_owned(),
        format!("/v1/modules/{m}/subjects"),
        format!("/v1/subjects/{s}/module"),
        format!("/v1/modules/{m}/relationships/subjects"),
    ] {
        let (status, get_h, get_body) = t.exchange(t.req("GET", &path)).await;
        assert_eq!(status, 200);
        let (status, h, body) = t.exchange(t.req("HEAD", &path)).await;
        assert_eq!(status, 200, "{path}");
        assert!(body.is_empty(), "{path}");
        assert_eq!(header(&h, "etag"), header(&get_h, "etag"), "{path}");
        assert_eq!(header(&h, "content-type"), Some(JSONAPI));
        assert_eq!(header(&h, "content-length"), Some(get_body.len().to_string().as_str()), "{path}");
    }
    let (status, _, body) = t.exchange(t.req("HEAD", "/v1/subjects/01890000-0000-7000-8000-000000000000")).await;
    assert_eq!((status.as_u16(), body.is_empty()), (404, true));
    let (status, _, body) = t.exchange(warp::test::request().method("HEAD").path("/healthz")).await;
    assert_eq!((status.as_u16(), body.is_empty()), (200, true));

    // OPTIONS without CORS: 204 with `Allow`, no token needed; the same list in a 405.
    for (path, allow) in [
        ("/v1/modules".to_owned(), "GET, POST, HEAD, OPTIONS"),
        (format!("/v1/modules/{m}"), "GET, PATCH, DELETE, HEAD, OPTIONS"),
        (format!("/v1/subjects/{s}/relationships/module"), "GET, PATCH, HEAD, OPTIONS"),
        ("/healthz".to_owned(), "GET, HEAD, OPTIONS"),
        ("/v1/openapi.json".to_owned(), "GET, HEAD, OPTIONS"),
    ] {
        let (status, h, _) = t.exchange(warp::test::request().method("OPTIONS").path(&path)).await;
        assert_eq!(status, 204, "{path}");
        assert_eq!(header(&h, "allow"), Some(allow), "{path}");
        assert_eq!(header(&h, "access-control-allow-origin"), None);
    }
    let r = t.send(t.req("PUT", &format!("/v1/subjects/{s}/relationships/module"))).await;
    r.assert_problem(405);
    // A 405 lists the methods that act on the resource, as the contract does.
    assert_eq!(r.header("allow"), Some("GET, PATCH"));
    // A relationship the type does not have is no route, whatever the method.
    t.send(t.req("OPTIONS", &format!("/v1/subjects/{s}/relationships/teachers"))).await.assert_problem(404);
}

fn decode(coding: Option<&str>, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        Some("gzip") => flate2::read::GzDecoder::new(body).read_to_end(&mut out).unwrap(),
        Some("br") => brotli::Decompressor::new(body, 4096).read_to_end(&mut out).unwrap(),
        None => return body.to_vec(),
        Some(other) => panic!("unexpected coding {other}"),
    };
    out
}

on_both!(large_bodies_are_compressed_as_the_client_accepts);
async fn large_bodies_are_compressed_as_the_client_accepts() {
    let t = TestApp::new().await;
    for i in 0..20 {
        t.subject(&format!("Subject number {i} about fractions and decimals"), None).await;
    }
    let (_, plain_h, plain) = t.exchange(t.req("GET", "/v1/subjects")).await;
    assert!(plain.len() > 4096);
    assert_eq!(header(&plain_h, "content-encoding"), None);
    assert!(vary(&plain_h).contains("Accept-Encoding"));
    let tag = header(&plain_h, "etag").unwrap().to_owned();
    for (accept, coding) in [
        ("gzip", Some("gzip")),
        ("gzip, deflate, br", Some("gzip")),
        ("br, gzip;q=0.5", Some("br")),
        ("br;q=0.2, gzip;q=0.9", Some("gzip")),
        ("identity", None),
        ("br;q=0, gzip;q=0", None),
        ("GZIP;Q=1, Br;q=0.1", Some("gzip")),
        // Not visible ASCII: as if absent, and the request is still served.
        ("gzip, \u{e9}", None),
    ] {
        let accept_value = warp::http::HeaderValue::from_bytes(accept.as_bytes()).unwrap();
        let (status, h, body) = t.exchange(t.req("GET", "/v1/subjects").header("accept-encoding", accept_value)).await;
        assert_eq!(status, 200);
        assert_eq!(header(&h, "content-encoding"), coding, "{accept}");
        assert_eq!(decode(coding, &body), plain.to_vec(), "{accept}");
        assert!(vary(&h).contains("Accept-Encoding"));
        if coding.is_some() {
            assert!(body.len() * 3 < plain.len(), "{accept}: {} of {}", body.len(), plain.len());
            let coded_tag = header(&h, "etag").unwrap().to_owned();
            assert_ne!(coded_tag, tag, "a strong tag names one coding");
            // The plain tag revalidates any coding; a coded one the same coding only.
            let req = t.req("GET", "/v1/subjects").header("accept-encoding", accept).header("if-none-match", &tag);
            assert_eq!(t.exchange(req).await.0, 304);
            let req =
                t.req("GET", "/v1/subjects").header("accept-encoding", accept).header("if-none-match", &coded_tag);
            assert_eq!(t.exchange(req).await.0, 304);
            assert_eq!(get_if_none_match(&t, "/v1/subjects", &coded_tag).await.0, 200);
        }
    }
    // Small bodies go as they are; so does everything with compression off.
    let m = t.module("M").await;
    let (_, h, _) = t.exchange(t.req("GET", &format!("/v1/modules/{m}")).header("accept-encoding", "gzip")).await;
    assert_eq!(header(&h, "content-encoding"), None);
    let t = t.configured(|app| app.web = Arc::new(Web::new(&[], false, true).unwrap()));
    let (_, h, body) = t.exchange(t.req("GET", "/v1/subjects").header("accept-encoding", "gzip, br")).await;
    assert_eq!(header(&h, "content-encoding"), None);
    assert_eq!(body, plain);
}

on_both!(options_on_what_does_not_exist_is_404_with_or_without_a_token);
async fn options_on_what_does_not_exist_is_404_with_or_without_a_token() {
    let t = TestApp::new().await;
    let s = t.subject("S", None).await;
    for path in
        ["/v1/teachers".to_owned(), format!("/v1/subjects/{s}/relationships/teachers"), "/v1/subjects/x/y/z".to_owned()]
    {
        let (status, _, _) = t.exchange(warp::test::request().method("OPTIONS").path(&path)).await;
        assert_eq!(status, 404, "OPTIONS {path} without a token");
        t.send(t.req("OPTIONS", &path)).await.assert_problem(404);
    }
}
