//! The PostgreSQL engine: a pool of connections shared by reads and writes, any number of
//! coursed processes on one database.
//!
//! * Every unit of work runs on the blocking pool (the client blocks on the network).
//! * A single-statement read runs as it is; a read snapshot is a `REPEATABLE READ READ ONLY`
//!   transaction; a write is a `READ COMMITTED` transaction, in which every statement sees what
//!   concurrent writers (other replicas) committed, unique indexes and foreign keys decide
//!   races on single rows, and a write that reads and changes a set of children takes its
//!   parent's row lock first ([`crate::store::dialect::Dialect::lock_row`]), so that the rules
//!   checked by the generic code (existence, whole-set replaces, orphans) hold. A deadlock (or
//!   serialization failure) is retried here, with back-off, and never reaches the client unless
//!   it persists (then 503).
//! * A connection lost (the server restarted, say) is dropped from the pool and the work is
//!   retried on another one, unless the loss hit a `COMMIT`, whose outcome is then unknown: that
//!   request gets a 503.

mod batch;
mod bulk;
mod client;
mod connect;
mod migrate;
pub mod search;
mod sequencer;
mod tx;
mod workers;

use std::sync::Arc;
use std::time::{Duration, Instant};

use self::batch::{Batcher, Engine, Pending};
use self::client::PgConn;
use self::connect::Manager;
use self::tx::PgTx;
use self::workers::Queue;
use super::tx::{guarded, DbError, Shared, Tx};
use super::{Atomicity, Options, WriteContext};
use crate::error::{Error, Result};

pub use self::bulk::bulk;
pub use self::connect::redact;

/// Connections per process; several replicas share the server's `max_connections`.
const POOL: u32 = 16;
/// How long work waits for a connection (or for a thread to run on) before it is answered 503.
const WAIT: Duration = Duration::from_secs(3);
/// Threads for blocking work: one per connection, and the group leaders' own.
const WORKERS: usize = POOL as usize + batch::LEADERS;
/// Attempts of one unit of work that meets conflicts or lost connections.
const ATTEMPTS: u32 = 8;

type Pool = r2d2::Pool<Manager>;

pub struct Postgres {
    /// Always `Some` until dropped.
    engine: Option<Arc<Engine>>,
    batcher: Arc<Batcher>,
    /// Rounds of [`Postgres::sync_feed`], one at a time.
    feed_rounds: FeedRounds,
}

/// [`Postgres::sync_feed`] as one round at a time that every caller waiting shares: a round
/// that began after a caller came sequences whatever that caller may have committed, so the
/// caller need not run one of its own. Numbered from 1; `done` is the last round finished.
#[derive(Default)]
struct FeedRounds {
    started: std::sync::atomic::AtomicU64,
    done: tokio::sync::Mutex<u64>,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // Closing a client blocks on its socket, which must not happen on an async thread.
        if let Some(engine) = self.engine.take() {
            let _ = std::thread::Builder::new().name("coursed-pg-close".into()).spawn(move || drop(engine));
        }
    }
}

/// How a unit of work runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Work {
    Read,
    /// A transaction.
    Write,
    /// Statements on their own, one of them a write ([`Atomicity::OneStatement`]).
    WriteOne,
}

impl Postgres {
    /// Connects (waiting up to `opts.wait` for the server to come up), migrates, and builds the
    /// pool. Blocks.
    pub fn open(opts: &Options, shared: Arc<Shared>) -> std::result::Result<Postgres, String> {
        let manager = Manager::new(&opts.path, opts.busy_timeout, opts.request_timeout)?;
        let name: Arc<str> = manager.describe().into();
        let manager_mode = manager.ssl_mode();
        let mut conn = first_connection(&manager, &name, opts.wait)?;
        migrate::migrate(&mut conn, &opts.before_migration)
            .map_err(|e| format!("cannot use PostgreSQL database {name}: {e}"))?;
        drop(conn);
        let pool = r2d2::Pool::builder()
            .max_size(POOL)
            .min_idle(Some(1))
            .connection_timeout(WAIT)
            .test_on_check_out(false)
            .build_unchecked(manager);
        log::info!("serving PostgreSQL database {name} (sslmode {:?})", manager_mode);
        let workers = workers::Workers::new(WORKERS, WAIT);
        let engine = Arc::new(Engine { pool, shared, name, workers, feed: Arc::default() });
        start_folding(Arc::downgrade(&engine));
        sequencer::start(Arc::downgrade(&engine));
        Ok(Postgres { engine: Some(engine), batcher: Arc::default(), feed_rounds: FeedRounds::default() })
    }

    /// The pool's connections: open, idle, and the most it opens.
    pub fn pool_use(&self) -> (u32, u32, u32) {
        let pool = &self.engine().pool;
        let state = pool.state();
        (state.connections, state.idle_connections, pool.max_size())
    }

