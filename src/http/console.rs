//! The editor console: a web page for the people who write the content, served from files
//! embedded in the binary (the `console/` folder of the repository), so that `coursed serve`
//! and a browser are all it needs, with no other host asked for anything.
//!
//! - `GET /` and `GET /console/...`: the page (`index.html`), whatever the view the path
//!   names: the page's own script reads the path and shows that view, so that every view has
//!   a URL that a reload or a shared link opens. Never cached without asking again
//!   (`Cache-Control: no-cache` with an `ETag`).
//! - `GET /console/assets/{version}/{file}`: the page's scripts and style sheet. `{version}`
//!   is a hash of every file, so a file's URL changes whenever any file does, and the files
//!   are cached for a year (`immutable`); the scripts import each other by relative paths,
//!   which stay under one version. Another version's URL is a 404.
//!
//! Every file is compressed once (gzip 9 and brotli 11, far smaller than the API's fast levels
//! and paid once per process) and sent in the coding the request accepts, as the API is.
//! The page's `Content-Security-Policy` allows nothing but this origin: no inline script or
//! style, no other host, no plug-in, and no page may frame the console.
//! `serve --console off` leaves all these paths to the API's 404.

use std::io::Write;
use std::sync::OnceLock;

use warp::http::header::{HeaderValue, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY};
use warp::http::{HeaderMap, Method, StatusCode};
use warp::reply::Response;

use super::compress::{self, Coding};
use super::health::read_only;

/// Where the console's files are served from.
pub const ASSETS: &str = "/console/assets/";

/// The policy of the page: this origin only. `img-src data:` lets the page name its (empty)
/// icon inline; `frame-src 'self'` is the preview of a module's content, a sandboxed frame
/// whose document (`srcdoc`) inherits this policy, so that no script runs and nothing is
/// fetched from another host in it either.
pub const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
    connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
    frame-ancestors 'none'";

/// One embedded file.
struct Source {
    path: &'static str,
    bytes: &'static [u8],
}

