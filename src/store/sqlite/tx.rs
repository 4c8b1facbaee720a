//! SQLite's side of [`Tx`]: statements prepared once per connection, values bound and rows
//! read in place, errors sorted into the kinds the API answers differently.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{ffi, params_from_iter, Connection, ToSql};

use crate::store::dialect::Dialect;
use crate::store::paging::PageIndex;
use crate::store::tx::{Cell, DbError, Mark, Row, Shared, Tags, Tx, Value};
use crate::store::WriteContext;

/// A connection in one unit of work.
pub struct SqliteTx<'c> {
    pub conn: &'c Connection,
    pub shared: &'c Shared,
}

impl SqliteTx<'_> {
    fn run(&self, sql: &str) -> Result<(), DbError> {
        self.shared.note(sql, &[]);
        self.conn.prepare_cached(sql).and_then(|mut st| st.execute([])).map(drop).map_err(db_error)
    }
}

impl Tx for SqliteTx<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn query(&mut self, sql: &str, params: &[Value], each: &mut dyn FnMut(&dyn Row)) -> Result<u64, DbError> {
        self.shared.note(sql, params);
        let mut st = self.conn.prepare_cached(sql).map_err(db_error)?;
        let mut rows = st.query(params_from_iter(params.iter().map(Param))).map_err(db_error)?;
        let mut n = 0;
        while let Some(row) = rows.next().map_err(db_error)? {
            each(&SqliteRow(row));
            n += 1;
        }
        Ok(n)
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        self.shared.note(sql, params);
        let mut st = self.conn.prepare_cached(sql).map_err(db_error)?;
        st.execute(params_from_iter(params.iter().map(Param))).map(|n| n as u64).map_err(db_error)
    }

    fn begin_snapshot(&mut self) -> Result<(), DbError> {
        self.run("BEGIN")
    }

    fn end_snapshot(&mut self) -> Result<(), DbError> {
        self.run("COMMIT")
    }

    fn has_marks(&self) -> bool {
        true
    }

    /// The writer installs its writes' context itself, once per change of caller (see
    /// `writer.rs`); here for other connections (an `import --merge`), in their transaction.
    fn set_context(&mut self, ctx: &WriteContext) -> Result<(), DbError> {
        let params = [Value::Text(ctx.by.to_string()), ctx.action().map_or(Value::Null, |a| Value::Text(a.into()))];
        self.execute("UPDATE history_context SET actor = ?, action = ? WHERE id = 1", &params).map(drop)
    }

    fn mark(&mut self) -> Result<Option<Mark>, DbError> {
        // `sqlite3_snapshot_get` opens the snapshot's read of the database itself.
        let mut snapshot: *mut ffi::sqlite3_snapshot = std::ptr::null_mut();
        // SAFETY: a plain call on this open connection; `snapshot` is freed below.
        let rc = unsafe { ffi::sqlite3_snapshot_get(self.conn.handle(), c"main".as_ptr(), &mut snapshot) };
        if rc != ffi::SQLITE_OK || snapshot.is_null() {
            // Not in WAL mode (a `:memory:` database), say: no mark, the row is read.
            return Ok(None);
        }
        // SAFETY: `snapshot` is a valid `sqlite3_snapshot`, 48 bytes, freed right after.
        let mark = unsafe {
            let mark = Mark((*snapshot).hidden);
            ffi::sqlite3_snapshot_free(snapshot);
            mark
        };
        Ok(Some(mark))
    }

    fn pages(&self) -> &PageIndex {
        &self.shared.pages
    }

    fn unflushed_from(&self) -> Option<i64> {
        self.shared.unflushed.cap()
    }

    fn tags(&self) -> &Tags {
        &self.shared.tags
    }
}

struct SqliteRow<'a, 'r>(&'a rusqlite::Row<'r>);

impl Row for SqliteRow<'_, '_> {
    fn cell(&self, i: usize) -> Cell<'_> {
        match self.0.get_ref(i) {
            Ok(ValueRef::Integer(n)) => Cell::Int(n),
            Ok(ValueRef::Text(t) | ValueRef::Blob(t)) => Cell::Text(t),
            Ok(ValueRef::Real(f)) => Cell::Int(f as i64),
            Ok(ValueRef::Null) | Err(_) => Cell::Null,
        }
    }
}

/// A value bound to a statement: booleans as 0/1, times as RFC 3339 text (so that text order is
/// time order), id lists as a JSON array read back with `json_each`.
struct Param<'a>(&'a Value);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        use rusqlite::types::Value as Owned;
        Ok(match self.0 {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Bool(b) => ToSqlOutput::Borrowed(ValueRef::Integer(i64::from(*b))),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Time(ms) => ToSqlOutput::Owned(Owned::Text(crate::time::format_ms(*ms))),
            Value::Ids(ids) => ToSqlOutput::Owned(Owned::Text(serde_json::to_string(ids).unwrap_or_default())),
        })
    }
}

/// Busy, full, read-only and I/O conditions are retryable (503, nothing written); a unique
/// index's refusal names its column; everything else is a fault.
pub fn db_error(e: rusqlite::Error) -> DbError {
    use rusqlite::ffi::ErrorCode::*;
    match e.sqlite_error_code() {
        Some(DatabaseBusy | DatabaseLocked | DiskFull | ReadOnly | SystemIoFailure | CannotOpen) => {
            DbError::Unavailable(e.to_string())
        }
        Some(OperationInterrupted) => DbError::TimedOut(e.to_string()),
        Some(ConstraintViolation) => {
            let msg = e.to_string();
            match msg.strip_prefix("UNIQUE constraint failed: ").and_then(|c| c.split_once('.')) {
                Some((table, column)) => DbError::Unique { table: table.to_owned(), column: column.to_owned() },
                None => DbError::Other(msg),
            }
        }
        _ => DbError::Other(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn busy_and_full_databases_are_503_and_other_faults_500() {
        let fail = |code| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None);
        let status = |code| Error::from(db_error(fail(code))).status;
        assert_eq!(status(rusqlite::ffi::SQLITE_BUSY), warp::http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(status(rusqlite::ffi::SQLITE_FULL), warp::http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(status(rusqlite::ffi::SQLITE_CORRUPT), warp::http::StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn a_unique_violation_names_its_column() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (x TEXT UNIQUE); INSERT INTO t VALUES ('a');").unwrap();
        let e = db_error(c.execute("INSERT INTO t VALUES ('a')", []).unwrap_err());
        assert!(matches!(e, DbError::Unique { ref table, ref column } if table == "t" && column == "x"), "{e:?}");
    }

    #[test]
    fn a_panic_in_a_snapshot_ends_its_transaction() {
        let c = Connection::open_in_memory().unwrap();
        let shared = Shared::default();
        let mut tx = SqliteTx { conn: &c, shared: &shared };
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::store::tx::snapshot(&mut tx, |_| -> crate::error::Result<()> { panic!("in the snapshot") })
        }));
        assert!(panicked.is_err(), "the panic goes on to the caller");
        assert!(c.is_autocommit(), "the connection is left in the snapshot's transaction");
    }
}
