//! PostgreSQL's side of [`Tx`]: statements prepared once per connection (numbered from the
//! `?` form), values bound by the column types the server infers, rows read in place, and
//! errors sorted into what the API answers and what the engine retries.

use std::error::Error as StdError;
use std::time::{Duration, UNIX_EPOCH};

use bytes::BytesMut;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};

use super::client::PgConn;
use crate::resources::TYPES;
use crate::store::dialect::{numbered, Dialect};
use crate::store::paging::PageIndex;
use crate::store::tx::{Cell, DbError, Row, Shared, Tags, Tx, Value};
use crate::store::WriteContext;

/// A connection in one unit of work.
pub struct PgTx<'c> {
    pub conn: &'c mut PgConn,
    pub shared: &'c Shared,
    /// A deadlock or serialization failure happened: the whole transaction may be retried.
    pub conflict: bool,
    /// A statement failed (a PostgreSQL transaction cannot go on after that).
    pub failed: bool,
}

impl<'c> PgTx<'c> {
    pub fn new(conn: &'c mut PgConn, shared: &'c Shared) -> PgTx<'c> {
        PgTx { conn, shared, conflict: false, failed: false }
    }

    pub fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        self.shared.note(sql, &[]);
        let r = self.conn.batch(sql);
        r.map_err(|e| self.fail(e))
    }

    /// Rolls the transaction back (a failure to is the connection's, found by its next use);
    /// the context set in it goes with it.
    pub fn rollback(&mut self) {
        let _ = self.batch("ROLLBACK");
        self.conn.context = None;
    }

    /// Holds `sql` back to send it with the next statement (a transaction's `BEGIN`); it counts
    /// as a statement run.
    pub fn defer(&mut self, sql: &str) {
        self.shared.note(sql, &[]);
        self.conn.defer(sql);
    }

    fn statement(&mut self, sql: &str) -> Result<tokio_postgres::Statement, DbError> {
        if let Some(st) = self.conn.statements.get(sql) {
            return Ok(st.clone());
        }
        let prepared = self.conn.prepare(&numbered(sql));
        let st = prepared.map_err(|e| self.fail(e))?;
        self.conn.statements.insert(sql.to_owned(), st.clone());
        Ok(st)
    }

    /// Sorts a failure; notes conflicts (retry the transaction) and lost connections.
    pub fn fail(&mut self, e: tokio_postgres::Error) -> DbError {
        self.failed = true;
        // The transaction ends rolled back, and a context set in it with it.
        self.conn.context = None;
        let Some(db) = e.as_db_error() else {
            if self.conn.is_closed() || e.is_closed() || e.source().is_some_and(|s| s.is::<std::io::Error>()) {
                self.conn.broken = true;
                return DbError::Unavailable(format!("connection to PostgreSQL lost: {e}"));
            }
            return DbError::Other(e.to_string());
        };
        let code = db.code();
        if *code == SqlState::UNIQUE_VIOLATION {
            let table = db.table().unwrap_or("").to_owned();
            // A row a concurrent transaction inserted after this one looked for it: a resource
            // two restores bring back at once, or a revision numbered alike. Retrying finds
            // it there (and the restore then changes nothing, or numbers after it).
            let constraint = db.constraint().unwrap_or("");
            let resource_key = constraint.strip_suffix("_pkey").is_some_and(|t| TYPES.iter().any(|rt| rt.table == t));
            if resource_key || constraint == "revisions_resource" {
                self.conflict = true;
                return DbError::Conflict(db.message().to_owned());
            }
            let column = constraint.strip_prefix(&format!("{table}_")).unwrap_or("").to_owned();
            return DbError::Unique { table, column };
        }
        // A deadlock, a serialization failure, or a row named by a foreign key deleted by a
        // concurrent transaction since this one checked it: retrying finds the state as it is
        // (and the generic checks then answer, e.g. 404 for the deleted row).
        if *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
            || *code == SqlState::FOREIGN_KEY_VIOLATION
        {
            self.conflict = true;
            return DbError::Conflict(db.message().to_owned());
        }
        if *code == SqlState::QUERY_CANCELED {
            return DbError::TimedOut(format!("{}: {}", code.code(), db.message()));
        }
        let class = &code.code()[..2];
        // The server went away (shut down, restarted, lost the connection): this connection is
        // done, and work that had not committed may run again on another one.
        // A disk error of the server's (class 58: a failed fsync, a missing file) stops it: it
        // restarts and recovers from its WAL by itself (PostgreSQL's answer to a failed fsync).
        if class == "08"
            || class == "58"
            || [SqlState::ADMIN_SHUTDOWN, SqlState::CRASH_SHUTDOWN, SqlState::CANNOT_CONNECT_NOW].contains(code)
        {
            self.conn.broken = true;
            return DbError::Unavailable(format!("{}: {}", code.code(), db.message()));
        }
        // Too many connections, a lock wait or a statement over its time limit, a read-only
        // server: nothing was done; the client may retry later.
        if ["53", "57"].contains(&class)
            || *code == SqlState::LOCK_NOT_AVAILABLE
            || *code == SqlState::READ_ONLY_SQL_TRANSACTION
        {
            return DbError::Unavailable(format!("{}: {}", code.code(), db.message()));
        }
        DbError::Other(format!("{}: {}", code.code(), db.message()))
    }
}

