//! The storage layer: one engine-neutral surface over SQLite and PostgreSQL.
//!
//! Handlers call [`Db::read`], [`Db::scan`] and [`Db::write`] with closures over a [`Tx`], and
//! the generic operations of [`list`], [`select`], [`write`] and [`relations`] inside them; SQL
//! is generated from the resource declarations, with the few differences between the engines in
//! [`dialect`]. Each engine's own code (connections, settings, migrations, how a write
//! commits) lives in its module, and this file is the only place that chooses between them:
//! a `postgres://` or `postgresql://` URL opens PostgreSQL, anything else a SQLite file.

pub mod budget;
pub mod bulk;
pub mod clauses;
pub mod dialect;
pub mod history;
pub mod list;
pub mod paging;
pub mod relations;
pub mod relevance;
pub mod search;
mod search_index;
pub mod select;
pub mod tx;
pub mod upgrade;
pub mod write;

mod postgres;
mod sqlite;

use std::sync::Arc;
use std::time::Duration;

use self::paging::PageIndex;
pub use self::select::{Fields, Record, Selection};
use self::tx::Shared;
pub use self::tx::{snapshot, Cell, DbError, Row, Tx, Value};
pub use self::upgrade::BeforeMigration;
use crate::error::Result;

/// How hard a commit waits for the disk (SQLite; PostgreSQL follows its server's settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Durability {
    /// `synchronous=FULL`: a commit survives power loss.
    Full,
    /// `synchronous=NORMAL`: a commit survives a crash of coursed, not of the machine.
    Normal,
}

/// A database opened to be read from (see [`Db::open_source`]); a copy made for it is removed
/// when it is dropped, after the database is closed.
pub struct Source {
    pub db: Db,
    _copy: Option<sqlite::TempCopy>,
}

#[derive(Debug, Clone)]
pub struct Options {
    /// A SQLite file path, `:memory:` for a private in-memory database, or a
    /// `postgres://` / `postgresql://` URL.
    pub path: String,
    pub durability: Durability,
    /// How long a write waits for a lock held by another connection before answering 503.
    pub busy_timeout: Duration,
    /// Count every SQL statement run and keep the latest (see [`Db::statements`]); for tests.
    pub count_statements: bool,
    /// How long opening waits for a database server that does not answer yet (PostgreSQL).
    pub wait: Duration,
    /// How long a request's reads may run (SQLite) or each statement (PostgreSQL), and how
    /// long a read waits for a connection.
    pub request_timeout: Duration,
    /// What is done before migrating a database that holds data (a backup, by default).
    pub before_migration: BeforeMigration,
}

impl Options {
    pub fn new(path: &str, durability: Durability) -> Options {
        Options {
            path: path.to_owned(),
            durability,
            busy_timeout: Duration::from_secs(5),
            count_statements: false,
            wait: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
            before_migration: BeforeMigration::default(),
        }
    }

    /// Whether `path` names a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        is_postgres_url(&self.path)
    }
}

/// How long a command (`copy`, `load`, `generate`) waits for a PostgreSQL server that does not
/// answer yet.
pub const COMMAND_WAIT: Duration = Duration::from_secs(30);

/// Whether `path` is a `postgres://` or `postgresql://` URL.
pub fn is_postgres_url(path: &str) -> bool {
    path.starts_with("postgres://") || path.starts_with("postgresql://")
}

/// `path` as it may be shown: a URL without its password.
pub fn display_name(path: &str) -> String {
    if is_postgres_url(path) {
        postgres::redact(path)
    } else {
        path.to_owned()
    }
}

/// What a write needs to be all-or-nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Atomicity {
    /// Several statements change data, or locks must be held: one transaction.
    Transaction,
    /// At most one statement changes data, and the others only read: that statement is atomic
    /// by itself, so an engine may run the work without a transaction around it (PostgreSQL
    /// then spares the `BEGIN` and `COMMIT`; reads see what is committed, as they would in a
    /// `READ COMMITTED` transaction).
    OneStatement,
}

