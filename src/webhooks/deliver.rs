//! Delivering webhooks, in every server: each looks for webhooks that are due a few times a
//! second, takes a webhook's lease in the database (one server delivers it at a time), and
//! delivers its revisions one by one in feed order in a task of its own: a 2xx moves its cursor
//! on in the same statement that renews the lease; anything else (no answer within the limit
//! included) is tried again after a backoff that doubles from 1 s to 1 h, and after 24 h of
//! failures the webhook is marked failing until `coursed webhook resume`. A delivery never holds
//! a transaction open while it waits for a receiver, so a slow or dead receiver slows no write
//! and no other webhook.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use super::store::{self, Outcome, Webhook};
use super::{signing_key, Filter, SigningKey};
use crate::background::Stop;
use crate::client::{self, Target};
use crate::priority::Saturation;
use crate::render::Base;
use crate::resources;
use crate::store::history::{self, revision_id, Revision};
use crate::store::{Db, WriteContext};

/// How deliveries are paced; the defaults are what the README says.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long a receiver may take to answer.
    pub timeout: Duration,
    /// The wait after a first failure; it doubles with each one after, up to `longest_wait`.
    pub first_wait: Duration,
    pub longest_wait: Duration,
    /// After failing for this long, a webhook is marked failing (and no longer tried).
    pub give_up_after: Duration,
    /// How often a server looks for webhooks that are due.
    pub every: Duration,
    /// How long a lease holds without being renewed: longer than one delivery may take (it is
    /// renewed whenever a delivering server records how far it got), short enough that a server
    /// that died holds its webhooks up for no longer.
    pub lease: Duration,
    /// While requests want every core ([`Saturation`]), deliveries wait, for up to this long at
    /// a time: after it, they go on while the saturation lasts (in the idle class), so none
    /// falls further behind than this and the time to catch up.
    pub give_way_for: Duration,
    /// Whether requests want every core (read from the machine; set by hand in tests).
    pub saturation: Saturation,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            timeout: Duration::from_secs(10),
            first_wait: Duration::from_secs(1),
            longest_wait: Duration::from_secs(3600),
            give_up_after: Duration::from_secs(24 * 3600),
            every: Duration::from_millis(200),
            lease: Duration::from_secs(20),
            give_way_for: Duration::from_secs(60),
            saturation: Saturation::machine(),
        }
    }
}

impl Settings {
    /// The wait after the `failures`-th failure in a row (1 s, 2 s, 4 s, ... 1 h).
    pub fn backoff(&self, failures: i64) -> Duration {
        let doublings = u32::try_from(failures.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
        self.first_wait.saturating_mul(1u32 << doublings).min(self.longest_wait)
    }
}

/// Revisions read from the feed at a time.
const PAGE: usize = 100;
/// How often a webhook that is delivering records how far it got (and renews its lease): after
/// a crash, at most what was delivered since is delivered again (at least once).
const RECORD_EVERY: Duration = Duration::from_secs(1);
/// How long a delivery at the head of the feed lets revisions gather before it reads again.
const GATHER: Duration = Duration::from_millis(100);
/// How long a delivery that has sent everything waits for more before it gives its lease up:
/// under a stream of writes it goes on without taking the lease again at every one.
const STAY: Duration = Duration::from_secs(1);

/// The deliveries of a server, on a thread of their own: stopped when dropped (each webhook's
/// progress recorded and its lease given up, so that another server, or this one started
/// again, goes on at once; a POST still waiting for its answer after 2 s is abandoned, and its
/// lease lapses).
pub type Deliveries = crate::background::Background;

/// How long stopping waits for the deliveries in flight.
const STOP_WITHIN: Duration = Duration::from_secs(2);

/// Starts delivering the webhooks of `db` until the returned handle is dropped; `base` is the
/// origin of the links in what is sent (`--public-url`, or the address the server listens on).
/// They run on a thread of their own, with a runtime of their own, in the idle scheduling
/// class: among this server's threads, a delivery runs only when no other wants a core (it
/// falls behind while requests keep every core busy, and catches up after). Linux shares the
/// CPU between sessions or services first, so a database on the same machine is not shielded
/// the same way (docs/history-and-events.md).
///
/// Their reads of the database run on the runtime `spawn` is called from (the server's), at
/// the requests' priority: a read holds a snapshot (on SQLite, one that keeps the WAL from
/// being started over) and a pooled connection, which must not wait on a thread that waits for
/// idle CPU. Called outside a runtime, they read on their own thread.
pub fn spawn(db: Db, base: Base, settings: Settings) -> Result<Deliveries, String> {
    let reads = tokio::runtime::Handle::try_current().ok();
    crate::background::Background::spawn("coursed-webhooks", STOP_WITHIN, true, move |stop| {
        deliver_all(db, base, settings, stop, reads)
    })
}

/// Where the deliveries' reads run (see [`spawn`]).
#[derive(Default)]
struct Reads {
    handle: Option<tokio::runtime::Handle>,
    stop: Stop,
}

impl Reads {
    /// Runs the read `f` on the server's runtime, or here without one. A read still waiting
    /// there when the deliveries are asked to stop is left to finish alone: the server may be
    /// stopping that runtime, or waiting on it for the deliveries.
    async fn run<T, F>(&self, db: &Db, f: F) -> crate::error::Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn crate::store::Tx) -> crate::error::Result<T> + Send + 'static,
    {
        let Some(handle) = &self.handle else { return db.read(f).await };
        let db = db.clone();
        let read = handle.spawn(async move { db.read(f).await });
        tokio::select! {
            done = read => done.map_err(crate::error::Error::internal)?,
            // Not logged: the deliveries are stopping, as asked.
            () = self.stop.wait() => Err(crate::error::Error::busy()),
        }
    }
}

