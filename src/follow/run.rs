//! The follower: catches up by pages of the upstream's feed, then follows its live stream
//! (or, where streams are cut, reads a page every second), applying each batch of revisions
//! in a transaction of its own that moves the cursor.

use std::sync::Arc;
use std::time::Duration;

use super::upstream::{Events, Fault, Page, Said, Upstream, PAGE, SILENT};
use super::{apply_batch, store, Applied, Status};
use crate::background::{Background, Stop};
use crate::store::history::Revision;
use crate::store::{Db, WriteContext};

/// The most revisions applied in one transaction while following the stream.
const BATCH: usize = 1000;
/// How long the stream's next events are waited for before a batch is applied.
const GATHER: Duration = Duration::from_millis(5);
/// How often a follower whose stream is cut reads a page.
const POLL: Duration = Duration::from_secs(1);
/// A stream refused is tried again after this long (pages are read meanwhile).
const STREAM_AGAIN: Duration = Duration::from_secs(30);
/// The wait after a first failure to reach the upstream; it doubles up to [`LONGEST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(500);
const LONGEST_WAIT: Duration = Duration::from_secs(30);
/// The wait after a failure that waiting will not mend (a token refused, a feed pruned).
const REFUSED_WAIT: Duration = Duration::from_secs(60);

/// A follower running in a server (`serve --follow`): stopped when dropped.
pub type Follower = Background;

/// Starts following `url` with `token` into `db`, until the handle is dropped; `status` is
/// kept up to date for `meta.follow`.
pub fn spawn(db: Db, url: &str, token: &str, status: Arc<Status>) -> Result<Follower, String> {
    let upstream = Upstream::new(url, token)?;
    status.follower_says(|k| {
        k.state = "starting";
        k.upstream = Some(upstream.url.clone());
    });
    Background::spawn("coursed-follow", Duration::from_secs(2), false, move |stop| async move {
        let mut f = Follow { db, upstream, status, stop, cursor: None, feed: None, prefetched: None, verify: true };
        f.run().await;
    })
}

/// `coursed follow`: applies everything the upstream's feed holds beyond this database's
/// cursor, then returns what it applied and the cursor.
pub fn catch_up_once(database: &str, url: &str, token: &str) -> Result<String, String> {
    let upstream = Upstream::new(url, token)?;
    let name = crate::store::display_name(database);
    crate::store::on_command_database(database, true, async move |db: &Db| {
        let mut f = Follow {
            db: db.clone(),
            upstream,
            status: Arc::default(),
            stop: Stop::default(),
            cursor: None,
            feed: None,
            prefetched: None,
            verify: true,
        };
        let mut total = 0;
        loop {
            match f.round().await {
                Ok((n, true)) => total += n,
                Ok((n, false)) => {
                    total += n;
                    break;
                }
                Err(e) => return Err(crate::error::Error::unavailable(e.to_string())),
            }
        }
        Ok(format!(
            "{name} follows {}: applied {total} revisions; its cursor is {}",
            f.upstream.url,
            f.cursor.unwrap_or(0)
        ))
    })
}

struct Follow {
    db: Db,
    upstream: Upstream,
    status: Arc<Status>,
    stop: Stop,
    /// The place up to which the database has applied the feed, once read.
    cursor: Option<i64>,
    /// The upstream's feed id, once read.
    feed: Option<String>,
    /// The page after a cursor, read ahead while catching up.
    prefetched: Option<(i64, Result<Page, Fault>)>,
    /// Check that the upstream's feed is still the one applied (at the start, and after the
    /// upstream was out of reach or its stream ended).
    verify: bool,
}