/// Who makes a write, and as what: recorded with every revision the write makes (see
/// `docs/design/history.md`). Each engine hands it to the database itself, only when it differs
/// from what the connection holds already.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteContext {
    /// The caller's name as the access log gives it (a database token's name, `config`,
    /// `bootstrap`), or the command that writes (`import`, `load`, ...).
    pub by: Arc<str>,
    /// The write restores a revision: its revisions say `restore` instead of `update`/`create`.
    pub restore: bool,
}

impl WriteContext {
    pub fn new(by: Arc<str>) -> WriteContext {
        WriteContext { by, restore: false }
    }

    /// A write made by coursed itself or by a command.
    pub fn system(by: &'static str) -> WriteContext {
        WriteContext::new(Arc::from(by))
    }

    /// The same caller, restoring a revision.
    pub fn restoring(self) -> WriteContext {
        WriteContext { restore: true, ..self }
    }

    /// The action the revisions of this write take instead of their own, if any.
    pub fn action(&self) -> Option<&'static str> {
        self.restore.then_some("restore")
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
    /// Told after each write this handle commits (see [`Db::committed`]).
    commits: tokio::sync::Notify,
}

enum Engine {
    Sqlite(sqlite::Sqlite),
    Postgres(postgres::Postgres),
}

impl Db {
    /// Opens (creating if needed) and migrates the database named by `opts.path`. Blocks: call
    /// it off the async threads.
    pub fn open(opts: &Options) -> std::result::Result<Db, String> {
        let statements = opts.count_statements.then(tx::Statements::default);
        let shared = Arc::new(Shared {
            pages: PageIndex::default(),
            unflushed: Default::default(),
            tags: Default::default(),
            statements,
        });
        let engine = if opts.is_postgres() {
            Engine::Postgres(postgres::Postgres::open(opts, shared.clone())?)
        } else {
            Engine::Sqlite(sqlite::Sqlite::open(opts, shared.clone())?)
        };
        Ok(Db { inner: Arc::new(Inner { engine, shared, commits: tokio::sync::Notify::new() }) })
    }

    /// Opens a database to read a catalogue from, leaving it as it is: a SQLite file of an
    /// older schema is read through a migrated private copy (see `sqlite/source.rs`). A
    /// PostgreSQL database is migrated in place, as a server starting on it would.
    pub fn open_source(opts: &Options) -> std::result::Result<Source, String> {
        if opts.is_postgres() || opts.path == ":memory:" {
            return Ok(Source { db: Db::open(opts)?, _copy: None });
        }
        let copy = sqlite::migratable(&opts.path)?;
        let db = match &copy {
            // A private copy, removed afterwards: nothing to keep a backup of.
            Some(c) => Db::open(&Options {
                path: c.path.to_string_lossy().into_owned(),
                before_migration: BeforeMigration::Migrate,
                ..opts.clone()
            })?,
            None => Db::open(opts)?,
        };
        Ok(Source { db, _copy: copy })
    }

    /// PostgreSQL's pool of connections: open, idle, and the most it opens (`None` on SQLite).
    pub fn pool_use(&self) -> Option<(u32, u32, u32)> {
        match &self.inner.engine {
            Engine::Sqlite(_) => None,
            Engine::Postgres(e) => Some(e.pool_use()),
        }
    }

