//! Reading another coursed's change feed over HTTP: its pages (`GET /v1/revisions`) and its
//! live stream (`GET /v1/revisions/stream`, server-sent events), with a bearer token.

use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value as Json;

use crate::client::{Connection, Target};
use crate::store::history::{from_object, Revision};

/// Revisions asked for per page (the most a page holds).
pub const PAGE: usize = 1000;
/// The most bytes of a page read: a page stops at about 4 MiB of changes, and links and names
/// add less than as much again.
const MOST_PAGE: usize = 64 << 20;
/// How long a page may take to arrive.
const PAGE_WITHIN: Duration = Duration::from_secs(60);
/// How long a stream may stay silent: it sends a comment every 15 s.
pub const SILENT: Duration = Duration::from_secs(45);
/// The longest event read.
const MOST_EVENT: usize = 32 << 20;

/// A page of the upstream's feed.
#[derive(Debug)]
pub struct Page {
    /// The id of the feed.
    pub feed: String,
    /// Its newest place.
    pub head: i64,
    /// In feed order, each with its place (`seq`).
    pub revisions: Vec<Revision>,
}

/// Why a read failed.
#[derive(Debug)]
pub enum Fault {
    /// The revisions after the cursor were pruned upstream (410): this database cannot catch
    /// up by the feed.
    Pruned,
    /// The upstream refused the token, or is not a coursed that has a feed: trying again soon
    /// will not help (but the operator may fix it).
    Refused(String),
    /// Unreachable, slow, or an answer that says to come back: try again later.
    Transient(String),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Pruned => f.write_str(
                "the upstream pruned the revisions after this database's cursor: start again in an empty database \
                 from an export of it (coursed export --history there, coursed import --follow here)",
            ),
            Fault::Refused(why) | Fault::Transient(why) => f.write_str(why),
        }
    }
}

/// The coursed followed: where its API is, and the token it is read with.
pub struct Upstream {
    /// As given (what `meta.follow` and messages show).
    pub url: String,
    target: Target,
    /// The path of its `/v1`.
    api: String,
    headers: Vec<(&'static str, String)>,
    pages: Connection,
}

impl Upstream {
    /// `url` is the upstream's address (`https://district.example`), or its API's
    /// (`https://district.example/v1`).
    pub fn new(url: &str, token: &str) -> Result<Upstream, String> {
        let target = Target::parse(url).map_err(|e| format!("--follow {e}"))?;
        if target.path.contains('?') {
            return Err(format!("--follow {url:?}: give the server's address, without a query"));
        }
        let path = target.path.trim_end_matches('/');
        let api = if path.ends_with("/v1") { path.to_owned() } else { format!("{path}/v1") };
        if token.is_empty() || token.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err("--follow-token: a token of the upstream, without spaces".into());
        }
        let headers = vec![
            ("authorization", format!("Bearer {token}")),
            ("accept", "application/vnd.api+json".to_owned()),
            ("user-agent", concat!("coursed/", env!("CARGO_PKG_VERSION"), " (follower)").to_owned()),
        ];
        let pages = Connection::new(target.clone());
        Ok(Upstream { url: url.trim_end_matches('/').to_owned(), target, api, headers, pages })
    }

    /// The page of up to `size` revisions after the place `after`.
    pub async fn page(&mut self, after: i64, size: usize) -> Result<Page, Fault> {
        let path = format!("{}/revisions?page%5Bafter%5D={after}&page%5Bsize%5D={size}", self.api);
        let (status, body) =
            self.pages.get(&path, &self.headers, PAGE_WITHIN, MOST_PAGE).await.map_err(Fault::Transient)?;
        match status {
            200 => parse_page(&body).map_err(|e| Fault::Transient(format!("{}: {e}", self.url))),
            410 => Err(Fault::Pruned),
            status => Err(refusal(&self.url, status, &body)),
        }
    }

    /// The feed's id and the revision at the place `place` of the upstream's feed; no revision
    /// when it is not there any more (pruned) or not yet.
    pub async fn at(&mut self, place: i64) -> Result<(Option<String>, Option<Revision>), Fault> {
        match self.page(place - 1, 1).await {
            Ok(page) => Ok((Some(page.feed), page.revisions.into_iter().next().filter(|r| r.seq == Some(place)))),
            Err(Fault::Pruned) => Ok((None, None)),
            Err(e) => Err(e),
        }
    }

    /// The live stream of the revisions after `after`.
    pub async fn stream(&self, after: i64) -> Result<Events, Fault> {
        let path = format!("{}/revisions/stream", self.api);
        let mut headers = self.headers.clone();
        headers[1] = ("accept", "text/event-stream".to_owned());
        headers.push(("last-event-id", after.to_string()));
        let (status, body) =
            Connection::new(self.target.clone()).open(&path, &headers, PAGE_WITHIN).await.map_err(Fault::Transient)?;
        if status != 200 {
            let text = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            return Err(refusal(&self.url, status, &text));
        }
        Ok(Events { body, blocks: Blocks::default() })
    }
}