    fn engine(&self) -> &Arc<Engine> {
        self.engine.as_ref().expect("the engine lives as long as the value")
    }

    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        self.spawn(Work::Read, f).await
    }

    /// A read that may take long: it waits for a thread after every other kind of work (see
    /// [`Queue::Later`]).
    pub async fn scan<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        self.spawn_in(Queue::Later, Work::Read, f).await
    }

    pub async fn write<T, F>(&self, ctx: WriteContext, atomicity: Atomicity, mut f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        // Each attempt (on whichever connection) and each grouped write installs its own.
        let f = move |tx: &mut dyn Tx| {
            tx.set_context(&ctx)?;
            f(tx)
        };
        let written = match atomicity {
            Atomicity::Transaction => self.spawn(Work::Write, f).await,
            Atomicity::OneStatement => {
                // Committed with the one-statement writes of other requests (see batch.rs).
                let (reply, answer) = tokio::sync::oneshot::channel();
                self.batcher.submit(
                    self.engine(),
                    Box::new(Pending { f, result: None, reply, queued: Instant::now(), started: None }),
                );
                answer.await.map_err(|_| Error::internal("a grouped write was dropped"))?
            }
        };
        // Its revisions (if it made any) get their place in the feed soon.
        if written.is_ok() {
            self.engine().feed.nudge();
        }
        written
    }

    /// Gives every revision committed so far its place in the feed (see `sequencer.rs`), so
    /// that a feed read that follows sees them.
    pub async fn sync_feed(&self) -> Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        let came = self.feed_rounds.started.load(SeqCst);
        let mut done = self.feed_rounds.done.lock().await;
        if *done > came {
            // A round began after this caller came and has finished.
            return Ok(());
        }
        let round = self.feed_rounds.started.fetch_add(1, SeqCst) + 1;
        self.sequence_now().await?;
        *done = round;
        Ok(())
    }

    async fn sequence_now(&self) -> Result<()> {
        let engine = self.engine().clone();
        let running = self.engine().workers.run(Queue::Back, move || {
            let mut conn = engine
                .pool
                .get()
                .map_err(|e| Error::unavailable(format!("no connection to PostgreSQL at {}: {e}", engine.name)))?;
            sequencer::sequence(&mut conn).map(drop).map_err(|e| {
                conn.broken = conn.is_closed();
                Error::unavailable(format!("cannot sequence the change feed: {e}"))
            })
        });
        running.await.unwrap_or_else(|| Err(Error::unavailable("no connection to PostgreSQL came free in time")))
    }

    /// Runs `f` on a pooled connection in the calling thread (not an async one).
    pub fn read_blocking<T>(&self, f: impl FnOnce(&mut dyn Tx) -> T) -> Result<T> {
        let engine = self.engine();
        let mut conn =
            engine.pool.get().map_err(|e| Error::unavailable(format!("no connection to {}: {e}", engine.name)))?;
        Ok(f(&mut PgTx::new(&mut conn, &engine.shared)))
    }

    async fn spawn<T, F>(&self, work: Work, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        self.spawn_in(Queue::Back, work, f).await
    }

    async fn spawn_in<T, F>(&self, place: Queue, work: Work, mut f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        let engine = self.engine().clone();
        let name = engine.name.clone();
        let queued = Instant::now();
        let kind = match (work, place) {
            (Work::Read, Queue::Later) => crate::metrics::Work::Scan,
            (Work::Read, _) => crate::metrics::Work::Read,
            _ => crate::metrics::Work::Write,
        };
        let running = self.engine().workers.run(place, move || {
            let waited = queued.elapsed();
            let done = run(&engine.pool, &engine.shared, &engine.name, work, &mut f);
            crate::metrics::M.db(kind, waited, queued.elapsed() - waited);
            done
        });
        // Not run: every connection stayed busy for as long as work may wait.
        running.await.unwrap_or_else(|| {
            Err(Error::unavailable(format!("no connection to PostgreSQL at {name} came free in time")))
        })
    }
}

/// Runs `f` until it succeeds, fails for a reason of its own, or retrying is over.
fn run<T>(
    pool: &Pool,
    shared: &Shared,
    name: &str,
    work: Work,
    f: &mut dyn FnMut(&mut dyn Tx) -> Result<T>,
) -> Result<T> {
    let mut backoff = Duration::from_millis(2);
    for attempt in 1..=ATTEMPTS {
        let mut conn =
            pool.get().map_err(|e| Error::unavailable(format!("no connection to PostgreSQL at {name}: {e}")))?;
        if work == Work::WriteOne && !conn.alive() {
            // Died with a restarted server: found out before the write is sent, not after.
            conn.broken = true;
            continue;
        }
        let mut tx = PgTx::new(&mut conn, shared);
        let (result, unknown_outcome) = match work {
            Work::Read => (guarded(|| f(&mut tx)), false),
            Work::Write => transaction(&mut tx, f),
            // A connection lost under the write leaves its outcome unknown.
            Work::WriteOne => {
                let result = guarded(|| f(&mut tx));
                // A context held back for a statement that never came stays behind.
                tx.conn.cancel_deferred();
                let lost = tx.conn.broken;
                (result, lost)
            }
        };
        let retry = result.is_err() && !unknown_outcome && (tx.conflict || tx.conn.broken) && attempt < ATTEMPTS;
        if !retry {
            if tx.conflict && result.is_err() {
                log::warn!("a transaction kept conflicting with concurrent ones after {attempt} attempts");
            }
            return result;
        }
        if tx.conflict {
            log::debug!("retrying a transaction that conflicted with a concurrent one (attempt {attempt})");
            std::thread::sleep(backoff + jitter(backoff));
            backoff *= 2;
        }
    }
    Err(Error::unavailable("PostgreSQL work was retried without success"))
}

