//! One connection and its watchdog: what its reads, writes and requests tell about it, and the
//! deadlines that follow (a request head, an idle keep-alive, a response the client stopped
//! reading), checked by a timer in the connection's own task.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::server::graceful::GracefulConnection;
use tokio::sync::{watch, Notify};
use warp::http::Version;

use crate::app::Limits;

/// The bytes a response's head is taken to have beside its body (HTTP/1 heads are about this;
/// HTTP/2 sends less, its frame headers aside).
const HEAD_ALLOWANCE: u64 = 256;

/// Times of every connection are milliseconds after this, so that they compare.
static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

/// What a connection's reads, writes and requests tell its watchdog. Times are milliseconds
/// after [`EPOCH`]; every field is touched by one connection (and its HTTP/2 streams), so
/// relaxed atomics suffice.
pub struct Watch {
    /// Requests being handled (HTTP/2 runs several at once).
    busy: AtomicU32,
    /// When the first byte of a request head arrived, plus one; 0 while none is arriving. A
    /// new connection starts out waiting for its first head.
    head_since: AtomicU64,
    /// When the last request was answered (its handler finished).
    idle_since: AtomicU64,
    /// Writes that delivered response bytes so far: a response the client reads slowly is not
    /// idle. Other writes (an HTTP/2 `PING` or `SETTINGS` acknowledged) are no progress.
    writes: AtomicU64,
    /// About how many bytes of the responses given to hyper are not written yet (see
    /// [`Watch::respond`]).
    owed: AtomicU64,
    /// HTTP/2: frames between requests (pings, settings) are not a request head.
    h2: AtomicBool,
    /// Whether a request was ever made on the connection.
    asked: AtomicBool,
    /// Asked to close to make room for a new connection.
    pub(super) evicting: AtomicBool,
    pub(super) evict: Notify,
    /// Told when a request ends, while the server waits for room (see [`super::Room`]).
    room: Arc<super::Room>,
    /// Streamed bodies being sent (the change feed's live stream).
    streams: AtomicU32,
}

/// How long a connection that streams may go without taking any of the bytes owed to it
/// (three heartbeats), unless the idle limit is longer.
const STREAM_STALL: Duration = Duration::from_secs(45);

impl crate::app::ConnHook for Watch {
    fn stream_began(&self) {
        self.streams.fetch_add(1, Relaxed);
    }

    fn stream_ended(&self) {
        if self.streams.fetch_sub(1, Relaxed) == 1 {
            self.idle_since.store(now(), Relaxed);
            self.room.request_ended();
        }
    }

    fn owe(&self, n: usize) {
        self.owed.fetch_add(n as u64, Relaxed);
    }
}

impl Watch {
    pub fn new(room: Arc<super::Room>) -> Watch {
        let now = now();
        Watch {
            busy: AtomicU32::new(0),
            head_since: AtomicU64::new(now + 1),
            idle_since: AtomicU64::new(now),
            writes: AtomicU64::new(0),
            owed: AtomicU64::new(0),
            h2: AtomicBool::new(false),
            asked: AtomicBool::new(false),
            evicting: AtomicBool::new(false),
            evict: Notify::new(),
            room,
            streams: AtomicU32::new(0),
        }
    }

    /// Whether a request is being handled: such a connection is never closed by a deadline.
    pub fn is_busy(&self) -> bool {
        self.busy.load(Relaxed) > 0
    }

    /// What the connection is doing, for choosing one to close to make room.
    pub fn standing(&self) -> Standing {
        if self.is_busy() || self.streams.load(Relaxed) > 0 {
            return Standing::Busy;
        }
        let since = match self.head_since.load(Relaxed) {
            0 => self.idle_since.load(Relaxed),
            head => head - 1,
        };
        if self.asked.load(Relaxed) {
            Standing::Waiting(since)
        } else {
            Standing::New(since)
        }
    }

    pub(super) fn read(&self) {
        if self.head_since.load(Relaxed) == 0 && !self.is_busy() && !self.h2.load(Relaxed) {
            self.head_since.store(now() + 1, Relaxed);
        }
    }

    /// A response of `body` bytes given to hyper to send (its head counted as
    /// [`HEAD_ALLOWANCE`]).
    pub(super) fn respond(&self, body: u64) {
        self.owed.fetch_add(body.saturating_add(HEAD_ALLOWANCE), Relaxed);
    }