impl Follow {
    async fn run(&mut self) {
        let mut failures = 0u32;
        let mut stream_refused_at: Option<tokio::time::Instant> = None;
        while !self.stop.stopped() {
            let wait = match self.round().await {
                // More to read: at once.
                Ok((_, true)) => {
                    failures = 0;
                    continue;
                }
                Ok((_, false)) => {
                    failures = 0;
                    let may_stream = stream_refused_at.is_none_or(|at| at.elapsed() > STREAM_AGAIN);
                    if !may_stream {
                        self.says("polling", None);
                        self.stop.sleep(POLL).await;
                        continue;
                    }
                    let began = tokio::time::Instant::now();
                    let live = self.live().await;
                    // The upstream may have restarted meanwhile: its feed is checked again.
                    self.verify = true;
                    match live {
                        // A stream that ended at once (a proxy that closes it): not again at once.
                        Ok(()) if began.elapsed() < POLL => {
                            self.stop.sleep(POLL).await;
                            continue;
                        }
                        Ok(()) => continue,
                        Err(Fault::Transient(e)) | Err(Fault::Refused(e)) => {
                            log::info!(
                                "follow: no live stream from {} ({e}); reading a page a second",
                                self.upstream.url
                            );
                            stream_refused_at = Some(tokio::time::Instant::now());
                            continue;
                        }
                        Err(Fault::Pruned) => REFUSED_WAIT,
                    }
                }
                Err(Fault::Transient(e)) => {
                    self.verify = true;
                    failures += 1;
                    self.says("unreachable", Some(e.clone()));
                    if failures == 1 {
                        log::warn!("follow: {e}; trying again");
                    }
                    FIRST_WAIT.saturating_mul(1 << failures.min(8)).min(LONGEST_WAIT)
                }
                Err(e) => {
                    let e = e.to_string();
                    log::error!("follow: {e}");
                    self.says("stopped", Some(e));
                    REFUSED_WAIT
                }
            };
            self.stop.sleep(wait).await;
        }
    }

    fn says(&self, state: &'static str, error: Option<String>) {
        self.status.follower_says(|k| {
            k.state = state;
            k.error = error;
        });
    }

    /// Reads a page after the cursor and applies it: how many were applied, and whether the
    /// upstream has more.
    async fn round(&mut self) -> Result<(u64, bool), Fault> {
        let cursor = match self.cursor {
            Some(c) => c,
            None => self.read_cursor().await?,
        };
        if self.verify && cursor > 0 {
            self.verify_upstream(cursor).await?;
        }
        let page = match self.prefetched.take() {
            Some((after, page)) if after == cursor => page?,
            _ => self.upstream.page(cursor, PAGE).await?,
        };
        let now = crate::time::now_ms();
        self.same_feed(&page.feed)?;
        if page.head < cursor {
            return Err(Fault::Refused(format!(
                "{}'s feed ends at {}, before this database's cursor {cursor}: was it restored from an older backup? \
                 This database cannot follow it",
                self.upstream.url, page.head
            )));
        }
        self.feed = Some(page.feed.clone());
        self.status.follower_says(|k| {
            k.head = page.head;
            k.heard_at = Some(now);
            if page.head > cursor {
                k.behind_since.get_or_insert(now);
            }
            k.state = if page.head > cursor + PAGE as i64 { "catching up" } else { "following" };
            k.error = None;
        });
        let n = page.revisions.len() as u64;
        // A page may stop short of PAGE (at 4 MiB of changes): more is what the head says.
        let more = page.revisions.last().and_then(|r| r.seq).is_some_and(|last| last < page.head);
        // Catching up, the next page is read while this one is written.
        let next = page.revisions.last().and_then(|r| r.seq).filter(|_| more);
        let url = self.upstream.url.clone();
        let written = write(&self.db, &url, self.feed.as_deref(), page.revisions);
        let applied = match next {
            Some(next) => {
                let (applied, page) = tokio::join!(written, self.upstream.page(next, PAGE));
                self.prefetched = Some((next, page));
                applied
            }
            None => written.await,
        };
        self.settle(applied)?;
        Ok((n, more))
    }

