//! The change feed's order on PostgreSQL: revisions get their place in the feed after they
//! commit, never before.
//!
//! Transactions draw revision ids when they write and commit in another order, so a reader
//! that went by ids could hand out a cursor past a revision that commits later, and its client
//! would never see it. Instead the history triggers note each revision in `revision_pending`,
//! and [`sequence`] moves the committed ones into `revision_feed` with the next consecutive
//! `seq`, under the row lock of `revision_head`: one sequencing transaction at a time across
//! every replica, each appending right after the last committed one, so the committed `seq`
//! are always exactly `1 ..= head`. A revision that commits late is sequenced late: behind no
//! cursor ever handed out. Readers read `revision_feed` only (the proof is in
//! docs/design/history.md, section 3).
//!
//! Each process runs a thread that sequences after its own commits (nudged, no I/O on the
//! request's path) and every [`IDLE`] otherwise, which covers other replicas and other
//! programs; a feed read sequences first (see [`super::Postgres::sync_feed`]), so that a
//! client reads its own writes on any replica.

use std::sync::{Condvar, Mutex, Weak};
use std::time::Duration;

use super::batch::Engine;
use super::client::PgConn;

/// How often the thread looks for revisions committed elsewhere.
const IDLE: Duration = Duration::from_millis(250);
/// The least time between two rounds that found work: under a stream of writes, each round
/// takes what committed meanwhile, in one transaction (a sequencing commit syncs the WAL like
/// any other: at 5 ms, W4 paid for 200 of them a second).
const GATHER: Duration = Duration::from_millis(50);
/// The most revisions one sequencing transaction takes.
const BATCH: i64 = 10_000;

/// Sequences what is committed: one transaction of at most [`BATCH`] revisions, repeated while
/// full. Returns how many revisions got their place. Waits for another sequencer (any replica)
/// that holds the head.
pub fn sequence(conn: &mut PgConn) -> Result<u64, tokio_postgres::Error> {
    // Nothing waits (most rounds of an idle server): no transaction, no lock.
    let waiting: bool = conn.rows("SELECT EXISTS (SELECT 1 FROM revision_pending)", &[])?[0].get(0);
    if !waiting {
        return Ok(0);
    }
    let mut total = 0;
    loop {
        let n = sequence_batch(conn)?;
        total += n;
        if n < BATCH as u64 {
            return Ok(total);
        }
    }
}

fn sequence_batch(conn: &mut PgConn) -> Result<u64, tokio_postgres::Error> {
    conn.batch("BEGIN ISOLATION LEVEL READ COMMITTED")?;
    let moved = (|| {
        // The one point of order: after the wait, the head the last sequencer committed.
        let head: i64 = conn.rows("SELECT head FROM revision_head WHERE id = 1 FOR UPDATE", &[])?[0].get(0);
        // A statement of its own, so its snapshot is taken with the lock held.
        let rows = conn.rows(
            "WITH d AS (DELETE FROM revision_pending
                        WHERE revision IN (SELECT revision FROM revision_pending ORDER BY revision LIMIT $2)
                        RETURNING revision),
                  f AS (INSERT INTO revision_feed (seq, revision)
                        SELECT $1 + row_number() OVER (ORDER BY revision), revision FROM d RETURNING 1)
             SELECT count(*) FROM f",
            &[&head, &BATCH],
        )?;
        let n: i64 = rows[0].get(0);
        if n > 0 {
            conn.rows("UPDATE revision_head SET head = head + $1 WHERE id = 1", &[&n])?;
        }
        Ok(n as u64)
    })();
    match moved {
        Ok(n) => conn.batch("COMMIT").map(|()| n),
        Err(e) => {
            let _ = conn.batch("ROLLBACK");
            Err(e)
        }
    }
}

/// Wakes the sequencing thread after a commit.
#[derive(Default)]
pub struct Nudge {
    pending: Mutex<bool>,
    wake: Condvar,
}

impl Nudge {
    pub fn nudge(&self) {
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify_one();
    }

    /// Waits for a nudge or `timeout`.
    fn wait(&self, timeout: Duration) {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let (mut pending, _) =
            self.wake.wait_timeout_while(pending, timeout, |p| !*p).unwrap_or_else(|e| e.into_inner());
        *pending = false;
    }
}

/// Runs the sequencing thread for as long as the engine lives.
pub fn start(engine: Weak<Engine>) {
    let spawned = std::thread::Builder::new().name("coursed-pg-feed".into()).spawn(move || loop {
        let Some(nudge) = engine.upgrade().map(|e| e.feed.clone()) else { return };
        nudge.wait(IDLE);
        let Some(engine) = engine.upgrade() else { return };
        let Ok(mut conn) = engine.pool.get() else { continue };
        match sequence(&mut conn) {
            Ok(0) => {}
            Ok(n) => {
                log::trace!("sequenced {n} revisions into the feed");
                drop((conn, engine));
                std::thread::sleep(GATHER);
            }
            // A lost connection leaves the pool by itself; the next round tries again.
            Err(e) => {
                conn.broken = conn.is_closed();
                log::debug!("cannot sequence revisions now: {e}");
            }
        }
    });
    if let Err(e) = spawned {
        log::warn!("cannot start sequencing the change feed ({e}); feed reads sequence it themselves");
    }
}