/// What an answer other than 200 (or 410) says.
fn refusal(url: &str, status: u16, body: &[u8]) -> Fault {
    let detail = serde_json::from_slice::<Json>(body)
        .ok()
        .and_then(|d| d["errors"][0]["detail"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let why = format!("{url} answered {status}{}{detail}", if detail.is_empty() { "" } else { ": " });
    match status {
        401 | 403 | 404 => Fault::Refused(why),
        _ => Fault::Transient(why),
    }
}

/// A page of the feed as the API writes it.
fn parse_page(body: &[u8]) -> Result<Page, String> {
    let doc: Json = serde_json::from_slice(body).map_err(|e| format!("not a page of the change feed: {e}"))?;
    let feed = doc["meta"]["feed"].as_str().ok_or("its feed has no id (meta.feed): upgrade it to this coursed")?;
    let head = doc["meta"]["head"].as_str().and_then(|h| h.parse::<i64>().ok()).ok_or("a page without meta.head")?;
    let data = doc["data"].as_array().ok_or("a page without data")?;
    let mut revisions = Vec::with_capacity(data.len());
    for item in data {
        revisions.push(revision(item)?);
    }
    Ok(Page { feed: feed.to_owned(), head, revisions })
}

/// A revision of the feed, with its place (`meta.cursor`).
fn revision(item: &Json) -> Result<Revision, String> {
    let seq = item["meta"]["cursor"].as_str().and_then(|c| c.parse::<i64>().ok());
    let seq = seq.ok_or("a revision without meta.cursor")?;
    let mut r = from_object(item).map_err(|e| format!("revision at {seq}: {e}"))?;
    r.seq = Some(seq);
    Ok(r)
}

/// A live stream's events.
pub struct Events {
    body: Incoming,
    blocks: Blocks,
}

/// What a stream said.
pub enum Said {
    Revision(Revision),
    /// A comment: the stream is alive.
    Alive,
}

impl Events {
    /// The next event (its `data` a revision, its `id` the place) or comment; `None` when the
    /// stream ended. Cancel-safe: what was read stays buffered.
    pub async fn next(&mut self) -> Result<Option<Said>, String> {
        loop {
            while let Some(block) = self.blocks.next() {
                if let Some(said) = parse_event(&block)? {
                    return Ok(Some(said));
                }
            }
            if self.blocks.buf.len() > MOST_EVENT {
                return Err(format!("an event longer than {} MiB", MOST_EVENT >> 20));
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(format!("the stream broke: {e}")),
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        self.blocks.push(data);
                    }
                }
            }
        }
    }
}

/// A stream's bytes cut into its blocks (lines up to a blank line), each byte looked at once.
#[derive(Default)]
struct Blocks {
    buf: Vec<u8>,
    /// How far `buf` was searched for the end of a block.
    searched: usize,
}

impl Blocks {
    fn push(&mut self, data: &[u8]) {
        // Lines may end in CRLF (a proxy's rewriting): CR goes, LF stays.
        self.buf.extend(data.iter().filter(|b| **b != b'\r'));
    }

    /// The next whole block, without its blank line.
    fn next(&mut self) -> Option<Vec<u8>> {
        let from = self.searched.saturating_sub(1);
        match find(&self.buf[from..], b"\n\n").map(|i| i + from) {
            Some(end) => {
                let mut block: Vec<u8> = self.buf.drain(..end + 2).collect();
                block.truncate(end);
                self.searched = 0;
                Some(block)
            }
            None => {
                self.searched = self.buf.len();
                None
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One block of server-sent events (lines up to a blank line): `None` for a `retry:` alone.
fn parse_event(block: &[u8]) -> Result<Option<Said>, String> {
    let text = std::str::from_utf8(block).map_err(|_| "an event that is not UTF-8".to_owned())?;
    let (mut id, mut data, mut comment) = (None, String::new(), false);
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.starts_with(':') {
            comment = true;
            continue;
        }
        let (field, value) = line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
        match field {
            "id" => id = value.parse::<i64>().ok(),
            "data" => {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            }
            _ => {}
        }
    }
    if data.is_empty() {
        return Ok(comment.then_some(Said::Alive));
    }
    let json: Json = serde_json::from_str(&data).map_err(|e| format!("an event whose data is not JSON: {e}"))?;
    let mut r = revision(&json)?;
    if let Some(id) = id {
        r.seq = Some(id);
    }
    Ok(Some(Said::Revision(r)))
}

#[cfg(test)]
mod tests {
    use super::{parse_event, Blocks, Said};

    #[test]
    fn blocks_are_cut_at_blank_lines_across_frames_and_line_ends() {
        let mut b = Blocks::default();
        for frame in ["retry: 1000\n", "\n: alive\r\n\r", "\nid: 7\nda", "ta: {}\n", "\n"] {
            b.push(frame.as_bytes());
        }
        let blocks: Vec<String> = std::iter::from_fn(|| b.next()).map(|x| String::from_utf8(x).unwrap()).collect();
        assert_eq!(blocks, ["retry: 1000", ": alive", "id: 7\ndata: {}"]);
        assert!(b.next().is_none());
        assert!(matches!(parse_event(b": alive"), Ok(Some(Said::Alive))));
        assert!(matches!(parse_event(b"retry: 1000"), Ok(None)));
        assert!(parse_event(b"id: 7\ndata: {}").is_err(), "a revision needs its members");
    }
}
