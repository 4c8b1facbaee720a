//! The SQLite engine: one file (or a process-wide in-memory database), read-only pooled
//! connections for reads, one writer thread for writes.
//!
//! * [`Sqlite::read`] takes an idle connection without waiting and runs the closure inline on
//!   the async worker (bounded, indexed reads take a few microseconds, cheaper than a thread
//!   hop: the benchmark decides this); when none is idle, or for [`Sqlite::scan`], the closure
//!   runs on the blocking pool instead.
//! * Writes go to the writer thread, which owns the only connection that writes rows (a second
//!   read-write one only checkpoints the WAL, see `checkpoint.rs`). It takes every
//!   write waiting in its queue, runs each in its own savepoint inside one `BEGIN IMMEDIATE`
//!   transaction, commits once (one fsync for the group), and only then answers each request.
//!   A failing write rolls back to its savepoint and leaves the others intact.

mod backup;
mod bulk;
mod checkpoint;
mod deadline;
mod indexing;
mod open;
pub mod search;
mod source;
mod tx;
mod writer;

use crate::metrics::{Work, M};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::OpenFlags;

pub use self::backup::{remove_with_sidecars, snapshot_into, write_new};
pub use self::bulk::bulk;
pub use self::open::create;
pub use self::source::{migratable, TempCopy};
use self::tx::SqliteTx;
use super::tx::{guarded, Shared, Tx};
use super::{Durability, Options, WriteContext};
use crate::error::{Error, Result};

const READERS: u32 = 8;
/// Readers that reads which may scan never take all of: bounded reads (a resource by id, a
/// page along an index) always find one soon, however many scans clients send.
const RESERVED: u32 = 2;

/// Set once the disk failed a sync of the database or its WAL: Linux may have dropped the pages
/// it could not write and will report the next sync a success, so nothing written since the
/// last good sync can be trusted to be on the disk, nor can the WAL be copied into the database
/// file and started over. From then on no write is made, no checkpoint, and the writer's
/// connection closes without one; reads go on, `/readyz` answers 503 with the reason, and a
/// restart recovers from what the disk holds (SQLite reads the WAL again from its start).
/// PostgreSQL does the same by stopping the whole server (it restarts itself and recovers).
#[derive(Default)]
pub struct Failed(std::sync::OnceLock<String>);

impl Failed {
    /// Stops the writes for good, with the reason; the first reason is kept and logged.
    pub fn set(&self, reason: String) {
        if self.0.set(reason.clone()).is_ok() {
            log::error!("{reason}; this server writes nothing more until it is restarted (it still serves reads)");
        }
    }

    pub fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }
}

pub(crate) type Deliver = Box<dyn FnOnce(Result<()>) + Send>;
/// A write: run against the writer's connection (or `None` when its group failed first), it
/// says whether it succeeded and hands back how to answer once the commit outcome is known.
pub(crate) type Run = Box<dyn FnOnce(Option<&mut dyn Tx>) -> (bool, Deliver) + Send>;

/// A write and who makes it (the writer installs `ctx` on its connection before `run`).
pub(crate) struct Job {
    pub ctx: WriteContext,
    pub run: Run,
}

pub struct Sqlite {
    /// Always `Some` until dropped: the readers close before the writer, so that the writer's
    /// connection is the last one and its close checkpoints and removes the WAL.
    pool: Option<r2d2::Pool<SqliteConnectionManager>>,
    jobs: Option<mpsc::Sender<Job>>,
    writer: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
    /// How long a request's reads may take (see `deadline.rs`).
    timeout: std::time::Duration,
    /// Permits of the reads that may scan: all readers but [`RESERVED`].
    scans: Arc<tokio::sync::Semaphore>,
    /// Set when a sync failed: no more writes (see [`Failed`]).
    failed: Arc<Failed>,
}

