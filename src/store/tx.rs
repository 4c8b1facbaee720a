//! What the engine-neutral store code sees of a database: a [`Tx`] that runs SQL with `?`
//! placeholders over neutral [`Value`]s and hands back rows as [`Cell`]s, and the few kinds of
//! failure ([`DbError`]) that the API answers differently.
//!
//! Each engine implements [`Tx`] and [`Row`] in its own module; nothing above this file names
//! rusqlite or postgres types.

use crate::error::Error;
use crate::store::dialect::Dialect;
use crate::store::paging::PageIndex;
use crate::store::WriteContext;
pub use crate::value::{Cell, Value};

/// A row being stepped.
pub trait Row {
    fn cell(&self, i: usize) -> Cell<'_>;
}

/// A failure of the database, in the kinds the API answers differently.
#[derive(Debug, Clone)]
pub enum DbError {
    /// A unique index refused a duplicate of `table.column`.
    Unique { table: String, column: String },
    /// Busy, locked, full, read-only or unreachable: nothing was written, retry later (503).
    Unavailable(String),
    /// A deadlock or serialization failure with a concurrent transaction: the engine retries
    /// the whole transaction, and answers 503 only when retrying does not resolve it.
    Conflict(String),
    /// The request's time budget ran out and its statement was stopped (503; nothing written).
    TimedOut(String),
    /// Anything else: a fault (500).
    Other(String),
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DbError::Unique { table, column } => write!(f, "a duplicate of {table}.{column}"),
            DbError::Unavailable(cause)
            | DbError::Conflict(cause)
            | DbError::TimedOut(cause)
            | DbError::Other(cause) => f.write_str(cause),
        }
    }
}

impl From<DbError> for Error {
    fn from(e: DbError) -> Error {
        match e {
            DbError::Unavailable(cause) => Error::unavailable(cause),
            DbError::TimedOut(cause) => Error::timed_out(cause),
            DbError::Conflict(cause) => {
                log::debug!("conflict with a concurrent transaction: {cause}");
                Error::busy()
            }
            DbError::Unique { table, column } => Error::internal(format!("unexpected duplicate of {table}.{column}")),
            DbError::Other(cause) => Error::internal(cause),
        }
    }
}

/// A connection inside one unit of work (a read, a read snapshot, or a write transaction).
///
/// SQL uses `?` placeholders, bound in order; each engine prepares a statement once per
/// connection and reuses it.
pub trait Tx {
    fn dialect(&self) -> Dialect;
    /// Runs `sql` and calls `each` with every row; returns the number of rows.
    fn query(&mut self, sql: &str, params: &[Value], each: &mut dyn FnMut(&dyn Row)) -> Result<u64, DbError>;
    /// Runs a statement that returns no rows; returns the number of rows changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError>;
    /// Starts a read snapshot: the reads until [`Tx::end_snapshot`] see one state.
    fn begin_snapshot(&mut self) -> Result<(), DbError>;
    fn end_snapshot(&mut self) -> Result<(), DbError>;
    /// Where the pages of each table start (see the `paging` module).
    fn pages(&self) -> &PageIndex;
    /// The tags of revalidated documents, shared by the database's connections.
    fn tags(&self) -> &Tags;
    /// The feed's head before the oldest commit that readers may see and that is not yet on
    /// the disk, when there is one (see [`Unflushed`]).
    fn unflushed_from(&self) -> Option<i64> {
        None
    }
    /// Inside a read snapshot: a mark of the database's state that any commit (by any
    /// connection or process) changes, so that what was read under an equal mark is still
    /// current. `None` where the engine has no cheap one (PostgreSQL).
    fn mark(&mut self) -> Result<Option<Mark>, DbError> {
        Ok(None)
    }
    /// Whether [`Tx::mark`] can give marks (worth a snapshot of its own).
    fn has_marks(&self) -> bool {
        false
    }
    /// Tells the history triggers who makes the writes that follow in this unit of work.
    fn set_context(&mut self, ctx: &WriteContext) -> Result<(), DbError>;
}

/// See [`Tx::mark`]: on SQLite, the header of the WAL index the snapshot reads (its frame count,
/// salts and checksums).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Mark(pub [u8; 48]);

/// The tags of resource documents last revalidated, each with the mark of the state it was
/// computed in: a conditional `GET` whose mark is unchanged answers 304 without reading the
/// row. Bounded: emptied when full.
#[derive(Default)]
pub struct Tags {
    map: std::sync::Mutex<std::collections::HashMap<String, (String, Mark)>>,
}

impl Tags {
    /// Entries kept at most (about 250 bytes each).
    const MAX: usize = 16_384;
    /// The longest key remembered, in bytes.
    const MAX_KEY: usize = 512;

