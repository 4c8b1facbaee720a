//! The database: connection settings, migrations, reads and group-committed writes.
//!
//! * Reads run on pooled read-only connections. [`Db::read`] takes an idle connection without
//!   waiting and runs the closure inline on the async worker (bounded, indexed reads take a few
//!   microseconds, cheaper than a thread hop: the benchmark decides this); when none is idle, or
//!   for [`Db::scan`], the closure runs on the blocking pool instead.
//! * Writes go to one writer thread that owns the only read-write connection. It takes every
//!   write waiting in its queue, runs each in its own savepoint inside one `BEGIN IMMEDIATE`
//!   transaction, commits once (one fsync for the group), and only then answers each request.
//!   A failing write rolls back to its savepoint and leaves the others intact.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::{Error, Result};
use crate::paging::{self, PageIndex};

mod writer;

/// The schema migrations, in order; `PRAGMA user_version` counts those applied. Append only.
const MIGRATIONS: &[&str] = &[include_str!("../../schema.sql")];
/// Marks a file as a coursed database ("crsd").
const APPLICATION_ID: i64 = 0x6372_7364;
const READERS: u32 = 8;

/// How hard a commit waits for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// `synchronous=FULL`: a commit survives power loss.
    Full,
    /// `synchronous=NORMAL`: a commit survives a crash of coursed, not of the machine.
    Normal,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// A file path, or `:memory:` for a private in-memory database.
    pub path: String,
    pub durability: Durability,
    /// How long a write waits for a lock held by another process before answering 503.
    pub busy_timeout: Duration,
    /// Count every SQL statement run (see [`Db::statements`]); for tests.
    pub count_statements: bool,
}

impl Options {
    pub fn new(path: &str, durability: Durability) -> Options {
        Options { path: path.to_owned(), durability, busy_timeout: Duration::from_secs(5), count_statements: false }
    }
}

pub(crate) type Deliver = Box<dyn FnOnce(Result<()>) + Send>;
/// A write: run against the writer's connection (or `None` when its group failed first), it
/// says whether it succeeded and hands back how to answer once the commit outcome is known.
pub(crate) type Job = Box<dyn FnOnce(Option<&Connection>) -> (bool, Deliver) + Send>;

/// A handle on the database; cheap to clone. The writer stops when the last handle is dropped.
#[derive(Clone)]
pub struct Db {
    inner: std::sync::Arc<Inner>,
}

struct Inner {
    /// Always `Some` until dropped: the readers close before the writer, so that the writer's
    /// connection is the last one and its close checkpoints and removes the WAL.
    pool: Option<r2d2::Pool<SqliteConnectionManager>>,
    jobs: Option<mpsc::Sender<Job>>,
    writer: Option<JoinHandle<()>>,
    statements: Option<&'static AtomicU64>,
    pages: PageIndex,
}

impl Inner {
    fn pool(&self) -> &r2d2::Pool<SqliteConnectionManager> {
        self.pool.as_ref().expect("the pool lives as long as the handle")
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.pool.take();
        // Closing the queue lets the writer finish what is queued, then close its connection.
        self.jobs.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Db {
    /// Opens (creating if needed) and migrates the database, and starts the writer.
    pub fn open(opts: &Options) -> std::result::Result<Db, String> {
        let memory = opts.path == ":memory:";
        // Every connection to a plain `:memory:` is a different database; a named memdb file
        // is one database shared by all connections of this process.
        let target = if memory {
            format!("file:/coursed-{}?vfs=memdb", uuid::Uuid::new_v4().simple())
        } else {
            opts.path.clone()
        };
        let flags = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let statements: Option<&'static AtomicU64> =
            opts.count_statements.then(|| &*Box::leak(Box::new(AtomicU64::new(0))));
        let writer = open_writer(&target, opts, statements)?;
        let busy = opts.busy_timeout;
        let manager = SqliteConnectionManager::file(&target)
            .with_flags(flags | OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_init(move |c| configure(c, busy, statements));
        let pool = r2d2::Pool::builder()
            .max_size(READERS)
            .min_idle(Some(2))
            .test_on_check_out(false)
            .idle_timeout(None)
            .max_lifetime(None)
            .build(manager)
            .map_err(|e| format!("cannot open database {}: {e}", opts.path))?;

        let (jobs, queue) = mpsc::channel::<Job>();
        let writer = std::thread::Builder::new()
            .name("coursed-writer".into())
            .spawn(move || writer::write_loop(writer, queue))
            .map_err(|e| format!("cannot start the writer thread: {e}"))?;
        Ok(Db {
            inner: std::sync::Arc::new(Inner {
                pool: Some(pool),
                jobs: Some(jobs),
                writer: Some(writer),
                statements,
                pages: PageIndex::default(),
            }),
        })
    }

    /// Runs a bounded read (point lookups, index-ordered pages) on an idle connection, inline.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        match self.inner.pool().try_get() {
            Some(conn) => guarded(|| f(&conn)),
            None => self.scan(f).await,
        }
    }

    /// Runs a read that may take long (scans, sorts, counts) on the blocking pool.
    pub async fn scan<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let pool = self.inner.pool().clone();
        tokio::task::spawn_blocking(move || {
            let conn = pool.get().map_err(Error::unavailable)?;
            guarded(|| f(&conn))
        })
        .await
        .map_err(Error::internal)?
    }

