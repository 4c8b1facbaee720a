//! Bulk loading into a SQLite file: one transaction, rollback journal (cheap for pages that
//! are only appended, and what makes an interrupted load leave the file as it was).

use rusqlite::Connection;

use super::tx::{db_error, SqliteTx};
use crate::store::bulk::counts;
use crate::store::tx::{Shared, Tx};

/// Runs `f` over a transaction on the file `path` (created and migrated if needed), which must
/// hold no resources unless `replace` (then they are deleted first, in the same transaction).
pub fn bulk<T>(path: &str, replace: bool, f: impl FnOnce(&mut dyn Tx) -> Result<T, String>) -> Result<T, String> {
    if path == ":memory:" {
        return Err("load into a database file, not :memory:".into());
    }
    super::create(path)?;
    let conn = Connection::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    let fail = |e: rusqlite::Error| format!("loading {path} failed: {e}");
    conn.execute_batch(
        "PRAGMA journal_mode = DELETE; PRAGMA synchronous = FULL; PRAGMA cache_size = -262144; \
         PRAGMA foreign_keys = ON; BEGIN IMMEDIATE;",
    )
    .map_err(fail)?;
    let shared = Shared::default();
    let mut tx = SqliteTx { conn: &conn, shared: &shared };
    let outcome = (|| {
        let existing = counts(&mut tx).map_err(|e| e.to_string())?.total();
        if existing > 0 && !replace {
            return Err(format!("{path} already holds {existing} resources; use an empty database (or --replace)"));
        }
        if existing > 0 {
            conn.execute_batch("DELETE FROM chapters; DELETE FROM subjects; DELETE FROM modules;").map_err(fail)?;
        }
        f(&mut tx)
    })();
    let value = match outcome {
        Ok(v) => v,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    };
    conn.execute_batch("COMMIT; ANALYZE; PRAGMA journal_mode = WAL;")
        .map_err(|e| format!("loading {path} failed: {}", db_error(e)))?;
    Ok(value)
}