impl Drop for Sqlite {
    fn drop(&mut self) {
        self.pool.take();
        // Closing the queue lets the writer finish what is queued, then close its connection.
        self.jobs.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Sqlite {
    /// Opens (creating if needed) and migrates the database, and starts the writer.
    pub fn open(opts: &Options, shared: Arc<Shared>) -> std::result::Result<Sqlite, String> {
        // Every connection to a plain `:memory:` is a different database; a named memdb file
        // is one database shared by all connections of this process.
        let target = if opts.path == ":memory:" {
            format!("file:/coursed-{}?vfs=memdb", uuid::Uuid::new_v4().simple())
        } else {
            opts.path.clone()
        };
        let writer = open::open_writer(&target, opts)?;
        // Full durability on a file: commits write the WAL without waiting for the disk, and
        // the writer's flushing thread makes each group durable before answering it.
        let wal = match opts.durability {
            Durability::Full if opts.path != ":memory:" => {
                let database = writer.path().unwrap_or(&opts.path).to_owned();
                writer
                    .pragma_update(None, "synchronous", "NORMAL")
                    .map_err(|e| format!("cannot open database {}: {e}", opts.path))?;
                let mut wal = writer::WalFile::of(&database);
                // What the WAL holds (a process before this one may have committed without
                // syncing, then died) is synced before anyone reads the feed.
                if wal.exists() {
                    wal.flush().map_err(|e| format!("cannot open database {}: {e}", opts.path))?;
                }
                Some(wal)
            }
            _ => None,
        };
        let busy = opts.busy_timeout;
        let manager = SqliteConnectionManager::file(&target)
            .with_flags(OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_init(move |c| open::configure(c, busy).and_then(|()| deadline::install(c)));
        let pool = r2d2::Pool::builder()
            .max_size(READERS)
            // A read waits this long for one of the readers, then is a 503.
            .connection_timeout(opts.request_timeout)
            .min_idle(Some(2))
            .test_on_check_out(false)
            .idle_timeout(None)
            .max_lifetime(None)
            .build(manager)
            .map_err(|e| format!("cannot open database {}: {e}", opts.path))?;

        let (jobs, queue) = mpsc::channel::<Job>();
        let writer_shared = shared.clone();
        let failed = Arc::new(Failed::default());
        let writer_failed = failed.clone();
        let writer = std::thread::Builder::new()
            .name("coursed-writer".into())
            .spawn(move || writer::write_loop(writer, &target, &writer_shared, queue, wal, &writer_failed))
            .map_err(|e| format!("cannot start the writer thread: {e}"))?;
        let scans = Arc::new(tokio::sync::Semaphore::new((READERS - RESERVED) as usize));
        Ok(Sqlite {
            pool: Some(pool),
            jobs: Some(jobs),
            writer: Some(writer),
            shared,
            timeout: opts.request_timeout,
            scans,
            failed,
        })
    }

    /// Why this database takes no more writes, once a sync failed (see [`Failed`]).
    pub fn failure(&self) -> Option<&str> {
        self.failed.get()
    }

    fn pool(&self) -> &r2d2::Pool<SqliteConnectionManager> {
        self.pool.as_ref().expect("the pool lives as long as the engine")
    }

    /// Runs a bounded read (point lookups, index-ordered pages) on an idle connection, inline
    /// (a short, measured cost: the benchmark's W1). When every reader is busy it waits for
    /// one without holding a thread: scans never take the last [`RESERVED`] readers, so one is
    /// free soon.
    pub async fn read<T, F>(&self, mut f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        let started = std::time::Instant::now();
        let mut pause = std::time::Duration::from_micros(200);
        loop {
            if let Some(conn) = self.pool().try_get() {
                let waited = started.elapsed();
                let left = self.timeout.saturating_sub(waited);
                let read =
                    deadline::within(left, || guarded(|| f(&mut SqliteTx { conn: &conn, shared: &self.shared })));
                M.db(Work::Read, waited, started.elapsed() - waited);
                return read;
            }
            if started.elapsed() >= self.timeout {
                return Err(Error::unavailable("every reader stayed busy"));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(5));
        }
    }

    /// Runs `f` on a pooled connection in the calling thread.
    pub fn read_blocking<T>(&self, f: impl FnOnce(&mut dyn Tx) -> T) -> Result<T> {
        let conn = self.pool().get().map_err(Error::unavailable)?;
        Ok(f(&mut SqliteTx { conn: &conn, shared: &self.shared }))
    }

    /// Runs a read that may take long (scans, sorts, counts) on the blocking pool.
    pub async fn scan<T, F>(&self, mut f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        let (pool, shared, timeout) = (self.pool().clone(), self.shared.clone(), self.timeout);
        let started = std::time::Instant::now();
        // Reads that may scan leave readers free for the bounded reads of everyone else.
        let permit = tokio::time::timeout(timeout, self.scans.clone().acquire_owned())
            .await
            .map_err(|_| Error::unavailable("every reader a scan may take stayed busy"))?
            .map_err(Error::internal)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            crate::priority::lower();
            let conn = pool.get().map_err(Error::unavailable)?;
            // The wait for a reader counts against the request's time.
            let waited = started.elapsed();
            let left = timeout.saturating_sub(waited);
            let read = deadline::within(left, || guarded(|| f(&mut SqliteTx { conn: &conn, shared: &shared })));
            M.db(Work::Scan, waited, started.elapsed() - waited);
            read
        })
        .await
        .map_err(Error::internal)?
    }

    /// Runs `f` as one all-or-nothing write and returns once it is committed. `f` runs once:
    /// there is one writer, so nothing conflicts with it.
    pub async fn write<T, F>(&self, ctx: WriteContext, mut f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        if self.failed.get().is_some() {
            return Err(Error::storage_failed());
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let queued = std::time::Instant::now();
        let run: Run = Box::new(move |conn: Option<&mut dyn Tx>| {
            M.sqlite_queue.add(-1);
            let Some(conn) = conn else {
                let deliver: Deliver = Box::new(move |group: Result<()>| {
                    let _ = tx.send(group.and_then(|()| Err(Error::internal("a write was skipped"))));
                });
                return (false, deliver);
            };
            let waited = queued.elapsed();
            let result = guarded(|| f(conn));
            M.db(Work::Write, waited, queued.elapsed() - waited);
            let ok = result.is_ok();
            let deliver: Deliver = Box::new(move |committed: Result<()>| {
                let _ = tx.send(result.and_then(|v| committed.map(|()| v)));
            });
            (ok, deliver)
        });
        let job = Job { ctx, run };
        let queue = self.jobs.as_ref().ok_or_else(|| Error::unavailable("database closed"))?;
        M.sqlite_queue.add(1);
        if queue.send(job).is_err() {
            M.sqlite_queue.add(-1);
            return Err(Error::unavailable("the writer has stopped"));
        }
        rx.await.map_err(|_| Error::internal("the writer dropped a write"))?
    }
}