macro_rules! sources {
    ($($path:literal),* $(,)?) => {
        &[$(Source { path: $path, bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/console/", $path)) }),*]
    };
}

/// Every file of the console (a test checks that the folder holds no other).
static SOURCES: &[Source] = sources![
    "index.html",
    "console.css",
    "js/api.js",
    "js/dom.js",
    "js/edit.js",
    "js/history.js",
    "js/main.js",
    "js/reference.js",
    "js/strings.js",
    "js/views.js",
];

/// A file as served: its bytes in each coding, and their tags.
struct File {
    path: &'static str,
    content_type: &'static str,
    plain: Vec<u8>,
    gzip: Vec<u8>,
    brotli: Vec<u8>,
    tag: String,
}

impl File {
    fn new(path: &'static str, plain: Vec<u8>, version: &str) -> File {
        let content_type = match path.rsplit('.').next() {
            Some("html") => "text/html; charset=utf-8",
            Some("css") => "text/css; charset=utf-8",
            _ => "text/javascript; charset=utf-8",
        };
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let _ = gzip.write_all(&plain);
        let gzip = gzip.finish().unwrap_or_default();
        let mut brotli = brotli::CompressorWriter::new(Vec::new(), 4096, 11, 22);
        let _ = brotli.write_all(&plain);
        let brotli = brotli.into_inner();
        let tag = format!("\"console-{version}-{:016x}", xxhash_rust::xxh3::xxh3_64(&plain));
        File { path, content_type, plain, gzip, brotli, tag }
    }

    fn body(&'static self, coding: Option<Coding>) -> (&'static [u8], String) {
        match coding {
            Some(Coding::Gzip) => (&self.gzip, format!("{}{}\"", self.tag, Coding::Gzip.tag_suffix())),
            Some(Coding::Brotli) => (&self.brotli, format!("{}{}\"", self.tag, Coding::Brotli.tag_suffix())),
            None => (&self.plain, format!("{}\"", self.tag)),
        }
    }
}

/// The console as served: the page and its assets, with the version in their URLs.
pub struct Console {
    pub version: String,
    page: File,
    assets: Vec<File>,
}

impl Console {
    fn build() -> Console {
        let mut hash = xxhash_rust::xxh3::Xxh3::new();
        for s in SOURCES {
            hash.update(s.path.as_bytes());
            hash.update(&[0]);
            hash.update(s.bytes);
        }
        let version = format!("{:016x}", hash.digest());
        let mut page = None;
        let mut assets = Vec::new();
        for s in SOURCES {
            if s.path == "index.html" {
                // Every module is named up front, so that the browser fetches them all at once
                // instead of learning of each from the one that imports it.
                let preload: String = SOURCES
                    .iter()
                    .filter(|s| s.path.ends_with(".js"))
                    .map(|s| format!("<link rel=\"modulepreload\" href=\"{{{{assets}}}}/{}\">\n", s.path))
                    .collect();
                let html = String::from_utf8_lossy(s.bytes)
                    .replace("{{preload}}\n", &preload)
                    .replace("{{assets}}", &format!("{ASSETS}{version}"));
                page = Some(File::new(s.path, html.into_bytes(), &version));
            } else {
                assets.push(File::new(s.path, s.bytes.to_vec(), &version));
            }
        }
        let page = page.unwrap_or_else(|| File::new("index.html", Vec::new(), &version));
        Console { version, page, assets }
    }

    /// The console, compressed on first use.
    pub fn get() -> &'static Console {
        CONSOLE.get_or_init(Console::build)
    }

    /// The bytes of every file in `coding`, in all (what a browser loading it cold receives).
    pub fn size(&'static self, coding: Option<Coding>) -> usize {
        std::iter::once(&self.page).chain(&self.assets).map(|f| f.body(coding).0.len()).sum()
    }
}

static CONSOLE: OnceLock<Console> = OnceLock::new();

/// Whether `path` is the console's (when it is on).
pub fn is_console(path: &str) -> bool {
    path == "/" || path == "/console" || path.starts_with("/console/")
}

/// The access log's name of a console path: no view's or file's name in it.
pub fn template(path: &str) -> super::Template {
    super::Template::Fixed(match path {
        "/" => "/",
        _ if path.starts_with(ASSETS) => "/console/assets/{file}",
        _ => "/console/{view}",
    })
}

/// The answer to `method` on `path` (a console path), with `headers` of the request.
pub async fn serve(method: Method, path: &str, headers: HeaderMap, compression: bool) -> Response {
    if let Some(r) = read_only(&method) {
        return r;
    }
    let console = match CONSOLE.get() {
        Some(console) => console,
        // Compressing the files takes a moment of CPU, not for the async threads.
        None => match tokio::task::spawn_blocking(Console::get).await {
            Ok(console) => console,
            Err(e) => return super::error_reply(&crate::error::Error::internal(e)),
        },
    };
    let coding = if compression {
        headers.get("accept-encoding").and_then(|v| v.to_str().ok()).and_then(compress::negotiate)
    } else {
        None
    };
    let file = match path.strip_prefix(ASSETS) {
        None => Some((&console.page, "no-cache")),
        Some(rest) => rest
            .split_once('/')
            .filter(|(version, _)| *version == console.version)
            .and_then(|(_, name)| console.assets.iter().find(|f| f.path == name))
            .map(|f| (f, "public, max-age=31536000, immutable")),
    };
    let Some((file, cache)) = file else {
        return super::error_reply(&crate::error::Error::no_route());
    };
    let (body, tag) = file.body(coding);
    // Weak comparison, as `If-None-Match` asks (RFC 9110 13.1.2): `W/` does not matter.
    let matched = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').map(str::trim).any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag));
    let mut r = if matched {
        let mut r = Response::new(Default::default());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        // The console lives for the whole process: its bytes are sent without a copy.
        let mut r = Response::new(bytes::Bytes::from_static(body).into());
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(file.content_type));
        if let Some(c) = coding {
            // Said here: the way out (see `web`) leaves an encoded response as it is.
            r.headers_mut().insert(CONTENT_ENCODING, HeaderValue::from_static(c.name()));
            r.headers_mut().insert(VARY, HeaderValue::from_static("Accept-Encoding"));
        }
        r
    };
    let h = r.headers_mut();
    if let Ok(tag) = HeaderValue::from_str(&tag) {
        h.insert(ETAG, tag);
    }
    // `Vary: Accept-Encoding` of what is not encoded is said on the way out (see `web`).
    h.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert("content-security-policy", HeaderValue::from_static(POLICY));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_folder_is_embedded() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("console");
        let mut found = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    found.push(path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/"));
                }
            }
        }
        found.sort();
        let mut listed: Vec<String> = SOURCES.iter().map(|s| s.path.to_owned()).collect();
        listed.sort();
        assert_eq!(found, listed, "list every file of console/ in SOURCES");
    }

    #[test]
    fn the_page_names_its_assets_by_version() {
        let c = Console::get();
        let page = String::from_utf8(c.page.plain.clone()).unwrap();
        assert!(!page.contains("{{assets}}"));
        assert!(page.contains(&format!("{ASSETS}{}/js/main.js", c.version)));
        // The budget the issue sets: 150 KB compressed, in all.
        assert!(c.size(Some(Coding::Gzip)) < 150_000, "{} bytes", c.size(Some(Coding::Gzip)));
    }
}
