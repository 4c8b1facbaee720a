//! Live streams of the change feed (`GET /v1/revisions/stream`, `src/http/stream.rs`): how many
//! may be open, the signal that ends them at shutdown, and the hub that reads each new revision
//! once and hands it to every subscriber.
//!
//! The hub runs only while someone subscribes. It wakes after every write this process commits
//! and every [`POLL`] otherwise (writes of other replicas and processes), reads the revisions
//! after the last one it saw, and sends each into a broadcast ring of [`RING`] events shared by
//! every subscriber: memory is bounded whatever the clients do. A subscriber that falls a whole
//! ring behind (it stopped reading) is dropped; it resumes with `Last-Event-ID`, read from the
//! database. Each event is rendered once per link base (`Event::rendered`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, watch, Semaphore};

use crate::render::Base;
use crate::store::history::{self, Revision};
use crate::store::Db;

/// Events kept for subscribers that are behind.
pub const RING: usize = 4096;
/// How often the hub looks for revisions committed elsewhere.
const POLL: Duration = Duration::from_millis(250);
/// Revisions read at a time.
const READ: usize = 500;
/// Streams open at once unless `--max-streams` says otherwise.
pub const DEFAULT_MAX_STREAMS: usize = 256;
/// A comment sent on a stream that has been quiet this long, so that the client, proxies and
/// the connection's watchdog see it alive.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// A revision whose changes are larger than this is not kept in the ring: its subscribers read
/// it from the database, so the ring holds at most [`RING`] times this and its rendering (about
/// 160 MiB at worst, what a subscriber that stopped reading can keep from being freed).
const KEPT_BYTES: usize = 16 << 10;

/// A new revision on its way to subscribers.
pub struct Event {
    seq: i64,
    /// `None` when larger than [`KEPT_BYTES`].
    pub revision: Option<Revision>,
    /// The event as sent, with the link base it was rendered for.
    rendered: Mutex<Option<(String, Bytes)>>,
}

impl Event {
    /// The event's place in the feed.
    pub fn seq(&self) -> i64 {
        self.seq
    }

    /// The event as sent with links under `base`: rendered by `render` once for the most
    /// recent base asked (in practice there is one).
    pub fn rendered(&self, base: &Base, render: impl FnOnce(&Revision) -> Bytes) -> Bytes {
        let mut kept = self.rendered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, bytes)) = kept.as_ref().filter(|(b, _)| b == base.as_str()) {
            return bytes.clone();
        }
        let Some(revision) = &self.revision else { return Bytes::new() };
        let bytes = render(revision);
        *kept = Some((base.as_str().to_owned(), bytes.clone()));
        bytes
    }
}

/// The streams of one server.
pub struct Streams {
    /// One permit per stream open.
    pub permits: Arc<Semaphore>,
    pub max: usize,
    /// Between two comments on a quiet stream (shorter in tests).
    pub heartbeat: Duration,
    closing: watch::Sender<bool>,
    /// The running hub's ring, if one runs.
    hub: Arc<Mutex<Option<broadcast::Sender<Arc<Event>>>>>,
}

impl Streams {
    pub fn new(max: usize) -> Streams {
        Streams {
            permits: Arc::new(Semaphore::new(max)),
            max,
            heartbeat: HEARTBEAT,
            closing: watch::channel(false).0,
            hub: Arc::default(),
        }
    }

    /// Ends every stream (the server is stopping): they would hold its drain otherwise.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Changes to `true` when the streams are to end.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// The ring of new revisions, the hub started if none runs. Subscribe before reading what
    /// came before: what commits meanwhile is then in the ring too.
    pub fn subscribe(&self, db: &Db) -> broadcast::Receiver<Arc<Event>> {
        let mut hub = self.hub.lock().unwrap_or_else(|e| e.into_inner());
        // A hub ends once no one subscribes: a ring without receivers has none running.
        if let Some(tx) = hub.as_ref().filter(|tx| tx.receiver_count() > 0) {
            return tx.subscribe();
        }
        let (tx, rx) = broadcast::channel(RING);
        *hub = Some(tx.clone());
        tokio::spawn(run(db.clone(), tx, self.hub.clone(), self.closing()));
        rx
    }
}

/// The hub: reads what is new and sends it into the ring, until no one subscribes or the
/// server stops.
async fn run(
    db: Db,
    tx: broadcast::Sender<Arc<Event>>,
    slot: Arc<Mutex<Option<broadcast::Sender<Arc<Event>>>>>,
    mut closing: watch::Receiver<bool>,
) {
    // Ends the hub if no one subscribes, under the lock `subscribe` takes: a subscriber is
    // either counted before, or starts a hub of its own after.
    let unsubscribed = || {
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if tx.receiver_count() > 0 {
            return false;
        }
        if slot.as_ref().is_some_and(|s| s.same_channel(&tx)) {
            *slot = None;
        }
        true
    };
    let mut head = loop {
        match db.read(|t| Ok(history::published(t)?)).await {
            Ok(head) => break head,
            Err(e) => log::debug!("the change stream cannot read the feed now: {e}"),
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = closing.changed() => return,
        }
        if unsubscribed() {
            return;
        }
    };
    let mut more = false;
    loop {
        if *closing.borrow() || unsubscribed() {
            return;
        }
        if !more {
            tokio::select! {
                () = db.committed() => {}
                () = tokio::time::sleep(POLL) => {}
                _ = closing.changed() => return,
            }
        }
        if let Err(e) = db.sync_feed().await {
            log::debug!("the change stream cannot sequence the feed now: {e}");
        }
        let after = head;
        let page = match db.scan(move |t| history::feed(t, after, READ, &[])).await {
            Ok(page) => page,
            Err(e) => {
                log::debug!("the change stream cannot read the feed now: {e}");
                more = false;
                continue;
            }
        };
        if page.pruned {
            // Pruned past the hub's place: go on from the floor (its subscribers behind it are
            // ended when they read from there, and told so when they reconnect).
            if let Ok(floor) = db.read(|t| Ok(history::floor(t)?)).await {
                head = floor;
            }
            continue;
        }
        more = !page.revisions.is_empty() && page.more();
        head = page.next;
        for revision in page.revisions {
            let seq = revision.seq.unwrap_or_default();
            let revision = (revision.changes.len() <= KEPT_BYTES).then_some(revision);
            // No subscriber left: the next round ends the hub.
            let _ = tx.send(Arc::new(Event { seq, revision, rendered: Mutex::new(None) }));
        }
    }
}
