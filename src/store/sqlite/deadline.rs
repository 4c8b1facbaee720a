//! A time budget for the reads of one request: SQLite has no statement timeout, so each reader
//! connection has a progress handler that interrupts the statement running when the unit of
//! work on its thread has outlived its deadline (see [`within`]). An interrupted read rolls
//! nothing back and leaves its connection as healthy as any other (SQLite: a read-only
//! statement's `SQLITE_INTERRUPT` needs no rollback); it ends in a 503.
//!
//! Writes are never interrupted: on the one writer an interrupted write would roll back every
//! other write of its group with it. Their work is bounded by what they send.

use std::cell::Cell;
use std::time::{Duration, Instant};

use rusqlite::Connection;

/// How many virtual machine instructions run between two looks at the clock (well under a
/// millisecond).
const EVERY: i32 = 10_000;

thread_local! {
    /// The deadline of the unit of work running on this thread, if any.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Gives `c` the progress handler that interrupts statements past their thread's deadline.
pub fn install(c: &Connection) -> rusqlite::Result<()> {
    c.progress_handler(EVERY, Some(|| DEADLINE.with(|d| d.get().is_some_and(|at| Instant::now() >= at))))
}

/// Runs `f` with a deadline of `limit` from now for the statements it runs on this thread.
pub fn within<T>(limit: Duration, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|d| d.set(self.0));
        }
    }
    let _restore = Restore(DEADLINE.with(|d| d.replace(Instant::now().checked_add(limit))));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runaway_read_is_interrupted_at_its_deadline_and_the_connection_goes_on() {
        let c = Connection::open_in_memory().unwrap();
        install(&c).unwrap();
        let forever = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n";
        let e = within(Duration::from_millis(50), || c.query_row(forever, [], |r| r.get::<_, i64>(0))).unwrap_err();
        assert_eq!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::OperationInterrupted));
        // Outside a deadline nothing is interrupted, and the connection answers.
        let n: i64 = c.query_row("SELECT count(*) FROM (SELECT 1 UNION ALL SELECT 2)", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 2);
    }
}
