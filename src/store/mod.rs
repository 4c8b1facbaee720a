//! The storage layer: one engine-neutral surface over SQLite and PostgreSQL.
//!
//! Handlers call [`Db::read`], [`Db::scan`] and [`Db::write`] with closures over a [`Tx`], and
//! the generic operations of [`list`], [`select`], [`write`] and [`relations`] inside them; SQL
//! is generated from the resource declarations, with the few differences between the engines in
//! [`dialect`]. Each engine's own code (connections, settings, migrations, how a write
//! commits) lives in its module, and this file is the only place that chooses between them.

pub mod dialect;
pub mod list;
pub mod paging;
pub mod relations;
pub mod select;
pub mod tx;
pub mod write;

mod sqlite;

use std::sync::Arc;
use std::time::Duration;

use self::paging::PageIndex;
pub use self::select::{Fields, Record, Selection};
use self::tx::Shared;
pub use self::tx::{snapshot, Cell, DbError, Row, Tx, Value};
use crate::error::Result;

/// How hard a commit waits for the disk (SQLite; PostgreSQL follows its server's settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// `synchronous=FULL`: a commit survives power loss.
    Full,
    /// `synchronous=NORMAL`: a commit survives a crash of coursed, not of the machine.
    Normal,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// A SQLite file path, `:memory:` for a private in-memory database, or a
    /// `postgres://` / `postgresql://` URL.
    pub path: String,
    pub durability: Durability,
    /// How long a write waits for a lock held by another connection before answering 503.
    pub busy_timeout: Duration,
    /// Count every SQL statement run (see [`Db::statements`]); for tests.
    pub count_statements: bool,
}

impl Options {
    pub fn new(path: &str, durability: Durability) -> Options {
        Options { path: path.to_owned(), durability, busy_timeout: Duration::from_secs(5), count_statements: false }
    }
}

/// A handle on the database; cheap to clone. The engine closes when the last handle is dropped.
#[derive(Clone)]
pub struct Db {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    shared: Arc<Shared>,
}

enum Engine {
    Sqlite(sqlite::Sqlite),
}

impl Db {
    /// Opens (creating if needed) and migrates the database named by `opts.path`. Blocks: call
    /// it off the async threads.
    pub fn open(opts: &Options) -> std::result::Result<Db, String> {
        let statements = opts.count_statements.then(|| std::sync::atomic::AtomicU64::new(0));
        let shared = Arc::new(Shared { pages: PageIndex::default(), statements });
        let engine = Engine::Sqlite(sqlite::Sqlite::open(opts, shared.clone())?);
        Ok(Db { inner: Arc::new(Inner { engine, shared }) })
    }

    /// Runs a bounded read (point lookups, index-ordered pages).
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        let result = match &self.inner.engine {
            Engine::Sqlite(e) => e.read(f).await,
        };
        self.rebuild_pages();
        result
    }

    /// Runs a read that may take long (scans, sorts, counts) off the async threads.
    pub async fn scan<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        let result = match &self.inner.engine {
            Engine::Sqlite(e) => e.scan(f).await,
        };
        self.rebuild_pages();
        result
    }

    /// Runs `f` as one all-or-nothing write and returns once it is committed. `f` may run more
    /// than once when the engine retries a transaction that conflicted with a concurrent one.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        match &self.inner.engine {
            Engine::Sqlite(e) => e.write(f).await,
        }
    }

    /// Where the pages of each table start (see [`paging`]).
    pub fn pages(&self) -> &PageIndex {
        &self.inner.shared.pages
    }

    /// How many SQL statements have run, when counting was asked for in [`Options`].
    pub fn statements(&self) -> Option<u64> {
        self.inner.shared.statements.as_ref().map(|c| c.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Starts the rebuild of a page index that a read found stale, in the background.
    fn rebuild_pages(&self) {
        let Some(table) = self.pages().claim_rebuild() else { return };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.pages().finish(table, None);
            return;
        };
        let db = self.clone();
        rt.spawn(async move {
            let built = db.scan(move |tx| paging::build(tx, table)).await.ok();
            db.pages().finish(table, built);
        });
    }
}

/// Creates (or migrates) the SQLite database file `path` and closes it again.
pub fn create_sqlite(path: &str) -> std::result::Result<(), String> {
    sqlite::create(path)
}
