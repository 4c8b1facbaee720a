//! `GET /v1/revisions/stream`: the change feed, live, as server-sent events. Each revision is
//! an event whose `id` is its cursor and whose `data` is the revision's resource object (as
//! `GET /v1/revisions` gives it). Without a cursor the stream starts with what commits after
//! it opened; `Last-Event-ID` (what `EventSource` sends when it reconnects) or `?after=`
//! resumes after a cursor without a gap; `filter[type]` keeps some types.
//!
//! A subscriber subscribes to the hub's ring (`app/streams.rs`) first and reads what came
//! before from the database, then forwards the ring's events; positions in the feed are
//! consecutive, so an event further ahead than the next one says a gap, which is read from
//! the database before it goes on. A client that stops reading is dropped: its chunks wait in
//! a small channel, and one that waits [`STALL`] ends the stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use warp::http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use warp::http::StatusCode;
use warp::reply::{Reply, Response};

use super::reply::error_reply;
use super::Req;
use crate::app::{App, ConnHook};
use crate::error::{Error, Problem, Result};
use crate::render::Base;
use crate::resources::ResourceType;
use crate::store::history::{self, Revision};

/// How long a chunk may wait for the client to take it before the stream ends.
const STALL: Duration = Duration::from_secs(45);
/// Chunks waiting for the client.
const QUEUED: usize = 16;
/// Chunks sent together at most, when several are ready.
const BURST: usize = 64;
/// Revisions read from the database at a time while catching up.
const CATCH_UP: usize = 500;

/// `GET /v1/revisions/stream`.
pub async fn stream(app: &Arc<App>, req: Req) -> Result<Response> {
    let mut after: Option<i64> = None;
    let mut types: Vec<&'static ResourceType> = Vec::new();
    for (k, v) in form_urlencoded::parse(req.query.as_deref().unwrap_or("").as_bytes()) {
        match &*k {
            "after" => after = Some(cursor(&v, "after")?),
            "filter[type]" => types = super::revisions::type_filter(&v)?,
            other => {
                return Err(Problem::bad_param(
                    other,
                    format!("Unknown query parameter `{other}`. Known: after, filter[type]."),
                )
                .into())
            }
        }
    }
    // `Last-Event-ID` wins: it is where a reconnecting client really is.
    if let Some(v) = req.headers.get("last-event-id") {
        let v = v.to_str().map_err(|_| Error::from(Problem::bad_param("Last-Event-ID", "Not a cursor.")))?;
        if !v.trim().is_empty() {
            after = Some(cursor(v.trim(), "Last-Event-ID")?);
        }
    }
    let base = app.base(&req.headers)?;
    let Ok(permit) = app.streams.permits.clone().try_acquire_owned() else {
        let e = Error::from(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!("{} streams are open, as many as this server allows; try again shortly.", app.streams.max),
        ));
        let mut r = error_reply(&e);
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("5"));
        return Ok(r);
    };
    // Where the stream starts is settled before it answers: whatever commits once the client
    // has the answer's head is sent. Below the oldest revision kept, the client must start
    // again from an export.
    let after = match after {
        Some(after) => {
            let floor = app.db.read(|t| Ok(history::floor(t)?)).await?;
            if after < floor {
                return Err(super::revisions::pruned());
            }
            after
        }
        None => {
            app.db.sync_feed().await?;
            app.db.read(|t| Ok(history::published(t)?)).await?
        }
    };
    let (out, chunks) = mpsc::channel::<Bytes>(QUEUED);
    let hook = super::conn_hook();
    let guard = hook.map(StreamGuard::new);
    let sub = Subscriber { app: app.clone(), base, types, out, last: 0, sent_at: tokio::time::Instant::now() };
    tokio::spawn(async move {
        let _permit = permit;
        sub.run(after).await;
    });
    let mut chunks = chunks;
    let body = futures_util::stream::poll_fn(move |cx| {
        let polled = chunks.poll_recv(cx).map(|first| {
            // Whatever else is ready goes out with it: one frame and one write for a burst.
            first.map(|first| {
                let mut more = Vec::new();
                while more.len() < BURST {
                    match chunks.try_recv() {
                        Ok(chunk) => more.push(chunk),
                        Err(_) => break,
                    }
                }
                if more.is_empty() {
                    return first;
                }
                let mut joined =
                    bytes::BytesMut::with_capacity(first.len() + more.iter().map(Bytes::len).sum::<usize>());
                joined.extend_from_slice(&first);
                more.iter().for_each(|c| joined.extend_from_slice(c));
                joined.freeze()
            })
        });
        if let (std::task::Poll::Ready(Some(chunk)), Some(g)) = (&polled, &guard) {
            g.0.owe(chunk.len());
        }
        polled.map(|c| c.map(Ok::<Bytes, std::convert::Infallible>))
    });
    let mut r = warp::reply::stream(body).into_response();
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(r)
}

