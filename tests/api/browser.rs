//! A real browser on another origin: headless Chromium loads a page served from one local port
//! that calls coursed on another with `fetch` and a bearer token — so every call but the first
//! goes through a real CORS preflight — lists subjects, creates one, patches it with
//! `If-Match`, sends a stale patch (412) and revalidates (304); a second coursed without
//! `--cors-origin` must be refused by the browser. The page writes what it saw into its DOM,
//! which Chromium prints (`--dump-dom`) once the page's network is idle.
//!
//! Chromium is found as `chromium` (Debian's package) or `$COURSED_TEST_CHROMIUM`. Without it
//! the test is skipped with a note, unless `COURSED_REQUIRE_BROWSER=1` (as `.ci/run` sets),
//! where a missing browser fails it.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::process::Server;

const TOKEN: &str = "browser-token";
/// How long Chromium may take for the whole page.
const BROWSER_LIMIT: Duration = Duration::from_secs(90);

fn chromium() -> Option<String> {
    if let Ok(path) = std::env::var("COURSED_TEST_CHROMIUM") {
        return Some(path);
    }
    ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|name| {
        let found = Command::new("sh").args(["-c", &format!("command -v {name}")]).output().ok()?;
        let path = String::from_utf8(found.stdout).ok()?.trim().to_owned();
        (found.status.success() && !path.is_empty()).then_some(path)
    })
}

/// Serves `page` to every GET until dropped (each connection answered and closed).
struct PageServer {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl PageServer {
    fn start(listener: TcpListener, page: String) -> PageServer {
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                let mut request_line = String::new();
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let _ = reader.read_line(&mut request_line);
                // The rest of the head, up to the blank line.
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let (status, body) =
                    if request_line.starts_with("GET / ") { ("200 OK", page.as_str()) } else { ("404 Not Found", "") };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        PageServer { port, stop }
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// The page: every step's outcome into `#out` as JSON, then `#done`.
fn page(api: &str, refused_api: &str) -> String {
    let script = r#"
const h = {"Authorization": "Bearer TOKEN", "Accept": "application/vnd.api+json"};
const w = Object.assign({"Content-Type": "application/vnd.api+json"}, h);
const out = {};
const body = (id, title) => JSON.stringify({data: {type: "subjects", id, attributes: {title}}});
(async () => {
  try {
    let r = await fetch(API + "/subjects", {headers: h});
    out.list = {status: r.status, etag: r.headers.get("ETag"), count: (await r.json()).data.length};
    r = await fetch(API + "/subjects", {method: "POST", headers: w,
      body: JSON.stringify({data: {type: "subjects", attributes: {title: "From the browser"}}})});
    const created = await r.json();
    out.create = {status: r.status, location: r.headers.get("Location"), etag: r.headers.get("ETag"), id: created.data.id};
    const id = created.data.id;
    r = await fetch(API + "/subjects/" + id, {method: "PATCH", headers: Object.assign({"If-Match": out.create.etag}, w),
      body: body(id, "Patched in the browser")});
    out.patch = {status: r.status, etag: r.headers.get("ETag"), title: (await r.json()).data.attributes.title};
    r = await fetch(API + "/subjects/" + id, {method: "PATCH", headers: Object.assign({"If-Match": out.create.etag}, w),
      body: body(id, "Stale edit")});
    const stale = await r.json();
    out.stale = {status: r.status, code: stale.errors[0].code};
    r = await fetch(API + "/subjects/" + id, {headers: Object.assign({"If-None-Match": out.patch.etag}, h)});
    out.revalidate = {status: r.status};
  } catch (e) {
    out.error = String(e);
  }
  try {
    await fetch(REFUSED + "/subjects", {headers: h});
    out.refused = "allowed";
  } catch (e) {
    out.refused = e.name;
  }
  document.getElementById("out").textContent = JSON.stringify(out);
  document.getElementById("done").textContent = "done";
})();
"#
    .replace("TOKEN", TOKEN)
    .replace("API", &format!("{api:?}"))
    .replace("REFUSED", &format!("{refused_api:?}"));
    format!("<!doctype html><html><head><title>coursed</title></head><body><pre id=\"out\"></pre><p id=\"done\"></p><script>{script}</script></body></html>")
}

/// What the page wrote into `#out`, from Chromium's dump of the DOM.
fn run_chromium(browser: &str, url: &str) -> Value {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--virtual-time-budget=30000", "--dump-dom", url])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    // Chromium closes its output when it exits.
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut dom = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut dom);
        let _ = tx.send(dom);
    });
    let dom = rx.recv_timeout(BROWSER_LIMIT);
    if dom.is_err() {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    let dom = dom.unwrap_or_else(|_| panic!("chromium did not finish within {BROWSER_LIMIT:?}"));
    assert!(status.success(), "chromium exited with {status}: {dom}");
    assert!(dom.contains("<p id=\"done\">done</p>"), "the page did not finish: {dom}");
    let start = dom.find("<pre id=\"out\">").expect("#out in the DOM") + "<pre id=\"out\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let text = dom[start..end].replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("#out is not JSON ({e}): {text}"))
}

#[test]
fn a_page_on_another_origin_lists_creates_and_edits_through_cors() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var("COURSED_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "COURSED_REQUIRE_BROWSER=1 but no Chromium was found (apt-get install chromium)"
        );
        eprintln!("note: no Chromium found (apt-get install chromium): the browser test is skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let db = dir.path().join("browser.db");
    let api = Server::start(&["--database", db.to_str().unwrap(), "--token", TOKEN, "--cors-origin", &origin]);
    let refused_db = dir.path().join("refused.db");
    let refused = Server::start(&["--database", refused_db.to_str().unwrap(), "--token", TOKEN]);
    let (api_url, refused_url) = (format!("http://{}/v1", api.addr), format!("http://{}/v1", refused.addr));
    let pages = PageServer::start(listener, page(&api_url, &refused_url));

    let out = run_chromium(&browser, &format!("{origin}/"));
    drop(pages);
    assert_eq!(out.get("error"), None, "the page failed: {out}");
    assert_eq!(out["list"]["status"], 200, "{out}");
    assert_eq!(out["list"]["count"], 0);
    assert!(out["list"]["etag"].as_str().is_some_and(|t| t.starts_with('"')), "ETag readable by the page: {out}");
    assert_eq!(out["create"]["status"], 201);
    let id = out["create"]["id"].as_str().unwrap();
    assert_eq!(out["create"]["location"], format!("{api_url}/subjects/{id}"), "Location readable by the page");
    assert_eq!(out["patch"]["status"], 200);
    assert_eq!(out["patch"]["title"], "Patched in the browser");
    assert_ne!(out["patch"]["etag"], out["create"]["etag"]);
    assert_eq!(out["stale"]["status"], 412);
    assert_eq!(out["stale"]["code"], "precondition_failed");
    assert_eq!(out["revalidate"]["status"], 304);
    assert_eq!(out["refused"], "TypeError", "a server without --cors-origin must be refused by the browser");
    // What the page did is what the server holds: the stale edit changed nothing.
    let (status, doc) = api.call("GET", &format!("/v1/subjects/{id}"), TOKEN, None);
    assert_eq!(status, 200);
    assert_eq!(doc["data"]["attributes"]["title"], "Patched in the browser");
}