    /// Runs a bounded read (point lookups, index-ordered pages). `f` may run more than once
    /// when the engine retries it on another connection.
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        let result = match &self.inner.engine {
            Engine::Sqlite(e) => e.read(f).await,
            Engine::Postgres(e) => e.read(f).await,
        };
        self.rebuild_pages();
        result
    }

    /// Runs a read that may take long (scans, sorts, counts) off the async threads.
    pub async fn scan<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        let result = match &self.inner.engine {
            Engine::Sqlite(e) => e.scan(f).await,
            // Every PostgreSQL read runs off the async threads already; a long one waits for
            // a thread behind the short ones.
            Engine::Postgres(e) => e.scan(f).await,
        };
        self.rebuild_pages();
        result
    }

    /// Runs `f` as one all-or-nothing write and returns once it is committed. `f` may run more
    /// than once when the engine retries a transaction that conflicted with a concurrent one.
    /// The revisions it records name `ctx`.
    pub async fn write<T, F>(&self, ctx: &WriteContext, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        self.write_in(ctx, Atomicity::Transaction, f).await
    }

    /// [`Db::write`], told how much of `f` must be one transaction.
    pub async fn write_in<T, F>(&self, ctx: &WriteContext, atomicity: Atomicity, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
    {
        let written = match &self.inner.engine {
            Engine::Sqlite(e) => e.write(ctx.clone(), f).await,
            Engine::Postgres(e) => e.write(ctx.clone(), atomicity, f).await,
        };
        if written.is_ok() {
            self.inner.commits.notify_one();
        }
        written
    }

    /// Returns after a write through this handle commits (or at once, if one committed since
    /// the last call returned): for one waiter, the live stream's hub, which also looks for
    /// the writes of other processes by itself.
    pub async fn committed(&self) {
        self.inner.commits.notified().await
    }

    /// Makes every revision committed so far readable in the change feed (PostgreSQL gives
    /// revisions their place after they commit; SQLite as they commit).
    pub async fn sync_feed(&self) -> Result<()> {
        match &self.inner.engine {
            Engine::Sqlite(_) => Ok(()),
            Engine::Postgres(e) => e.sync_feed().await,
        }
    }

    /// Runs `f` on a connection of the calling thread, outside any async runtime (commands such
    /// as `copy`, not the server).
    pub fn read_blocking<T>(&self, f: impl FnOnce(&mut dyn Tx) -> T) -> Result<T> {
        match &self.inner.engine {
            Engine::Sqlite(e) => e.read_blocking(f),
            Engine::Postgres(e) => e.read_blocking(f),
        }
    }

    /// Why the database takes no more writes until the server is restarted: a sync of a
    /// SQLite file failed (see `sqlite::Failed`). PostgreSQL stops and recovers by itself.
    pub fn failure(&self) -> Option<&str> {
        match &self.inner.engine {
            Engine::Sqlite(e) => e.failure(),
            Engine::Postgres(_) => None,
        }
    }

    /// Whether the database answers a query now (for `/readyz`).
    pub async fn ready(&self) -> bool {
        self.read(|tx| Ok(tx.first("SELECT 1", &[])?)).await.is_ok()
    }

    /// Keeps `value` as the setting `name` unless the database holds one already; returns the
    /// setting kept and whether it is `value`. `None` where the database keeps no settings of
    /// its own (a SQLite file: what it needs kept goes beside it).
    pub async fn keep_setting(&self, name: &'static str, value: String) -> Result<Option<(String, bool)>> {
        match &self.inner.engine {
            Engine::Sqlite(_) => Ok(None),
            Engine::Postgres(_) => self
                .write(&WriteContext::system("coursed"), move |tx| Ok(postgres::keep_setting(tx, name, &value)?))
                .await
                .map(Some),
        }
    }

    /// Where the pages of each table start (see [`paging`]).
    pub fn pages(&self) -> &PageIndex {
        &self.inner.shared.pages
    }

    /// How many SQL statements have run, when counting was asked for in [`Options`].
    pub fn statements(&self) -> Option<u64> {
        self.inner.shared.statements.as_ref().map(|s| s.count.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// The latest statements run, oldest first, with their parameters, when counting was asked
    /// for in [`Options`].
    pub fn latest_statements(&self) -> Vec<(String, Vec<Value>)> {
        let kept =
            self.inner.shared.statements.as_ref().map(|s| s.latest.lock().unwrap_or_else(|e| e.into_inner()).clone());
        kept.map(Vec::from).unwrap_or_default()
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
            let built = db.scan(move |tx| list::page_keys(tx, table)).await.ok();
            db.pages().finish(table, built);
        });
    }
}

/// Runs `f` over one transaction on the database `path` for copying into it in bulk (see
/// [`bulk`]): the database must hold no resources and no history unless `replace`, which
/// removes them first; `f` carries the history of what it copies. Blocks.
pub fn bulk<T>(
    path: &str,
    replace: bool,
    wait: Duration,
    f: impl FnOnce(&mut dyn Tx) -> std::result::Result<T, String>,
) -> std::result::Result<T, String> {
    bulk_into(path, bulk::Target::new(replace).by("copy").carrying_history(), wait, f)
}

