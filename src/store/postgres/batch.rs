//! Group commit for one-statement writes (creates, attribute updates): the writes that arrive
//! while others are running are committed together, in one transaction, by a few leader
//! threads. PostgreSQL's cost of a transaction (its commit record and WAL flush, its snapshot,
//! the round trips of `BEGIN`/`COMMIT`) is then shared by the group instead of paid by every
//! request. Alone, a write runs as before, on its own.
//!
//! A group takes no savepoints (on PostgreSQL each is a subtransaction, which costs every
//! session's snapshots once a transaction holds more than 64): when any statement of a group
//! fails (a duplicate `external_id`, a row deleted meanwhile, a lost connection), the group is
//! rolled back and each of its writes runs again on its own, so that the failure answers only
//! the request that caused it. A write answers only once its group's `COMMIT` succeeded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::tx::PgTx;
use super::workers::Queue;
use super::{run, Pool, Work};
use crate::error::{Error, Result};
use crate::store::tx::{guarded, Shared, Tx};

/// Groups committing at once (each on its own connection).
pub const LEADERS: usize = 4;
/// The most writes in one group.
const MAX_GROUP: usize = 64;

/// One write waiting for its group.
pub trait Job: Send {
    /// Runs the write in the group's transaction and keeps its result.
    fn run_in(&mut self, tx: &mut dyn Tx);
    /// Answers with the kept result, or with `failed` (the group did not commit).
    fn answer(self: Box<Self>, failed: Option<Error>);
    /// Runs the write on its own (as an ungrouped write would) and answers.
    fn run_alone(self: Box<Self>, engine: &Engine);
}

/// What a leader needs to run writes.
pub struct Engine {
    pub pool: Pool,
    pub shared: Arc<Shared>,
    pub name: Arc<str>,
    /// The threads all of it runs on.
    pub workers: super::workers::Workers,
    /// Wakes the change feed's sequencer (see `sequencer.rs`).
    pub feed: Arc<super::sequencer::Nudge>,
}

/// The writes waiting, and how many leaders are running groups.
#[derive(Default)]
pub struct Batcher {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Box<dyn Job>>,
    leaders: usize,
}

impl Batcher {
    /// Queues `job`; starts a leader when fewer than [`LEADERS`] run.
    pub fn submit(self: &Arc<Self>, engine: &Arc<Engine>, job: Box<dyn Job>) {
        let lead = {
            let mut state = self.lock();
            state.queue.push_back(job);
            let lead = state.leaders < LEADERS;
            if lead {
                state.leaders += 1;
            }
            lead
        };
        if lead {
            let mut leading = Leading { batcher: self.clone(), done: false };
            let leader = engine.clone();
            let job = Box::new(move || leading.batcher.clone().lead(&leader, &mut leading));
            engine.workers.submit(job, Queue::Front);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs groups until no write waits.
    fn lead(&self, engine: &Engine, leading: &mut Leading) {
        loop {
            let group: Vec<Box<dyn Job>> = {
                let mut state = self.lock();
                if state.queue.is_empty() {
                    // In the same lock as the look at the queue: a write queued after it
                    // starts a leader of its own.
                    state.leaders -= 1;
                    leading.done = true;
                    return;
                }
                let n = state.queue.len().min(MAX_GROUP);
                state.queue.drain(..n).collect()
            };
            run_group(engine, group);
        }
    }
}

/// A leader's place among the [`LEADERS`], given back however the leader ends: when no write is
/// left (`done`), or by this guard when it panicked or never ran (no thread came free in time).
/// Writes that then have no leader left are answered 503 rather than left waiting.
struct Leading {
    batcher: Arc<Batcher>,
    done: bool,
}

impl Drop for Leading {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let orphans = {
            let mut state = self.batcher.lock();
            state.leaders -= 1;
            if state.leaders == 0 {
                std::mem::take(&mut state.queue)
            } else {
                VecDeque::new()
            }
        };
        if !orphans.is_empty() {
            log::warn!("{} grouped writes lost their leader; answered as unavailable", orphans.len());
        }
        let e = Error::unavailable("PostgreSQL writes could not be run: no connection came free in time");
        for job in orphans {
            job.answer(Some(e.clone()));
        }
    }
}

/// A write of type `T`, re-runnable until it is answered.
pub struct Pending<T, F> {
    pub f: F,
    pub result: Option<Result<T>>,
    pub reply: tokio::sync::oneshot::Sender<Result<T>>,
    /// When it was submitted, and when it first ran (for the metrics' wait and query time).
    pub queued: std::time::Instant,
    pub started: Option<std::time::Instant>,
}

impl<T, F> Job for Pending<T, F>
where
    T: Send + 'static,
    F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
{
    fn run_in(&mut self, tx: &mut dyn Tx) {
        self.started.get_or_insert_with(std::time::Instant::now);
        self.result = Some(guarded(|| (self.f)(tx)));
    }

    fn answer(self: Box<Self>, failed: Option<Error>) {
        if let Some(started) = self.started {
            crate::metrics::M.db(crate::metrics::Work::Write, started - self.queued, started.elapsed());
        }
        let result = match (failed, self.result) {
            (Some(e), _) => Err(e),
            (None, Some(result)) => result,
            (None, None) => Err(Error::internal("a grouped write was not run")),
        };
        let _ = self.reply.send(result);
    }

    fn run_alone(self: Box<Self>, engine: &Engine) {
        let Pending { mut f, reply, queued, .. } = *self;
        let started = std::time::Instant::now();
        let result = run(&engine.pool, &engine.shared, &engine.name, Work::WriteOne, &mut f);
        crate::metrics::M.db(crate::metrics::Work::Write, started - queued, started.elapsed());
        let _ = reply.send(result);
    }
}

fn run_group(engine: &Engine, mut group: Vec<Box<dyn Job>>) {
    if group.len() == 1 {
        if let Some(job) = group.pop() {
            job.run_alone(engine);
        }
        return;
    }
    let mut conn = match engine.pool.get() {
        Ok(conn) => conn,
        Err(e) => {
            let e = Error::unavailable(format!("no connection to PostgreSQL at {}: {e}", engine.name));
            return group.into_iter().for_each(|job| job.answer(Some(e.clone())));
        }
    };
    if !conn.alive() {
        // Died with a restarted server: each write finds another connection on its own.
        conn.broken = true;
        drop(conn);
        return group.into_iter().for_each(|job| job.run_alone(engine));
    }
    let mut tx = PgTx::new(&mut conn, &engine.shared);
    tx.defer("BEGIN ISOLATION LEVEL READ COMMITTED");
    for job in &mut group {
        job.run_in(&mut tx);
        if tx.failed {
            break;
        }
    }
    if tx.failed {
        // Nothing of the group is kept; each write runs again on its own.
        if !tx.conn.broken && !tx.conn.cancel_deferred() {
            tx.rollback();
        }
        drop(conn);
        log::debug!("a group of {} writes failed; running them one by one", group.len());
        return group.into_iter().for_each(|job| job.run_alone(engine));
    }
    if tx.conn.cancel_deferred() {
        // No write reached the server (each answered before writing).
        return group.into_iter().for_each(|job| job.answer(None));
    }
    match tx.batch("COMMIT") {
        Ok(()) => group.into_iter().for_each(|job| job.answer(None)),
        Err(e) if tx.conn.broken => {
            // Lost while committing: whether the group was kept is unknown.
            let e = Error::from(e);
            group.into_iter().for_each(|job| job.answer(Some(e.clone())))
        }
        Err(_) => {
            drop(conn);
            group.into_iter().for_each(|job| job.run_alone(engine))
        }
    }
}
