//! Bulk loading into PostgreSQL: one transaction holding the tables exclusively, the counting
//! triggers off while rows stream in and the counts computed once at the end.

use std::time::Duration;

use super::connect::Manager;
use super::tx::PgTx;
use crate::resources::TYPES;
use crate::store::bulk::{counts, Existing, Target};
use crate::store::history;
use crate::store::tx::{Shared, Tx};
use crate::store::WriteContext;

const TABLES: &str = "modules, subjects, chapters";

/// Runs `f` over a transaction on the database at `url` (migrated if needed), treating the
/// resources it holds as `target` says.
pub fn bulk<T>(
    url: &str,
    target: Target,
    wait: Duration,
    f: impl FnOnce(&mut dyn Tx) -> Result<T, String>,
) -> Result<T, String> {
    let manager = Manager::new(url, Duration::from_secs(30), Duration::from_secs(30))?;
    let name = manager.describe();
    let mut conn = super::first_connection(&manager, &name, wait)?;
    super::migrate::migrate(&mut conn, &Default::default())
        .map_err(|e| format!("cannot use PostgreSQL database {name}: {e}"))?;
    let shared = Shared::default();
    let mut tx = PgTx::new(&mut conn, &shared);
    let fail = |e| format!("loading {name} failed: {e}");
    // Servers on this database wait (and answer 503) rather than see a half-loaded catalogue.
    // Readers lock the count tables before the resource tables, writers the other way round:
    // whichever order the load locks them in, a request running meanwhile may deadlock with it,
    // and the load (waiting longest) is the one PostgreSQL aborts. Nothing is done yet then:
    // it takes the locks again.
    let lock = format!("BEGIN; LOCK TABLE {TABLES}, row_counts, search_changes, search_words IN ACCESS EXCLUSIVE MODE");
    for attempt in 1.. {
        match tx.batch(&lock) {
            Ok(()) => break,
            Err(_) if tx.conflict && attempt < 5 => {
                let _ = tx.batch("ROLLBACK");
                (tx.conflict, tx.failed) = (false, false);
                std::thread::sleep(Duration::from_millis(100 * attempt));
            }
            Err(e) => return Err(fail(e)),
        }
    }
    // Statements are prepared once and run for every batch while the tables grow from nothing:
    // a generic plan made when they were empty would scan them whole for every batch.
    tx.batch("SET LOCAL plan_cache_mode = force_custom_plan").map_err(fail)?;
    // The recount at the end is one statement over every resource: no request's time limit.
    tx.batch("SET LOCAL statement_timeout = 0").map_err(fail)?;
    let outcome = (|| {
        tx.set_context(&WriteContext::system(target.by)).map_err(fail)?;
        let existing = counts(&mut tx).map_err(fail)?.total();
        if target.clear_first(&name, existing)? {
            // TRUNCATE fires no row triggers: the deletions are recorded first (unless a
            // history is carried, which replaces the target's).
            if !target.carries_history {
                history::record_every(&mut tx, "delete", target.by).map_err(fail)?;
            }
            tx.batch(&format!("TRUNCATE {TABLES}, row_counts")).map_err(fail)?;
        }
        target.make_way_for_history(&mut tx, &name)?;
        tx.batch(
            "ALTER TABLE modules DISABLE TRIGGER USER; ALTER TABLE subjects DISABLE TRIGGER USER; \
             ALTER TABLE chapters DISABLE TRIGGER USER",
        )
        .map_err(fail)?;
        let merging = target.existing == Existing::Keep;
        if merging {
            // A merge records each change as a request would.
            tx.batch(&TYPES.iter().map(|rt| {
                let t = rt.table;
                format!("ALTER TABLE {t} ENABLE TRIGGER {t}_revision; ALTER TABLE {t} ENABLE TRIGGER {t}_revision_update")
            }).collect::<Vec<_>>().join("; "))
            .map_err(fail)?;
        }
        let value = f(&mut tx)?;
        if !merging && !target.carries_history {
            // A load records one `create` per resource, in one statement per type.
            history::record_every(&mut tx, "create", target.by).map_err(fail)?;
        }
        tx.batch(RECOUNT).map_err(fail)?;
        tx.batch(
            "ALTER TABLE modules ENABLE TRIGGER USER; ALTER TABLE subjects ENABLE TRIGGER USER; \
             ALTER TABLE chapters ENABLE TRIGGER USER",
        )
        .map_err(fail)?;
        Ok(value)
    })();
    if outcome.is_err() || !target.commit {
        let _ = tx.batch("ROLLBACK");
        return outcome;
    }
    tx.batch("COMMIT").map_err(fail)?;
    // The revisions get their place in the feed now, not at a server's next round.
    if let Err(e) = super::sequencer::sequence(tx.conn) {
        log::warn!("the revisions of the load wait for a server to put them in the change feed ({e})");
    }
    // Vacuumed too: fresh statistics for the planner, and pages marked all-visible.
    tx.batch(&format!("VACUUM (ANALYZE) {TABLES}")).map_err(fail)?;
    outcome
}

/// The counts the triggers would have kept. The generation starts from the clock, so that a
/// page index built by a server before a `--replace` can never look current afterwards.
const RECOUNT: &str = "
DELETE FROM row_counts;
INSERT INTO row_counts (tbl, parent, slot, n, gen)
    SELECT t.tbl, '', 0, t.n, t.n + (extract(epoch FROM clock_timestamp()) * 1000)::bigint
    FROM (SELECT 'modules' AS tbl, count(*) AS n FROM modules
          UNION ALL SELECT 'subjects', count(*) FROM subjects
          UNION ALL SELECT 'chapters', count(*) FROM chapters) AS t;
INSERT INTO row_counts (tbl, parent, slot, n, gen)
    SELECT 'subjects.module_id', module_id, 0, count(*), 0 FROM subjects WHERE module_id IS NOT NULL GROUP BY module_id;
INSERT INTO row_counts (tbl, parent, slot, n, gen)
    SELECT 'chapters.subject_id', subject_id, 0, count(*), 0 FROM chapters GROUP BY subject_id;
SELECT search_recount();
";