/// [`bulk`], with what becomes of the resources the target holds, and whether it commits,
/// told by `target`.
pub fn bulk_into<T>(
    path: &str,
    target: bulk::Target,
    wait: Duration,
    f: impl FnOnce(&mut dyn Tx) -> std::result::Result<T, String>,
) -> std::result::Result<T, String> {
    if is_postgres_url(path) {
        postgres::bulk(path, target, wait, f)
    } else {
        sqlite::bulk(path, target, f)
    }
}

/// Runs `f` on the database `database` opened for a command (`coursed token ...`, `coursed
/// history ...`), on a runtime of its own, and closes it. A SQLite file must exist unless
/// `create`. Blocks.
pub fn on_command_database<T>(
    database: &str,
    create: bool,
    f: impl AsyncFnOnce(&Db) -> Result<T>,
) -> std::result::Result<T, String> {
    if !create {
        require_existing(database, DATABASE_FLAG)?;
    }
    let mut opts = Options::new(database, Durability::Full);
    opts.wait = COMMAND_WAIT;
    let db = Db::open(&opts)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let done = runtime.block_on(f(&db));
    drop(runtime);
    drop(db);
    done.map_err(|e| format!("{}: {e}", display_name(database)))
}

/// Refuses a SQLite file that does not exist, for a command that must not create one: a missing
/// or mistyped `--database` would otherwise make a new, empty database beside the server's.
/// `named_by` says how to name another (`--database or COURSED_DATABASE`).
pub fn require_existing(database: &str, named_by: &str) -> std::result::Result<(), String> {
    if is_postgres_url(database) || database == ":memory:" || std::path::Path::new(database).exists() {
        return Ok(());
    }
    let shown = std::path::absolute(database).map_or_else(|_| database.to_owned(), |p| p.display().to_string());
    Err(format!(
        "there is no database at {shown}, and this command creates none: name the server's database with {named_by}"
    ))
}

/// How the commands name their database.
pub const DATABASE_FLAG: &str = "--database or COURSED_DATABASE";

/// What a command keeps in the database (tokens, webhooks) read or written in one transaction
/// by `f`: [`on_command_database`] on a database that exists, refusing `:memory:` (what is kept
/// there vanishes with the process; `kept` names it in the message).
pub fn on_command_tx<T: Send + 'static>(
    database: &str,
    kept: &str,
    write: bool,
    create: bool,
    // FnMut: PostgreSQL may run a write again after a serialization failure.
    mut f: impl FnMut(&mut dyn Tx) -> std::result::Result<T, DbError> + Send + 'static,
) -> std::result::Result<T, String> {
    if database == ":memory:" {
        return Err(format!("{kept} of a :memory: database vanish with the process; name a file or a postgres:// URL"));
    }
    on_command_database(database, create, async move |db: &Db| {
        if write {
            db.write(&WriteContext::system("coursed"), move |tx| Ok(f(tx)?)).await
        } else {
            db.read(move |tx| Ok(f(tx)?)).await
        }
    })
}

/// Writes a consistent snapshot of the SQLite database `path` into the new file `dest`, while
/// other connections go on reading and writing. Blocks.
pub fn snapshot_sqlite(path: &str, dest: &std::path::Path) -> std::result::Result<(), String> {
    sqlite::snapshot_into(path, dest)
}

/// Writes the new SQLite file `output` with `fill` (handed a temporary name beside it), then
/// checks it (`PRAGMA integrity_check`), counts its resources, flushes it and renames it to
/// `output`; on failure nothing is left. Blocks.
pub fn write_sqlite_file(
    output: &std::path::Path,
    fill: impl FnOnce(&std::path::Path) -> std::result::Result<(), String>,
) -> std::result::Result<bulk::Counts, String> {
    sqlite::write_new(output, fill)
}

/// Removes the SQLite file `path` and whatever journal files it has beside it.
pub fn remove_sqlite_file(path: &std::path::Path) {
    sqlite::remove_with_sidecars(path)
}