impl Tx for PgTx<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn query(&mut self, sql: &str, params: &[Value], each: &mut dyn FnMut(&dyn Row)) -> Result<u64, DbError> {
        self.shared.note(sql, params);
        let st = self.statement(sql)?;
        let r = self.conn.query(&st, params.iter().map(Param), &mut |row| each(&PgRow(row)));
        r.map_err(|e| self.fail(e))
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        self.shared.note(sql, params);
        let st = self.statement(sql)?;
        let r = self.conn.execute(&st, params.iter().map(Param));
        r.map_err(|e| self.fail(e))
    }

    fn begin_snapshot(&mut self) -> Result<(), DbError> {
        self.defer("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        Ok(())
    }

    fn end_snapshot(&mut self) -> Result<(), DbError> {
        if self.conn.cancel_deferred() {
            return Ok(()); // nothing was read: the snapshot never began
        }
        self.batch("COMMIT")
    }

    fn pages(&self) -> &PageIndex {
        &self.shared.pages
    }

    fn tags(&self) -> &Tags {
        &self.shared.tags
    }

    /// Sets the session's `coursed.by` and `coursed.action` (read by the history triggers) when
    /// they differ from what it holds: sent with the next statement, no round trip of its own.
    /// Session settings, not local ones: a one-statement write has no transaction of its own
    /// to keep them in; a rolled back transaction takes them back (then forgotten here too).
    fn set_context(&mut self, ctx: &WriteContext) -> Result<(), DbError> {
        if self.conn.context.as_ref() == Some(ctx) {
            return Ok(());
        }
        // Not counted as a statement of its own: it rides with the next one.
        self.conn.ride(context_statement(ctx));
        self.conn.context = Some(ctx.clone());
        Ok(())
    }
}

/// The statement that sets `ctx` on a session, its values as literals (sent with the simple
/// protocol, which takes no parameters).
fn context_statement(ctx: &WriteContext) -> String {
    format!(
        "SELECT set_config('coursed.by', {}, false), set_config('coursed.action', {}, false)",
        literal(&ctx.by),
        literal(ctx.action().unwrap_or(""))
    )
}

/// `s` as an SQL string literal (`standard_conforming_strings` is on since PostgreSQL 9.1: a
/// backslash is itself; a quote is doubled; a NUL, which no literal can hold, is dropped).
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\0', "").replace('\'', "''"))
}

struct PgRow<'a>(&'a tokio_postgres::Row);

/// Text as the server sent it: a UTF-8 database sends valid UTF-8, which the renderer checks
/// once anyway, so it is not checked twice.
struct RawText<'a>(&'a [u8]);

impl<'a> FromSql<'a> for RawText<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        Ok(RawText(raw))
    }
    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

impl Row for PgRow<'_> {
    fn cell(&self, i: usize) -> Cell<'_> {
        let Some(column) = self.0.columns().get(i) else { return Cell::Null };
        let row = self.0;
        match *column.type_() {
            Type::INT8 => row.try_get::<_, Option<i64>>(i).ok().flatten().map_or(Cell::Null, Cell::Int),
            Type::INT4 => row.try_get::<_, Option<i32>>(i).ok().flatten().map_or(Cell::Null, |n| Cell::Int(n.into())),
            Type::INT2 => row.try_get::<_, Option<i16>>(i).ok().flatten().map_or(Cell::Null, |n| Cell::Int(n.into())),
            Type::BOOL => row.try_get::<_, Option<bool>>(i).ok().flatten().map_or(Cell::Null, Cell::Bool),
            Type::TIMESTAMPTZ | Type::TIMESTAMP => row
                .try_get::<_, Option<std::time::SystemTime>>(i)
                .ok()
                .flatten()
                .map_or(Cell::Null, |t| Cell::Time(crate::time::ms_of(t))),
            _ => row.try_get::<_, Option<RawText<'_>>>(i).ok().flatten().map_or(Cell::Null, |t| Cell::Text(t.0)),
        }
    }
}

/// A neutral value bound as the type the server inferred for its parameter.
#[derive(Debug)]
struct Param<'a>(&'a Value);

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        let is_time = *ty == Type::TIMESTAMPTZ || *ty == Type::TIMESTAMP;
        let is_int = [Type::INT8, Type::INT4, Type::INT2].contains(ty);
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Text(s) if is_time => {
                let ms = crate::time::parse_ms(s).ok_or_else(|| format!("not a timestamp: {s:?}"))?;
                time(ms).to_sql_checked(ty, out)
            }
            Value::Text(s) => s.as_str().to_sql_checked(ty, out),
            Value::Int(i) | Value::Time(i) if is_time => time(*i).to_sql_checked(ty, out),
            Value::Int(i) if *ty == Type::INT4 => i32::try_from(*i)?.to_sql_checked(ty, out),
            Value::Int(i) if *ty == Type::INT2 => i16::try_from(*i)?.to_sql_checked(ty, out),
            Value::Int(i) if *ty == Type::BOOL => (*i != 0).to_sql_checked(ty, out),
            Value::Int(i) => i.to_sql_checked(ty, out),
            Value::Bool(b) if is_int => Param(&Value::Int(i64::from(*b))).to_sql(ty, out),
            Value::Bool(b) => b.to_sql_checked(ty, out),
            Value::Time(ms) => crate::time::format_ms(*ms).to_sql_checked(ty, out),
            Value::Ids(ids) => ids.to_sql_checked(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn time(ms: i64) -> std::time::SystemTime {
    match u64::try_from(ms) {
        Ok(ms) => UNIX_EPOCH + Duration::from_millis(ms),
        Err(_) => UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs()),
    }
}