/// Runs `f` in a transaction; the flag says whether the connection was lost
/// while committing (the outcome is then unknown, and the work must not be retried).
fn transaction<T>(tx: &mut PgTx<'_>, f: &mut dyn FnMut(&mut dyn Tx) -> Result<T>) -> (Result<T>, bool) {
    // Sent with the first statement of `f`.
    tx.defer("BEGIN ISOLATION LEVEL READ COMMITTED");
    match guarded(|| f(tx)) {
        Ok(value) if tx.conn.cancel_deferred() => (Ok(value), false),
        Ok(value) => match tx.batch("COMMIT") {
            Ok(()) => (Ok(value), false),
            Err(e) => {
                let unknown = tx.conn.broken;
                (Err(e.into()), unknown)
            }
        },
        Err(e) => {
            if !tx.conn.cancel_deferred() && !tx.conn.broken {
                tx.rollback();
            }
            (Err(e), false)
        }
    }
}

/// How often a process folds the log of search changes into the word counts.
const FOLD_EVERY: Duration = Duration::from_secs(1);

/// Folds the search changes every [`FOLD_EVERY`] (see [`search::fold`]) for as long as the
/// engine lives. The totals stay exact without it (they count the changes not folded), only
/// slower as the log grows.
fn start_folding(engine: std::sync::Weak<Engine>) {
    let spawned = std::thread::Builder::new().name("coursed-pg-fold".into()).spawn(move || loop {
        std::thread::sleep(FOLD_EVERY);
        let Some(engine) = engine.upgrade() else { return };
        let Ok(mut conn) = engine.pool.get() else { continue };
        match search::fold(&mut conn, 25) {
            Ok(n) => {
                crate::metrics::M.search_folded.add(n);
                crate::metrics::M.search_folded_at.set(crate::time::now_ms());
                if n > 0 {
                    log::debug!("folded {n} search changes into the word counts");
                }
            }
            // A lock held by a bulk load, say (a lost connection leaves the pool by itself).
            Err(e) => log::debug!("cannot fold search changes now: {e}"),
        }
    });
    if let Err(e) = spawned {
        log::warn!("cannot start folding search changes ({e}); one-word search totals will slow down as they grow");
    }
}

/// Up to `of`, so that transactions that conflicted do not retry in lockstep.
fn jitter(of: Duration) -> Duration {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    of.mul_f64(f64::from(nanos % 1000) / 1000.0)
}

/// The first connection, for migrations: waits for a server that is starting or not yet
/// reachable, with back-off, up to `wait`; fails at once on what waiting cannot fix (a wrong
/// password, a database that does not exist).
fn first_connection(manager: &Manager, name: &str, wait: Duration) -> std::result::Result<PgConn, String> {
    use r2d2::ManageConnection;
    let started = Instant::now();
    let mut delay = Duration::from_millis(250);
    loop {
        match manager.connect() {
            Ok(conn) => return Ok(conn),
            Err(e) if !e.is_transient() => return Err(format!("cannot use PostgreSQL database {name}: {e}")),
            Err(e) => {
                let left = wait.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return Err(format!(
                        "PostgreSQL at {name} did not answer within {} s (--database-wait): {e}",
                        wait.as_secs()
                    ));
                }
                let pause = delay.min(left);
                log::warn!(
                    "PostgreSQL at {name} is not answering ({e}); retrying in {:.1} s (giving up in {} s)",
                    pause.as_secs_f64(),
                    left.as_secs()
                );
                std::thread::sleep(pause);
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Keeps `value` as the setting `name` (in `coursed_settings`) unless there is one already;
/// returns the one kept and whether it is `value`.
pub fn keep_setting(tx: &mut dyn Tx, name: &str, value: &str) -> std::result::Result<(String, bool), DbError> {
    use super::tx::Value;
    let created = tx.execute(
        "INSERT INTO coursed_settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
        &[Value::Text(name.to_owned()), Value::Text(value.to_owned())],
    )?;
    let stored = tx.strings("SELECT value FROM coursed_settings WHERE name = ?", &[Value::Text(name.to_owned())])?;
    Ok((stored.into_iter().next().unwrap_or_default(), created == 1))
}