    /// A write of `n` bytes to the socket: progress while responses are owed. What is written
    /// beyond them (frames that acknowledge a client's `PING` or `SETTINGS`, or the last few
    /// bytes of a head larger than its allowance) keeps no connection open.
    pub(super) fn wrote(&self, n: usize) {
        let owed = self.owed.fetch_update(Relaxed, Relaxed, |o| Some(o.saturating_sub(n as u64)));
        if owed.is_ok_and(|o| o > 0) {
            self.writes.fetch_add(1, Relaxed);
        }
    }

    pub(super) fn begin(&self, version: Version) {
        self.busy.fetch_add(1, Relaxed);
        self.head_since.store(0, Relaxed);
        self.asked.store(true, Relaxed);
        if version == Version::HTTP_2 {
            self.h2.store(true, Relaxed);
        }
    }

    pub(super) fn end(&self) {
        if self.busy.fetch_sub(1, Relaxed) == 1 {
            self.idle_since.store(now(), Relaxed);
            self.room.request_ended();
        }
    }

    /// How long until the connection is due to close (`None`: now). `progress` is what the
    /// watchdog saw of the writes: their count, and when it last changed.
    fn due(&self, limits: &Limits, progress: &mut (u64, u64)) -> Option<Duration> {
        let recheck = limits.header_timeout.min(limits.idle_timeout);
        if self.is_busy() {
            return Some(recheck);
        }
        let now = now();
        let writes = self.writes.load(Relaxed);
        if writes != progress.0 {
            *progress = (writes, now);
        }
        let head = self.head_since.load(Relaxed);
        let deadline = if head != 0 {
            head - 1 + limits.header_timeout.as_millis() as u64
        } else {
            // A stream is quiet between events, but takes a heartbeat at least every 15 s.
            let limit = match self.streams.load(Relaxed) {
                0 => limits.idle_timeout,
                _ => limits.idle_timeout.max(STREAM_STALL),
            };
            self.idle_since.load(Relaxed).max(progress.1) + limit.as_millis() as u64
        };
        // Waking at least every `recheck` lets a head that starts arriving in the meantime
        // have its own (earlier) deadline on time.
        let left = deadline.checked_sub(now).filter(|&ms| ms > 0)?;
        Some(Duration::from_millis(left).min(recheck))
    }
}

/// Milliseconds since [`EPOCH`].
pub fn now() -> u64 {
    EPOCH.elapsed().as_millis() as u64
}

pub enum Standing {
    /// Serving a request.
    Busy,
    /// Opened at this time and has not made a request yet.
    New(u64),
    /// Has made requests, and waits for the next since this time.
    Waiting(u64),
}

/// Drives `conn` until it ends, closing it when a deadline passes, when the server needs its
/// room, or (once its requests are answered) when the server stops.
pub async fn run<C>(conn: C, watch: Arc<Watch>, limits: Limits, mut stop: watch::Receiver<bool>)
where
    C: GracefulConnection,
    C::Error: std::fmt::Display,
{
    let mut conn = std::pin::pin!(conn);
    let timer = tokio::time::sleep(limits.header_timeout.min(limits.idle_timeout));
    let mut timer = std::pin::pin!(timer);
    let mut progress = (0, 0);
    // Closing an HTTP/2 connection says GOAWAY first and gives it a moment; an HTTP/1
    // connection that is not serving a request has nothing to be told.
    let mut closing = false;
    loop {
        let close = tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    log::debug!("connection ended: {e}");
                }
                return;
            }
            () = &mut timer => {
                if closing {
                    return;
                }
                match watch.due(&limits, &mut progress) {
                    Some(left) => {
                        timer.as_mut().reset(tokio::time::Instant::now() + left);
                        false
                    }
                    None => true,
                }
            }
            () = watch.evict.notified(), if !closing => {
                watch.evicting.store(false, Relaxed);
                !watch.is_busy()
            }
            _ = stop.changed(), if !closing => {
                if watch.is_busy() {
                    // Answer what is in flight, then close.
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                    timer.as_mut().reset(tokio::time::Instant::now() + crate::DRAIN);
                    false
                } else {
                    true
                }
            }
        };
        if close {
            if !watch.h2.load(Relaxed) {
                return;
            }
            conn.as_mut().graceful_shutdown();
            closing = true;
            timer.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(1));
        }
    }
}