    /// The tag remembered for `key`, if it was computed under `mark`.
    pub fn get(&self, key: &str, mark: Mark) -> Option<String> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key).filter(|(_, at)| *at == mark).map(|(tag, _)| tag.clone())
    }

    pub fn put(&self, key: String, tag: String, mark: Mark) {
        // A long query string (a URI may be tens of KiB) is not worth the memory.
        if key.len() > Self::MAX_KEY {
            return;
        }
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= Self::MAX && !map.contains_key(&key) {
            map.clear();
        }
        map.insert(key, (tag, mark));
    }
}

impl dyn Tx + '_ {
    /// The first column of the first row, if any.
    pub fn first(&mut self, sql: &str, params: &[Value]) -> Result<Option<Value>, DbError> {
        let mut out = None;
        self.query(sql, params, &mut |r| {
            if out.is_none() {
                out = Some(r.cell(0).to_value());
            }
        })?;
        Ok(out)
    }

    /// Whether `sql` returns a row.
    pub fn exists(&mut self, sql: &str, params: &[Value]) -> Result<bool, DbError> {
        Ok(self.first(sql, params)?.is_some())
    }

    /// The first column of every row, as text.
    pub fn strings(&mut self, sql: &str, params: &[Value]) -> Result<Vec<String>, DbError> {
        let mut out = Vec::new();
        self.query(sql, params, &mut |r| out.push(r.cell(0).as_str().unwrap_or_default().to_owned()))?;
        Ok(out)
    }
}

/// Runs several reads as one consistent snapshot. The snapshot ends however `f` ends, a panic
/// included (which then goes on): a pooled connection must not go back to its pool still in
/// the snapshot's transaction.
pub fn snapshot<T>(tx: &mut dyn Tx, f: impl FnOnce(&mut dyn Tx) -> crate::error::Result<T>) -> crate::error::Result<T> {
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    tx.begin_snapshot()?;
    let value = catch_unwind(AssertUnwindSafe(|| f(&mut *tx)));
    let ended = tx.end_snapshot();
    let value = value.unwrap_or_else(|panic| resume_unwind(panic))?;
    ended?;
    Ok(value)
}

/// Runs `f`, turning a panic into a 500 so that no request can take a thread down.
pub fn guarded<T>(f: impl FnOnce() -> crate::error::Result<T>) -> crate::error::Result<T> {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Err(Error::internal("a database closure panicked")))
}

/// What every connection of one database shares: the page index and, for tests, the
/// statements run.
#[derive(Default)]
pub struct Shared {
    pub pages: PageIndex,
    /// What this process committed and has not yet synced (see [`Unflushed`]).
    pub unflushed: Unflushed,
    /// Tags of revalidated documents (see [`Tags`]).
    pub tags: Tags,
    pub statements: Option<Statements>,
}

impl Shared {
    /// Counts one statement and keeps it with its parameters, when counting was asked for.
    pub fn note(&self, sql: &str, params: &[Value]) {
        if let Some(s) = &self.statements {
            s.count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut latest = s.latest.lock().unwrap_or_else(|e| e.into_inner());
            if latest.len() == Statements::KEPT {
                latest.pop_front();
            }
            latest.push_back((sql.to_owned(), params.to_vec()));
        }
    }
}

/// The groups of writes that this process committed but has not yet synced, for an engine
/// that lets others read a commit before it is synced (SQLite under `--durability full`: the
/// writer commits and its flushing thread syncs behind it). Readers of the change feed (the
/// revisions, the live stream, webhooks, followers) are served only up to the feed's head
/// before the oldest of them: a power cut in that window may take those revisions back, and
/// whoever was told of one would hold a cursor ahead of the feed, or a revision the feed then
/// gives another place. Commits of other processes are theirs to sync; they are served as soon
/// as they are seen.
#[derive(Debug, Default)]
pub struct Unflushed(std::sync::Mutex<std::collections::VecDeque<(u64, i64)>>);

impl Unflushed {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(u64, i64)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The feed's head before the oldest group not yet synced, if any is.
    pub fn cap(&self) -> Option<i64> {
        self.lock().front().map(|(_, before)| *before)
    }

    /// Group `group` (numbered in commit order) is about to commit after the feed's head
    /// `before`: called before its commit, so that no reader is served its revisions early.
    pub fn committing(&self, group: u64, before: i64) {
        self.lock().push_back((group, before));
    }

    /// Every group up to `group` is on the disk.
    pub fn synced(&self, group: u64) {
        let mut pending = self.lock();
        while pending.front().is_some_and(|(g, _)| *g <= group) {
            pending.pop_front();
        }
    }
}

/// For tests: how many statements have run, and the latest with their parameters (so that a
/// test can ask the engine how it runs them).
#[derive(Default)]
pub struct Statements {
    pub count: std::sync::atomic::AtomicU64,
    pub latest: std::sync::Mutex<std::collections::VecDeque<(String, Vec<Value>)>>,
}

impl Statements {
    const KEPT: usize = 32;
}