    /// Runs `f` as one all-or-nothing write and returns once it is committed.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |conn: Option<&Connection>| {
            let Some(conn) = conn else {
                let deliver: Deliver = Box::new(move |group: Result<()>| {
                    let _ = tx.send(group.and_then(|()| Err(Error::internal("a write was skipped"))));
                });
                return (false, deliver);
            };
            let result = guarded(|| f(conn));
            let ok = result.is_ok();
            let deliver: Deliver = Box::new(move |committed: Result<()>| {
                let _ = tx.send(result.and_then(|v| committed.map(|()| v)));
            });
            (ok, deliver)
        });
        let queue = self.inner.jobs.as_ref().ok_or_else(|| Error::unavailable("database closed"))?;
        queue.send(job).map_err(|_| Error::unavailable("the writer has stopped"))?;
        rx.await.map_err(|_| Error::internal("the writer dropped a write"))?
    }

    /// Where the pages of each table start (see [`crate::paging`]).
    pub fn pages(&self) -> &PageIndex {
        &self.inner.pages
    }

    /// Rebuilds the page index of `table` on the blocking pool, unless a rebuild is running or
    /// ran within the last second.
    pub fn refresh_pages(&self, table: &'static str) {
        if !self.inner.pages.claim_rebuild(table) {
            return;
        }
        let db = self.clone();
        let work = move || {
            let built = db.inner.pool().get().ok().and_then(|c| guarded(|| paging::build(&c, table)).ok());
            db.inner.pages.finish(table, built);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(work)),
            Err(_) => work(),
        }
    }

    /// How many SQL statements have run, when counting was asked for in [`Options`].
    pub fn statements(&self) -> Option<u64> {
        self.inner.statements.map(|c| c.load(Ordering::SeqCst))
    }
}

/// Opens the read-write connection: settings, journal mode, migrations.
fn open_writer(
    target: &str,
    opts: &Options,
    statements: Option<&'static AtomicU64>,
) -> std::result::Result<Connection, String> {
    let fail = |e: rusqlite::Error| format!("cannot open database {}: {e}", opts.path);
    let flags = OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE;
    let mut writer = Connection::open_with_flags(target, flags).map_err(fail)?;
    // Rows of a few KiB fit in one 8 KiB page: read in place from the mapping, with no
    // overflow pages to assemble. Takes effect only on a new, empty file.
    writer.pragma_update(None, "page_size", 8192).map_err(fail)?;
    configure(&writer, opts.busy_timeout, statements).map_err(fail)?;
    let sync = match opts.durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    writer.pragma_update(None, "synchronous", sync).map_err(fail)?;
    // Each write runs in a savepoint, whose journal of original pages is a temporary file by
    // default: a write system call for every page a write touches. Keep it in memory.
    writer.pragma_update(None, "temp_store", "MEMORY").map_err(fail)?;
    // WAL lets readers go on while the writer commits; set once, outside any transaction.
    let mode = if opts.path == ":memory:" { "MEMORY" } else { "WAL" };
    let got: String = writer.pragma_update_and_check(None, "journal_mode", mode, |r| r.get(0)).map_err(fail)?;
    if !got.eq_ignore_ascii_case(mode) {
        return Err(format!("cannot open database {}: journal_mode {mode} refused ({got})", opts.path));
    }
    migrate(&mut writer).map_err(|e| format!("cannot open database {}: {e}", opts.path))?;
    Ok(writer)
}

