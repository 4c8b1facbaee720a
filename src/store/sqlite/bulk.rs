//! Bulk loading into a SQLite file: one transaction, rollback journal (cheap for pages that
//! are only appended), or WAL when a server holds the file open; either way an interrupted
//! load leaves the file as it was.

use std::time::Duration;

use rusqlite::Connection;

use super::tx::{db_error, SqliteTx};
use crate::store::bulk::{counts, Existing, Target};
use crate::store::history;
use crate::store::tx::{DbError, Shared, Tx};
use crate::store::WriteContext;

/// How long a load waits for the write lock of a server on the same file.
const BUSY: Duration = Duration::from_secs(30);

/// Runs `f` over a transaction on the file `path` (created and migrated if needed), treating
/// the resources it holds as `target` says.
pub fn bulk<T>(path: &str, target: Target, f: impl FnOnce(&mut dyn Tx) -> Result<T, String>) -> Result<T, String> {
    if path == ":memory:" {
        return Err("load into a database file, not :memory:".into());
    }
    super::create(path)?;
    let conn = Connection::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    let fail = |e: rusqlite::Error| format!("loading {path} failed: {e}");
    // A server may have the file open (an import with --merge): wait for its writer's commits
    // rather than fail, and stay in WAL mode, which cannot be left while it is open.
    conn.busy_timeout(BUSY).map_err(fail)?;
    let _ = conn.execute_batch("PRAGMA journal_mode = DELETE");
    conn.execute_batch(
        "PRAGMA synchronous = FULL; PRAGMA cache_size = -262144; PRAGMA foreign_keys = ON; BEGIN IMMEDIATE;",
    )
    .map_err(fail)?;
    let shared = Shared::default();
    let mut tx = SqliteTx { conn: &conn, shared: &shared };
    let outcome = (|| {
        let history = |e: DbError| format!("recording the history of {path} failed: {e}");
        // The revisions name the command (the file's own `history_context`, in this
        // transaction; set back before it commits).
        tx.set_context(&WriteContext::system(target.by)).map_err(history)?;
        let merging = target.existing == Existing::Keep;
        if target.carries_history {
            // What is loaded comes with its history, which replaces the target's.
            conn.execute_batch("UPDATE history_context SET recording = 0").map_err(fail)?;
        }
        let existing = counts(&mut tx).map_err(|e| e.to_string())?.total();
        if target.clear_first(path, existing)? {
            // The triggers record each deletion (unless a history is carried).
            conn.execute_batch("DELETE FROM chapters; DELETE FROM subjects; DELETE FROM modules;").map_err(fail)?;
        }
        target.make_way_for_history(&mut tx, path)?;
        if !merging && !target.carries_history {
            // A load records one `create` per resource at the end, in one statement per type.
            conn.execute_batch("UPDATE history_context SET recording = 0").map_err(fail)?;
        }
        let value = f(&mut tx)?;
        if !merging && !target.carries_history {
            history::record_every(&mut tx, "create", target.by).map_err(history)?;
        }
        conn.execute_batch("UPDATE history_context SET actor = 'sqlite', action = NULL, recording = 1")
            .map_err(fail)?;
        Ok(value)
    })();
    let value = match outcome {
        Ok(v) if target.commit => v,
        outcome => {
            let _ = conn.execute_batch("ROLLBACK");
            back_to_wal(&conn, path);
            return outcome;
        }
    };
    if let Err(e) = conn.execute_batch("COMMIT") {
        let _ = conn.execute_batch("ROLLBACK");
        back_to_wal(&conn, path);
        return Err(format!("loading {path} failed: {}", db_error(e)));
    }
    // The load is in: what follows only tidies up, and a failure is not the load's.
    if let Err(e) = conn.execute_batch("ANALYZE") {
        log::warn!("{path}: the planner's statistics were not refreshed after the load ({e})");
    }
    back_to_wal(&conn, path);
    Ok(value)
}

/// Switches the file back to WAL after a load. A reader that opened the file meanwhile makes
/// SQLite answer BUSY at once, so this retries for a while; left in rollback-journal mode, the
/// file is switched by the next server that opens it.
fn back_to_wal(conn: &Connection, path: &str) {
    let _ = conn.busy_timeout(Duration::from_millis(100));
    let switch = || conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0));
    match super::open::retry_busy(switch, Duration::from_secs(5)) {
        Ok(mode) if mode.eq_ignore_ascii_case("wal") => {}
        Ok(mode) => log::warn!("{path} stays in journal mode {mode} until a server opens it"),
        Err(e) => log::warn!("{path} stays in rollback-journal mode until a server opens it ({e})"),
    }
}