    /// Checks that the upstream's revision at `cursor` is the one this database applied there: a
    /// district restored from an older backup of its file has the same feed id, and once it has
    /// written past the cursor, its feed there is another.
    async fn verify_upstream(&mut self, cursor: i64) -> Result<(), Fault> {
        let (feed, theirs) = self.upstream.at(cursor).await?;
        if let Some(feed) = feed {
            self.same_feed(&feed)?;
        }
        let Some(theirs) = theirs else {
            self.verify = false;
            return Ok(());
        };
        let (db, revision) = (self.db.clone(), theirs.clone());
        let kept = db
            .read(move |tx| Ok(store::keeps(tx, &revision)?))
            .await
            .map_err(|e| Fault::Transient(format!("cannot read the history: {e}")))?;
        if !kept {
            return Err(Fault::Refused(format!(
                "{}'s revision at cursor {cursor} ({} {} number {}, {}) is not the one this database applied there: \
                 its feed was restored from an older backup, or begun again. This database cannot follow it; \
                 begin again in an empty database",
                self.upstream.url, theirs.resource_type, theirs.resource_id, theirs.number, theirs.at
            )));
        }
        self.verify = false;
        Ok(())
    }

    /// Refuses an upstream that serves another feed than the one this database follows.
    fn same_feed(&self, theirs: &str) -> Result<(), Fault> {
        match &self.feed {
            Some(feed) if feed != theirs => Err(Fault::Refused(format!(
                "{} serves the feed {theirs}, but this database follows the feed {feed}: a cursor of one means \
                 nothing in the other (was the upstream replaced?)",
                self.upstream.url
            ))),
            _ => Ok(()),
        }
    }

    /// Follows the live stream from the cursor until it ends.
    async fn live(&mut self) -> Result<(), Fault> {
        let cursor = self.cursor.unwrap_or(0);
        let mut events = self.upstream.stream(cursor).await?;
        self.says("following", None);
        loop {
            if self.stop.stopped() {
                return Ok(());
            }
            let batch = match gather(&mut events).await {
                Ok(Some(batch)) => batch,
                // Ended, or silent too long: pages first, then a new stream.
                Ok(None) => return Ok(()),
                Err(e) => {
                    log::info!("follow: the stream from {} ended ({e})", self.upstream.url);
                    return Ok(());
                }
            };
            let now = crate::time::now_ms();
            let newest = batch.last().and_then(|r| r.seq);
            self.status.follower_says(|k| {
                k.heard_at = Some(now);
                if let Some(seq) = newest {
                    k.head = k.head.max(seq);
                    k.behind_since.get_or_insert(now);
                }
            });
            if batch.is_empty() {
                continue;
            }
            let expected = self.cursor.unwrap_or(0) + 1;
            if batch[0].seq != Some(expected) {
                // A gap (or something repeated): the pages say what the feed holds.
                return Ok(());
            }
            self.apply(batch).await?;
        }
    }

    /// Applies a batch in one write and moves the cursor.
    async fn apply(&mut self, revisions: Vec<Revision>) -> Result<(), Fault> {
        let applied = write(&self.db, &self.upstream.url, self.feed.as_deref(), revisions).await;
        self.settle(applied)
    }

    /// Takes in what applying a batch did.
    fn settle(&mut self, applied: Result<Option<Applied>, Fault>) -> Result<(), Fault> {
        if let Ok(Some(Applied::Moved { applied, .. })) = &applied {
            crate::metrics::M.follow_applied.add(*applied);
        }
        match applied {
            Ok(None) => {
                self.caught_up(self.cursor.unwrap_or(0));
                Ok(())
            }
            Ok(Some(Applied::Moved { cursor, .. })) | Ok(Some(Applied::Had { cursor })) => {
                self.cursor = Some(cursor);
                self.caught_up(cursor);
                Ok(())
            }
            Ok(Some(Applied::Gap { cursor, .. })) => {
                // Another follower into this database moved the cursor: go on from there.
                self.cursor = Some(cursor);
                self.prefetched = None;
                Ok(())
            }
            Err(e) => {
                // Read the cursor again before the next try: the database says where it is.
                self.cursor = None;
                self.prefetched = None;
                Err(e)
            }
        }
    }