async fn deliver_all(db: Db, base: Base, settings: Settings, stop: Stop, handle: Option<tokio::runtime::Handle>) {
    let owner = uuid::Uuid::new_v4().to_string();
    let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut running = tokio::task::JoinSet::new();
    let pages = Arc::new(Pages { reads: Reads { handle, stop: stop.clone() }, ..Pages::default() });
    let give_way = Arc::new(GiveWay {
        since: Mutex::new(None),
        limit: settings.give_way_for,
        saturation: settings.saturation.clone(),
    });
    let settings = Arc::new(settings);
    let mut tick = tokio::time::interval(settings.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.stopped() {
        tick.tick().await;
        if give_way.now() {
            continue;
        }
        let now = crate::time::now_ms();
        let mine = owner.clone();
        let due = match pages.reads.run(&db, move |tx| Ok(store::due(tx, now, &mine)?)).await {
            Ok(due) => due,
            Err(e) => {
                if !stop.stopped() {
                    log::warn!("webhooks: cannot read which are due: {e}");
                }
                continue;
            }
        };
        for w in due {
            if !lock(&busy).insert(w.id.clone()) {
                continue;
            }
            let delivery = Delivery {
                db: db.clone(),
                pages: pages.clone(),
                base: base.clone(),
                settings: settings.clone(),
                owner: owner.clone(),
                webhook: w,
                stop: stop.clone(),
                renewed: std::time::Instant::now(),
                give_way: give_way.clone(),
            };
            // Out of `busy` however the delivery ends, a panic included.
            let done = Done { busy: busy.clone(), id: delivery.webhook.id.clone() };
            running.spawn(async move {
                let _done = done;
                delivery.run().await;
            });
        }
        while running.try_join_next().is_some() {}
    }
    // Stopping: the deliveries record how far they got and give their leases up.
    let _ = tokio::time::timeout(STOP_WITHIN, async { while running.join_next().await.is_some() {} }).await;
}

/// Deliveries wait while requests want every core, for up to `limit` from when that began.
struct GiveWay {
    /// When the saturation that goes on began.
    since: Mutex<Option<std::time::Instant>>,
    limit: Duration,
    saturation: Saturation,
}

impl GiveWay {
    /// Whether deliveries wait now.
    fn now(&self) -> bool {
        let saturated = self.saturation.now();
        let mut since = lock(&self.since);
        let waiting = saturated && since.get_or_insert_with(std::time::Instant::now).elapsed() < self.limit;
        if !saturated {
            *since = None;
        }
        crate::metrics::M.webhook_waiting.set(i64::from(waiting));
        waiting
    }
}

/// Takes a webhook out of the set of those being delivered when its delivery ends.
struct Done {
    busy: Arc<Mutex<HashSet<String>>>,
    id: String,
}

impl Drop for Done {
    fn drop(&mut self) {
        lock(&self.busy).remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One webhook's deliveries while this server holds its lease.
struct Delivery {
    db: Db,
    pages: Arc<Pages>,
    base: Base,
    settings: Arc<Settings>,
    owner: String,
    webhook: Webhook,
    stop: Stop,
    /// When the lease was last taken or renewed (when the statement was sent: the lease runs
    /// from no earlier).
    renewed: std::time::Instant,
    give_way: Arc<GiveWay>,
}

/// A page of the feed, and the floor when what was asked for was pruned.
type Read = (history::FeedPage, Option<i64>);

/// The pages of the feed this server's webhooks read lately: webhooks that wait at the same
/// place (as they do while they keep up) read each page once, not once each, and each
/// revision's document is rendered once for all of them.
#[derive(Default)]
struct Pages {
    /// Where the pages are read (see [`spawn`]).
    reads: Reads,
    /// Newest last.
    kept: Mutex<Vec<Kept>>,
    /// The documents of revisions sent lately, by revision key, oldest first.
    rendered: Mutex<std::collections::VecDeque<(i64, Bytes)>>,
}

/// Documents kept for the other webhooks (a few pages' worth: those that keep up send the same
/// revisions within moments of each other).
const RENDERED_KEPT: usize = 1024;

/// A page read: after which place, of which types, when, and what it holds.
type Kept = (i64, Vec<&'static str>, std::time::Instant, Arc<Read>);

/// How long a page read is shared (a page only grows at its end, so an older copy is a shorter
/// page, never a wrong one), and how many are kept at most.
const PAGE_SHARED: Duration = Duration::from_millis(250);
const PAGES_KEPT: usize = 8;

impl Pages {
    /// The document of `revision` as POSTed, rendered once for every webhook of this server.
    fn document(&self, base: &Base, revision: &Revision) -> Bytes {
        if let Some((_, body)) = lock(&self.rendered).iter().rev().find(|(key, _)| *key == revision.key) {
            return body.clone();
        }
        let body = Bytes::from(crate::http::revision_json::document(base, revision));
        let mut rendered = lock(&self.rendered);
        if rendered.len() == RENDERED_KEPT {
            rendered.pop_front();
        }
        rendered.push_back((revision.key, body.clone()));
        body
    }

    /// The page of `types` after `after`: a copy read in the last moments, or a new read. A page
    /// with no revision is never shared: a webhook that finds nothing new asks again.
    async fn read(
        &self,
        db: &Db,
        after: i64,
        types: &[&'static resources::ResourceType],
    ) -> crate::error::Result<Arc<Read>> {
        let names: Vec<&'static str> = types.iter().map(|t| t.name).collect();
        // A page read lately from `after`, or from before it and reaching past it: the part
        // after `after` is the page from there (it holds every revision of those types up to
        // its `next`), so webhooks a few revisions apart read the feed once between them.
        let shared = lock(&self.kept).iter().rev().find_map(|(a, n, at, read)| {
            let reaches = read.0.revisions.last().and_then(|r| r.seq).is_some_and(|last| last > after);
            let fits = *a == after || (*a < after && reaches && read.1.is_none());
            (fits && *n == names && at.elapsed() < PAGE_SHARED).then(|| (*a, read.clone()))
        });
        match shared {
            Some((a, read)) if a == after => return Ok(read),
            Some((_, read)) => {
                let (page, floor) = &*read;
                let revisions = page.revisions.iter().filter(|r| r.seq.is_some_and(|s| s > after)).cloned().collect();
                let suffix = history::FeedPage { revisions, next: page.next, head: page.head, pruned: page.pruned };
                return Ok(Arc::new((suffix, *floor)));
            }
            None => {}
        }
        let types = types.to_vec();
        let read = Arc::new(
            self.reads
                .run(db, move |tx| {
                    let page = history::feed(tx, after, PAGE, &types)?;
                    // Revisions pruned before they were delivered: on from the oldest kept.
                    let floor = if page.pruned { Some(history::floor(tx)?) } else { None };
                    Ok((page, floor))
                })
                .await?,
        );
        if !read.0.revisions.is_empty() {
            let mut kept = lock(&self.kept);
            kept.retain(|(_, _, at, _)| at.elapsed() < PAGE_SHARED);
            if kept.len() >= PAGES_KEPT {
                kept.remove(0);
            }
            kept.push((after, names, std::time::Instant::now(), read.clone()));
        }
        Ok(read)
    }
}

/// What was delivered and not yet recorded.
#[derive(Default)]
struct Unrecorded {
    /// The place the cursor may move to (a delivered revision's, or past left-out ones).
    cursor: Option<i64>,
    delivered: i64,
    status: u16,
}

impl Delivery {
    async fn run(mut self) {
        let ctx = WriteContext::system("webhooks");
        let (id, owner) = (self.webhook.id.clone(), self.owner.clone());
        let (asked, now) = (std::time::Instant::now(), crate::time::now_ms());
        let until = now + self.settings.lease.as_millis() as i64;
        // The row as the lease found it: another server may have moved it on since `due` read it.
        match self.db.write(&ctx, move |tx| Ok(store::lease(tx, &id, &owner, now, until)?)).await {
            Ok(Some(current)) => (self.webhook, self.renewed) = (current, asked),
            _ => return,
        }
        let target = match Target::parse(&self.webhook.url) {
            Ok(t) => t,
            Err(e) => {
                self.record(&ctx, &self.failure(None, e)).await;
                return;
            }
        };
        let mut connection = client::Connection::new(target);
        let key = match signing_key(&self.webhook.secret) {
            Ok(key) => key,
            Err(e) => {
                self.record(&ctx, &self.failure(None, e)).await;
                return;
            }
        };
        let filter = match Filter::parse(&self.webhook.types, &self.webhook.actions) {
            Ok(filter) => filter,
            // A filter this build does not know (a type or action of another version): nothing
            // is sent rather than everything.
            Err(e) => {
                self.record(&ctx, &self.failure(None, e)).await;
                return;
            }
        };
        let types: Vec<&'static resources::ResourceType> =
            filter.types.iter().filter_map(|name| resources::by_name(name)).collect();
        let mut pending = Unrecorded::default();
        let mut recorded_at = std::time::Instant::now();
        let mut idle_since: Option<std::time::Instant> = None;
        loop {
            if self.give_way.now() {
                // Requests want every core: what was delivered is recorded and the lease given
                // up; the webhook is taken again when they leave some (by whichever server).
                if self.settle(&ctx, pending).await {
                    self.release(&ctx).await;
                }
                return;
            }
            let after = pending.cursor.unwrap_or(self.webhook.cursor);
            let read = match self.pages.read(&self.db, after, &types).await {
                Ok(read) => read,
                Err(e) => {
                    if !self.stop.stopped() {
                        log::warn!("webhook {}: cannot read the change feed: {e}", self.webhook.id);
                    }
                    self.settle(&ctx, pending).await;
                    self.release(&ctx).await;
                    return;
                }
            };
            let (page, floor) = (&read.0, read.1);
            if let Some(floor) = floor {
                let note =
                    format!("the revisions after cursor {after} up to {floor} were pruned before they were delivered");
                log::warn!("webhook {}: {note}", self.webhook.id);
                if !self.settle(&ctx, std::mem::take(&mut pending)).await
                    || !self.record(&ctx, &Outcome::Skipped { cursor: floor, note: Some(note) }).await
                {
                    return;
                }
                self.webhook.cursor = floor;
                continue;
            }
            if page.revisions.is_empty() && page.next <= after {
                // Up to date: it waits a little for more, then records what is pending and gives
                // the lease up.
                let idle = *idle_since.get_or_insert_with(std::time::Instant::now);
                if idle.elapsed() < STAY && !self.stop.stopped() {
                    if recorded_at.elapsed() >= RECORD_EVERY && pending.cursor.is_some() {
                        recorded_at = std::time::Instant::now();
                        if !self.settle(&ctx, std::mem::take(&mut pending)).await {
                            return;
                        }
                    }
                    self.stop.sleep(self.settings.every).await;
                    continue;
                }
                if self.settle(&ctx, pending).await {
                    self.release(&ctx).await;
                }
                return;
            }
            idle_since = None;
            for revision in &page.revisions {
                let place = revision.seq.unwrap_or(after);
                if filter.keeps_action(&revision.action) {
                    // A POST starts with more of the lease left than it may take, so no other
                    // server can take the webhook while it is on its way: after a stall (this
                    // thread waits for idle CPU while every core is busy), renewed first.
                    if self.renewed.elapsed() + self.settings.timeout + self.settings.lease / 10 >= self.settings.lease
                    {
                        let held = match pending.cursor {
                            Some(_) => self.settle(&ctx, std::mem::take(&mut pending)).await,
                            None => {
                                let cursor = self.webhook.cursor;
                                self.record(&ctx, &Outcome::Skipped { cursor, note: None }).await
                            }
                        };
                        if !held {
                            return;
                        }
                        recorded_at = std::time::Instant::now();
                    }
                    match self.send(&mut connection, &key, revision).await {
                        Ok(status) => {
                            pending.delivered += 1;
                            pending.status = status;
                        }
                        Err(failed) => {
                            // What was delivered before is kept; this revision is tried again.
                            if self.settle(&ctx, std::mem::take(&mut pending)).await {
                                self.record(&ctx, &failed).await;
                            }
                            return;
                        }
                    }
                }
                pending.cursor = Some(place);
                if recorded_at.elapsed() >= RECORD_EVERY {
                    recorded_at = std::time::Instant::now();
                    if !self.settle(&ctx, std::mem::take(&mut pending)).await {
                        return;
                    }
                }
                if self.stop.stopped() {
                    self.settle(&ctx, pending).await;
                    self.release(&ctx).await;
                    return;
                }
            }
            // Left-out revisions past the last one given.
            if page.next > pending.cursor.unwrap_or(after) {
                pending.cursor = Some(page.next);
            }
            // At the head of the feed: what commits next is gathered a moment before the next
            // read (a webhook that keeps up would otherwise read a page of one or two revisions
            // after each send: thousands of reads a second under a stream of writes).
            if !page.more() {
                self.stop.sleep(GATHER).await;
            }
        }
    }

    /// POSTs `revision`: the status of a 2xx, or the failure to record.
    async fn send(
        &self,
        connection: &mut client::Connection,
        key: &SigningKey,
        revision: &Revision,
    ) -> Result<u16, Outcome> {
        let body = self.pages.document(&self.base, revision);
        let message = revision_id(revision.key);
        let timestamp = crate::time::now_ms() / 1000;
        let signature = key.sign(&message, timestamp, &body);
        let headers = [
            ("content-type", crate::jsonapi::JSONAPI.to_owned()),
            ("user-agent", concat!("coursed/", env!("CARGO_PKG_VERSION")).to_owned()),
            ("webhook-id", message),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ];
        match connection.post(&headers, body, self.settings.timeout).await {
            Ok(status) if (200..300).contains(&status) => {
                crate::metrics::M.webhook_delivered.inc();
                Ok(status)
            }
            Ok(status) => Err(self.failure(Some(status), format!("the receiver answered {status}"))),
            Err(e) => Err(self.failure(None, e)),
        }
    }

    /// A failed attempt: tried again after the backoff of one more failure in a row.
    fn failure(&self, status: Option<u16>, error: String) -> Outcome {
        crate::metrics::M.webhook_failed.inc();
        let wait = self.settings.backoff(self.webhook.failures + 1);
        Outcome::Failed {
            status,
            error,
            next_at: crate::time::now_ms() + wait.as_millis() as i64,
            failing_after: self.settings.give_up_after.as_millis() as i64,
        }
    }

    /// Records what `pending` holds (nothing when it holds nothing); false when this server no
    /// longer holds the lease.
    async fn settle(&mut self, ctx: &WriteContext, pending: Unrecorded) -> bool {
        let Some(cursor) = pending.cursor else { return true };
        let outcome = if pending.delivered > 0 {
            Outcome::Delivered { cursor, status: pending.status, count: pending.delivered }
        } else {
            Outcome::Skipped { cursor, note: None }
        };
        let held = self.record(ctx, &outcome).await;
        if held {
            self.webhook.cursor = cursor;
            if pending.delivered > 0 {
                self.webhook.failures = 0;
            }
        }
        held
    }

    /// Records `outcome`, renewing the lease; false when this server no longer holds it.
    async fn record(&mut self, ctx: &WriteContext, outcome: &Outcome) -> bool {
        let (id, owner, outcome) = (self.webhook.id.clone(), self.owner.clone(), outcome.clone());
        let (asked, now) = (std::time::Instant::now(), crate::time::now_ms());
        let until = now + self.settings.lease.as_millis() as i64;
        if let Outcome::Failed { error, .. } = &outcome {
            log::warn!("webhook {} ({}): {error}", self.webhook.id, self.webhook.url);
        }
        match self.db.write(ctx, move |tx| Ok(store::record(tx, &id, &owner, now, until, &outcome)?)).await {
            Ok(held) => {
                if held {
                    self.renewed = asked;
                }
                held
            }
            Err(e) => {
                log::warn!("webhook {}: cannot record a delivery: {e}", self.webhook.id);
                false
            }
        }
    }

    async fn release(&self, ctx: &WriteContext) {
        let (id, owner) = (self.webhook.id.clone(), self.owner.clone());
        if let Err(e) = self.db.write(ctx, move |tx| Ok(store::release(tx, &id, &owner)?)).await {
            log::warn!("webhook {}: cannot give its lease up: {e}", self.webhook.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_one_second_to_an_hour() {
        let s = Settings::default();
        let waits: Vec<u64> = [1, 2, 3, 4, 12, 13, 100].iter().map(|n| s.backoff(*n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 2048, 3600, 3600]);
    }
}