/// Creates (or migrates) the database file `path` and closes it again.
pub fn create(path: &str) -> std::result::Result<(), String> {
    open_writer(path, &Options::new(path, Durability::Full), None).map(drop)
}

/// Runs several reads as one consistent snapshot (one read transaction).
pub fn snapshot<T>(c: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    c.prepare_cached("BEGIN")?.execute([])?;
    let value = f(c);
    let end = if value.is_ok() { "COMMIT" } else { "ROLLBACK" };
    c.prepare_cached(end)?.execute([])?;
    value
}

/// Runs `f`, turning a panic into a 500 so that no request can take a thread down.
fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(Error::internal("a database closure panicked")))
}

/// Per-connection settings, each for a reason.
fn configure(c: &Connection, busy: Duration, statements: Option<&'static AtomicU64>) -> rusqlite::Result<()> {
    // Enforce the schema's REFERENCES clauses (cascade, set null).
    c.pragma_update(None, "foreign_keys", true)?;
    // Wait for another process's lock rather than failing at once.
    c.busy_timeout(busy)?;
    // Read pages straight from a mapping of the whole file instead of copying them into the
    // heap (the build raises SQLite's cap on the mapping: see .cargo/config.toml).
    c.pragma_update(None, "mmap_size", 1i64 << 40)?;
    // A small page cache keeps private memory low; mmap serves the reads.
    c.pragma_update(None, "cache_size", -2048)?;
    c.set_prepared_statement_cache_capacity(64);
    if let Some(counter) = statements {
        trace_statements(c, counter);
    }
    Ok(())
}

fn trace_statements(c: &Connection, counter: &'static AtomicU64) {
    use std::ffi::{c_int, c_uint, c_void};
    unsafe extern "C" fn on_statement(_: c_uint, ctx: *mut c_void, _: *mut c_void, _: *mut c_void) -> c_int {
        // SAFETY: ctx is the leaked, never freed counter passed below.
        unsafe { (*(ctx as *const AtomicU64)).fetch_add(1, Ordering::SeqCst) };
        0
    }
    // SAFETY: the handle is valid while `c` lives; the counter lives for the whole process.
    unsafe {
        rusqlite::ffi::sqlite3_trace_v2(
            c.handle(),
            rusqlite::ffi::SQLITE_TRACE_STMT as c_uint,
            Some(on_statement),
            counter as *const AtomicU64 as *mut c_void,
        );
    }
}

/// Brings the schema up to date; refuses files that are newer or not ours.
fn migrate(c: &mut Connection) -> std::result::Result<(), String> {
    let sql = |e: rusqlite::Error| e.to_string();
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sql)?;
    let app: i64 = tx.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(sql)?;
    let known = MIGRATIONS.len() as i64;
    if app != 0 && app != APPLICATION_ID {
        return Err(format!("the file belongs to another application (application_id {app:#x})"));
    }
    if version > known {
        return Err(format!(
            "its schema version is {version}, newer than this coursed knows ({known}); use a newer coursed"
        ));
    }
    if version == 0 {
        let tables: i64 = tx.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).map_err(sql)?;
        if tables > 0 {
            return Err("it holds tables but is not a coursed database".into());
        }
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(step).map_err(|e| format!("migration {} failed: {e}", i + 1))?;
    }
    if version < known {
        tx.pragma_update(None, "user_version", known).map_err(sql)?;
        tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(sql)?;
        log::info!("database schema migrated from version {version} to {known}");
    }
    tx.commit().map_err(sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_500_whose_cause_is_not_sent() {
        let e = guarded::<()>(|| panic!("secret cause")).unwrap_err();
        assert_eq!(e.status, warp::http::StatusCode::INTERNAL_SERVER_ERROR);
        let doc = String::from_utf8(e.to_document()).unwrap();
        assert!(!doc.contains("secret"), "{doc}");
        assert!(doc.contains("server log"), "{doc}");
    }

    #[test]
    fn busy_and_full_databases_are_503_and_other_faults_500() {
        let busy = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None);
        assert_eq!(Error::from(busy).status, warp::http::StatusCode::SERVICE_UNAVAILABLE);
        let full = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL), None);
        assert_eq!(Error::from(full).status, warp::http::StatusCode::SERVICE_UNAVAILABLE);
        let other = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT), None);
        assert_eq!(Error::from(other).status, warp::http::StatusCode::INTERNAL_SERVER_ERROR);
    }
}