    /// Notes the cursor, and whether the follower has all the upstream has.
    fn caught_up(&self, cursor: i64) {
        let following = self.feed.clone().map(|feed| store::Following {
            upstream: self.upstream.url.clone(),
            feed,
            cursor,
            applied_at: Some(crate::time::now_ms()),
        });
        self.status.follower_says(|k| {
            if let Some(new) = following {
                // `applied_at` moves only when the cursor does.
                let applied_at = match k.following.as_ref() {
                    Some(old) if old.cursor == cursor => old.applied_at,
                    _ => new.applied_at,
                };
                k.following = Some(store::Following { applied_at, ..new });
            }
            if cursor >= k.head {
                k.behind_since = None;
            }
        });
    }

    /// The cursor as the database keeps it (0 for a database that follows nothing yet).
    async fn read_cursor(&mut self) -> Result<i64, Fault> {
        let following = self
            .db
            .read(|tx| Ok(store::get(tx)?))
            .await
            .map_err(|e| Fault::Transient(format!("cannot read the cursor: {e}")))?;
        let cursor = following.as_ref().map_or(0, |f| f.cursor);
        if let Some(f) = &following {
            self.feed = Some(f.feed.clone());
        }
        self.status.follower_says(|k| {
            k.following = following.map(|f| store::Following { upstream: self.upstream.url.clone(), ..f })
        });
        self.cursor = Some(cursor);
        Ok(cursor)
    }
}

/// Applies `revisions` of `feed` (followed at `url`) to `db` in one write; `None` for none.
async fn write(db: &Db, url: &str, feed: Option<&str>, revisions: Vec<Revision>) -> Result<Option<Applied>, Fault> {
    if revisions.is_empty() {
        return Ok(None);
    }
    let (url, feed) = (url.to_owned(), feed.unwrap_or_default().to_owned());
    let revisions = Arc::new(revisions);
    let applied = db
        .write(&WriteContext::system("follow"), move |tx| {
            // A refusal keeps its message (a 409 here, never sent to a client).
            apply_batch(tx, &url, &feed, &revisions)
                .map_err(|e| crate::error::Problem::new(warp::http::StatusCode::CONFLICT, "follow_refused", e).into())
        })
        .await;
    match applied {
        Ok(applied) => Ok(Some(applied)),
        Err(e) if e.status == warp::http::StatusCode::SERVICE_UNAVAILABLE => {
            Err(Fault::Transient(format!("cannot write now: {e}")))
        }
        Err(e) => {
            let why = e.problems.first().map_or_else(|| e.to_string(), |p| p.detail.clone());
            Err(Fault::Refused(format!("cannot apply the upstream's revisions: {why}")))
        }
    }
}

/// The next events of the stream: one, and those that arrive right behind it (up to
/// [`BATCH`]); an empty batch for a comment; `None` when the stream ended or was silent for
/// [`SILENT`].
async fn gather(events: &mut Events) -> Result<Option<Vec<Revision>>, String> {
    let first = match tokio::time::timeout(SILENT, events.next()).await {
        Err(_) | Ok(Ok(None)) => return Ok(None),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(Some(Said::Alive))) => return Ok(Some(Vec::new())),
        Ok(Ok(Some(Said::Revision(r)))) => r,
    };
    let mut batch = vec![first];
    while batch.len() < BATCH {
        match tokio::time::timeout(GATHER, events.next()).await {
            Ok(Ok(Some(Said::Revision(r)))) => batch.push(r),
            Ok(Ok(Some(Said::Alive))) => {}
            Ok(Ok(None)) | Ok(Err(_)) | Err(_) => break,
        }
    }
    Ok(Some(batch))
}
