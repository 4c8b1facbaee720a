//! The editor console as HTTP serves it (what it does in a browser is `tests/console/`, in
//! Chromium): the page at `/` and `/console/...`, its files under a versioned path, cached,
//! compressed and revalidated, with a strict policy; `--console off`; and `GET /v1`, which
//! tells the console who the token is.

use std::io::Read;
use std::sync::Arc;

use coursed::app::Web;

use crate::helpers::{on_both, TestApp};
use crate::tokens::{as_token, create};
use crate::web::header;

fn page(path: &str) -> warp::test::RequestBuilder {
    warp::test::request().method("GET").path(path).header("host", "localhost:8080")
}

/// The versioned path of the page's main script.
fn script_of(html: &str) -> String {
    let start = html.find("/console/assets/").expect("the page names its assets");
    let end = start + html[start..].find('"').unwrap();
    let src = &html[start..end];
    assert!(src.ends_with(".css") || src.ends_with(".js"), "{src}");
    src.rsplit_once('/').unwrap().0.trim_end_matches("/js").to_owned() + "/js/main.js"
}

on_both!(the_page_is_served_at_every_view_without_a_token);
async fn the_page_is_served_at_every_view_without_a_token() {
    let t = TestApp::new().await;
    let mut pages = Vec::new();
    for path in ["/", "/console", "/console/", "/console/modules", "/console/subjects/x/edit", "/console/search?q=a"] {
        let (status, h, body) = t.exchange(page(path)).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(header(&h, "content-type"), Some("text/html; charset=utf-8"));
        assert_eq!(header(&h, "cache-control"), Some("no-cache"));
        let policy = header(&h, "content-security-policy").unwrap();
        for rule in [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        ] {
            assert!(policy.contains(rule), "{policy}");
        }
        assert!(!policy.contains("unsafe"), "{policy}");
        assert_eq!(header(&h, "x-content-type-options"), Some("nosniff"));
        assert!(header(&h, "etag").is_some());
        pages.push(body);
    }
    assert!(pages.windows(2).all(|w| w[0] == w[1]), "one page for every view");
    let html = String::from_utf8(pages[0].to_vec()).unwrap();
    assert!(!html.contains("<script>") && !html.contains("style="), "no inline script or style");
    assert!(!html.contains("http://") && !html.contains("https://"), "nothing from another host");
}

on_both!(the_files_are_cached_for_good_under_their_version_and_compressed);
async fn the_files_are_cached_for_good_under_their_version_and_compressed() {
    let t = TestApp::new().await;
    let (_, _, html) = t.exchange(page("/")).await;
    let script = script_of(std::str::from_utf8(&html).unwrap());
    let (status, h, plain) = t.exchange(page(&script)).await;
    assert_eq!(status, 200);
    assert_eq!(header(&h, "content-type"), Some("text/javascript; charset=utf-8"));
    assert_eq!(header(&h, "cache-control"), Some("public, max-age=31536000, immutable"));
    assert!(std::str::from_utf8(&plain).unwrap().contains("import"));
    // gzip, as the API compresses, and the same bytes once unpacked.
    let (status, h, packed) = t.exchange(page(&script).header("accept-encoding", "gzip")).await;
    assert_eq!(status, 200);
    assert_eq!(header(&h, "content-encoding"), Some("gzip"));
    assert!(crate::web::vary(&h).contains("Accept-Encoding"));
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(&packed[..]).read_to_end(&mut unpacked).unwrap();
    assert_eq!(unpacked, plain.to_vec());
    // Revalidated by its tag, weak or strong (If-None-Match compares weakly).
    let tag = header(&h, "etag").unwrap().to_owned();
    let (status, _, _) =
        t.exchange(page(&script).header("accept-encoding", "gzip").header("if-none-match", format!("W/{tag}"))).await;
    assert_eq!(status, 304);
    let (status, _, body) =
        t.exchange(page(&script).header("accept-encoding", "gzip").header("if-none-match", &tag)).await;
    assert_eq!(status, 304);
    assert!(body.is_empty());
    // HEAD: the headers of the GET, no body; `Vary` said once.
    let (status, h, body) = t.exchange(page(&script).method("HEAD")).await;
    assert_eq!(h.get_all("vary").iter().count(), 1, "{h:?}");
    assert_eq!(status, 200);
    assert!(body.is_empty());
    assert_eq!(header(&h, "content-length").map(str::to_owned), Some(plain.len().to_string()));
    // Another version's files, or a file that is not one of them, are not served.
    let other = script.replacen("/assets/", "/assets/0", 1);
    for path in [other.as_str(), "/console/assets/", "/console/assets/x/js/nothing.js", "/console/assets/../Cargo.toml"]
    {
        let (status, h, _) = t.exchange(page(path)).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(header(&h, "content-type"), Some("application/vnd.api+json"), "{path}");
    }
}

on_both!(the_console_only_reads);
async fn the_console_only_reads() {
    let t = TestApp::new().await;
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let (status, h, _) = t.exchange(page("/console/modules").method(method)).await;
        assert_eq!(status, 405, "{method}");
        assert_eq!(header(&h, "allow"), Some("GET, HEAD"));
    }
}

on_both!(console_off_leaves_the_api_alone);
async fn console_off_leaves_the_api_alone() {
    let t = TestApp::new().await.configured(|app| app.web = Arc::new(Web::new(&[], true, false).unwrap()));
    for path in ["/", "/console/modules"] {
        let (status, h, _) = t.exchange(page(path)).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(header(&h, "content-type"), Some("application/vnd.api+json"));
    }
    t.get("/v1/modules").await.assert_status(200);
}

on_both!(the_entry_point_says_who_the_token_is);
async fn the_entry_point_says_who_the_token_is() {
    let t = TestApp::new().await;
    for path in ["/v1", "/v1/"] {
        let r = t.get(path).await;
        r.assert_status(200);
        assert_eq!(r.body["meta"]["caller"]["writes"], true, "{path}");
        assert_eq!(r.body["links"]["self"], "http://localhost:8080/v1");
        assert_eq!(r.body["meta"]["resources"]["modules"], "http://localhost:8080/v1/modules");
        assert_eq!(r.body["meta"]["resources"]["openapi"], "http://localhost:8080/v1/openapi.json");
    }
    let reader = create(&t.database, "display", "read");
    let r = t.send(as_token(&t, &reader, "GET", "/v1", "192.0.2.1:5000")).await;
    r.assert_status(200);
    assert_eq!(r.body["meta"]["caller"], serde_json::json!({"name": "display", "scope": "read", "writes": false}));
    // A token is needed, as everywhere under /v1; it only reads.
    let (status, _, _) = t.exchange(page("/v1")).await;
    assert_eq!(status, 401);
    t.send(t.req("POST", "/v1")).await.assert_status(405);
}
