//! The PostgreSQL schema, versioned in `coursed_schema` and migrated under an advisory lock so
//! that replicas starting at the same moment migrate once.

use super::client::PgConn;
use crate::store::upgrade::{self, BeforeMigration};

/// The schema migrations, in order; `coursed_schema` records those applied. Append only.
const MIGRATIONS: &[&str] = &[
    include_str!("../../../schema.postgres.sql"),
    TOKENS,
    SEARCH,
    SEARCH_COUNTS,
    LINKAGE_GENERATIONS,
    SEARCH_TITLES,
    HISTORY,
    WEBHOOKS,
    FOLLOW,
    FOLLOWERS_CARRY,
];
/// Tokens: named, scoped, hashed bearer tokens.
const TOKENS: &str = include_str!("../../../migrations/postgres/0002-tokens.sql");
/// Search: words columns and a GIN-indexed tsvector; the words of existing rows are computed
/// after it.
const SEARCH: &str = include_str!("../../../migrations/postgres/0003-search.sql");
/// Search counts: how many rows hold each word, kept from a log of changes (see
/// [`super::search::fold`]).
const SEARCH_COUNTS: &str = include_str!("../../../migrations/postgres/0004-search-counts.sql");
/// Each parent's counter of children also counts changes of the set (entity tags cover it).
const LINKAGE_GENERATIONS: &str = include_str!("../../../migrations/postgres/0005-linkage-generations.sql");
/// Search titles: an index of the titles' words, for the first tier of best match first.
const SEARCH_TITLES: &str = include_str!("../../../migrations/postgres/0006-search-titles.sql");
/// Every change kept: revisions recorded by triggers, sequenced into a feed after commit (see
/// `sequencer.rs`).
const HISTORY: &str = include_str!("../../../migrations/postgres/0007-history.sql");
/// Webhooks: readers of the change feed that POST what they keep to another system.
const WEBHOOKS: &str = include_str!("../../../migrations/postgres/0008-webhooks.sql");
/// Following another coursed: this feed's id, and what this database follows.
const FOLLOW: &str = include_str!("../../../migrations/postgres/0009-follow.sql");
/// The history triggers heed `coursed.recording`: a follower writes the revisions it applies.
const FOLLOWERS_CARRY: &str = include_str!("../../../migrations/postgres/0010-history-carried-by-followers.sql");
/// The advisory lock taken while migrating ("crsd").
const LOCK: i64 = 0x6372_7364;

/// Brings the schema up to date; refuses databases that are newer or hold another
/// application's tables, and, as `before` says, one that holds data (coursed cannot back it up).
pub fn migrate(conn: &mut PgConn, before: &BeforeMigration) -> Result<(), String> {
    // Another replica may hold the lock for as long as its migration takes: wait it out, past
    // the short lock wait that requests have.
    conn.batch("BEGIN; SET LOCAL lock_timeout = '10min'; SET LOCAL statement_timeout = 0").map_err(message)?;
    let outcome = steps(conn, before);
    let end = if outcome.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let committing = std::time::Instant::now();
    let ended = conn.batch(end).map_err(message);
    let version = outcome?;
    ended?;
    let known = MIGRATIONS.len() as i32;
    if version < known {
        let took = committing.elapsed().as_secs_f64();
        log::info!("database schema migrated from version {version} to {known} (committed in {took:.1} s)");
    }
    Ok(())
}

/// Migrates inside the caller's transaction; returns the version found.
fn steps(conn: &mut PgConn, before: &BeforeMigration) -> Result<i32, String> {
    // Held until the transaction ends; another replica waits here, then finds the work done.
    conn.rows("SELECT pg_advisory_xact_lock($1)", &[&LOCK]).map_err(message)?;
    let ours: bool = first(conn, "SELECT to_regclass('coursed_schema') IS NOT NULL")?.get(0);
    let version: i32 = if ours {
        first(conn, "SELECT coalesce(max(version), 0) FROM coursed_schema")?.get(0)
    } else {
        let found =
            first(conn, "SELECT count(*), current_schema() FROM pg_tables WHERE schemaname = current_schema()")?;
        let (tables, schema): (i64, String) = (found.get(0), found.get(1));
        if tables > 0 {
            return Err(format!(
                "its schema {schema} holds {tables} tables but is not a coursed database; use an empty database"
            ));
        }
        0
    };
    let known = MIGRATIONS.len() as i32;
    if version > known {
        return Err(format!(
            "its schema version is {version}, newer than this coursed knows ({known}); use a newer coursed"
        ));
    }
    if version > 0 && version < known {
        let shared = crate::store::tx::Shared::default();
        let holds = upgrade::holds_data(&mut super::tx::PgTx::new(conn, &shared), version.into());
        match (before, holds.map_err(|e| e.to_string())?) {
            (BeforeMigration::Backup { .. }, true) => {
                return Err(upgrade::postgres_refusal(version.into(), known.into()))
            }
            (BeforeMigration::Migrate, true) => log::warn!(
                "migrating the database from schema version {version} to {known} (--backup-before-migrate off): \
                 coursed cannot undo it; the way back is the backup taken before"
            ),
            (_, false) => {}
        }
        log::info!("migrating the database schema from version {version} to {known}, in one transaction");
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let began = std::time::Instant::now();
        conn.batch(step).map_err(|e| format!("migration {} failed: {}", i + 1, message(e)))?;
        if *step == SEARCH && version > 0 {
            let shared = crate::store::tx::Shared::default();
            let rows = crate::store::search::backfill_all(&mut super::tx::PgTx::new(conn, &shared))
                .map_err(|e| format!("migration {} failed: {e}", i + 1))?;
            log::info!("search words computed for {rows} existing resources");
        }
        conn.rows("INSERT INTO coursed_schema (version) VALUES ($1)", &[&(i as i32 + 1)]).map_err(message)?;
        if version > 0 {
            log::info!("migration {} of {known} done in {:.1} s", i + 1, began.elapsed().as_secs_f64());
        }
    }
    Ok(version)
}

fn first(conn: &mut PgConn, sql: &str) -> Result<tokio_postgres::Row, String> {
    conn.rows(sql, &[]).map_err(message)?.into_iter().next().ok_or_else(|| format!("no row from {sql}"))
}

fn message(e: tokio_postgres::Error) -> String {
    e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned())
}