fn cursor(raw: &str, name: &str) -> Result<i64> {
    raw.parse::<i64>().ok().filter(|n| *n >= 0 && !raw.starts_with('+')).ok_or_else(|| {
        Problem::bad_param(name, format!("`{name}` takes a cursor given by the feed (an event's `id`).")).into()
    })
}

/// Tells the connection a stream is being sent, for as long as its body lives.
struct StreamGuard(Arc<dyn ConnHook>);

impl StreamGuard {
    fn new(hook: Arc<dyn ConnHook>) -> StreamGuard {
        hook.stream_began();
        StreamGuard(hook)
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.stream_ended();
    }
}

struct Subscriber {
    app: Arc<App>,
    base: Base,
    types: Vec<&'static ResourceType>,
    out: mpsc::Sender<Bytes>,
    /// The place of the last revision sent (or skipped by the filter).
    last: i64,
    /// When bytes last went to the client: a heartbeat is due a while after.
    sent_at: tokio::time::Instant,
}

/// The client stopped taking chunks, or went away.
struct Gone;

impl Subscriber {
    async fn run(mut self, after: i64) {
        // First, so that whatever commits from now on is in the ring.
        let mut ring = self.app.streams.subscribe(&self.app.db);
        let mut closing = self.app.streams.closing();
        if self.send(Bytes::from_static(b"retry: 1000\n\n")).await.is_err() {
            return;
        }
        self.last = after;
        if self.catch_up().await.is_err() {
            return;
        }
        let heartbeat = self.app.streams.heartbeat;
        loop {
            let beat = self.sent_at + heartbeat;
            let sent = tokio::select! {
                event = ring.recv() => match event {
                    Ok(event) => self.forward(&event).await,
                    // Fell a whole ring behind, or the hub stopped: the client reconnects
                    // with `Last-Event-ID` and catches up from the database.
                    Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
                },
                () = tokio::time::sleep_until(beat) => self.send(Bytes::from_static(b": \n\n")).await,
                _ = closing.changed() => return,
                () = self.out.closed() => return,
            };
            if sent.is_err() {
                return;
            }
        }
    }

    /// Sends everything the database holds after `last`. A place pruned meanwhile ends the
    /// stream: the client's reconnect is told so (410).
    async fn catch_up(&mut self) -> std::result::Result<(), Gone> {
        loop {
            let after = self.last;
            let page = self.app.db.scan(move |t| history::feed(t, after, CATCH_UP, &[])).await.map_err(|_| Gone)?;
            if page.pruned {
                return Err(Gone);
            }
            for revision in &page.revisions {
                self.send_revision(revision, None).await?;
            }
            // A page may stop short of its size at its byte limit: go on while there is more.
            if page.revisions.is_empty() || !page.more() {
                return Ok(());
            }
        }
    }

    async fn forward(&mut self, event: &crate::app::streams::Event) -> std::result::Result<(), Gone> {
        let seq = event.seq();
        if seq <= self.last {
            return Ok(());
        }
        match &event.revision {
            Some(revision) if seq == self.last + 1 => self.send_revision(revision, Some(event)).await,
            // A gap (committed before the ring had it: the hub started after this stream read),
            // or a revision too large to keep in the ring: from the database, this one included.
            _ => self.catch_up().await,
        }
    }

    async fn send_revision(
        &mut self,
        revision: &Revision,
        event: Option<&crate::app::streams::Event>,
    ) -> std::result::Result<(), Gone> {
        let seq = revision.seq.unwrap_or(self.last);
        if seq <= self.last {
            return Ok(());
        }
        self.last = seq;
        if !self.types.is_empty() && !self.types.iter().any(|t| t.name == revision.resource_type) {
            return Ok(());
        }
        let base = &self.base;
        let render = |r: &Revision| {
            let mut event = format!("id: {seq}\nevent: revision\ndata: ").into_bytes();
            event.reserve(r.changes.len() + 640);
            super::revision_json::write_object(base, r, &mut event);
            event.extend_from_slice(b"\n\n");
            Bytes::from(event)
        };
        let bytes = match event {
            Some(e) => e.rendered(base, render),
            None => render(revision),
        };
        crate::metrics::M.stream_events.inc();
        self.send(bytes).await
    }

    async fn send(&mut self, chunk: Bytes) -> std::result::Result<(), Gone> {
        match tokio::time::timeout(STALL, self.out.send(chunk)).await {
            Ok(Ok(())) => {
                self.sent_at = tokio::time::Instant::now();
                Ok(())
            }
            _ => Err(Gone),
        }
    }
}
