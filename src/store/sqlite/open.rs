//! Opening a SQLite database: per-connection settings, journal mode and migrations.

use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::store::upgrade::{self, BeforeMigration};
use crate::store::{Durability, Options};

/// The schema migrations, in order; `PRAGMA user_version` counts those applied. Append only.
const MIGRATIONS: &[&str] =
    &[include_str!("../../../schema.sql"), TOKENS, SEARCH, SEARCH_ROWS, LINKAGE_GENERATIONS, HISTORY, WEBHOOKS, FOLLOW];
/// Tokens: named, scoped, hashed bearer tokens.
const TOKENS: &str = include_str!("../../../migrations/sqlite/0002-tokens.sql");
/// Search: words columns and FTS5 indexes.
const SEARCH: &str = include_str!("../../../migrations/sqlite/0003-search.sql");
/// Search: the index of all texts keeps rows only (`detail=none`).
const SEARCH_ROWS: &str = include_str!("../../../migrations/sqlite/0004-search-rows.sql");
/// Each parent's counter of children also counts changes of the set (entity tags cover it).
const LINKAGE_GENERATIONS: &str = include_str!("../../../migrations/sqlite/0005-linkage-generations.sql");
/// Every change kept: revisions recorded by triggers (see `store/history.rs`).
const HISTORY: &str = include_str!("../../../migrations/sqlite/0006-history.sql");
/// Webhooks: readers of the change feed that POST what they keep to another system.
const WEBHOOKS: &str = include_str!("../../../migrations/sqlite/0007-webhooks.sql");
/// Following another coursed: this feed's id, and what this database follows.
const FOLLOW: &str = include_str!("../../../migrations/sqlite/0008-follow.sql");
/// Where a migration has coursed compute the words of the rows that exist (see
/// [`crate::store::search::backfill`]) before it goes on.
const WORDS_MARKER: &str = "-- coursed: words of existing rows";
/// Where the statements of a migration up to the next such line apply only to a database that
/// has the table named on the line (a search index, which a database may lack: see
/// `indexing.rs`).
const WHERE_EXISTS: &str = "-- coursed: where this table exists: ";
/// How long opening waits for another process that is migrating the same file (rebuilding a
/// search index of millions of rows takes minutes).
const MIGRATION_WAIT: Duration = Duration::from_secs(600);
/// The size, in bytes, a WAL that grew beyond it is cut back to when it starts over: more than
/// it reaches before the writer makes it start over (see `checkpoint.rs`: 4,000 to 6,000 pages
/// of 8 KiB), so that the steady state never truncates and extends the file again.
pub const WAL_LIMIT: i64 = 64 << 20;
/// Marks a file as a coursed database ("crsd").
pub const APPLICATION_ID: i64 = 0x6372_7364;

/// Opens the read-write connection: settings, journal mode, migrations.
pub fn open_writer(target: &str, opts: &Options) -> Result<Connection, String> {
    let fail = |e: rusqlite::Error| format!("cannot open database {}: {e}", opts.path);
    let flags = OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE;
    if target != ":memory:" && !target.starts_with("file:") {
        // A new database holds every token's hash: the owner's only. Should this fail, SQLite's
        // own open below says why.
        let _ = crate::private::precreate(std::path::Path::new(target));
    }
    let mut writer = Connection::open_with_flags(target, flags).map_err(fail)?;
    // Rows of a few KiB fit in one 8 KiB page: read in place from the mapping, with no
    // overflow pages to assemble. Takes effect only on a new, empty file.
    writer.pragma_update(None, "page_size", 8192).map_err(fail)?;
    configure(&writer, opts.busy_timeout).map_err(fail)?;
    // Another process may be creating or migrating the same file: wait it out, past the short
    // lock wait that requests have.
    writer.busy_timeout(opts.busy_timeout.max(MIGRATION_WAIT)).map_err(fail)?;
    let sync = match opts.durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    writer.pragma_update(None, "synchronous", sync).map_err(fail)?;
    // Each write runs in a savepoint, whose journal of original pages is a temporary file by
    // default: a write system call for every page a write touches. Keep it in memory.
    writer.pragma_update(None, "temp_store", "MEMORY").map_err(fail)?;
    // WAL lets readers go on while the writer commits; set once, outside any transaction.
    let mode = if opts.path == ":memory:" { "MEMORY" } else { "WAL" };
    let got: String =
        retry_busy(|| writer.pragma_update_and_check(None, "journal_mode", mode, |r| r.get(0)), MIGRATION_WAIT)
            .map_err(fail)?;
    if !got.eq_ignore_ascii_case(mode) {
        return Err(format!("cannot open database {}: journal_mode {mode} refused ({got})", opts.path));
    }
    // A reader that holds a snapshot for long (an export, say) keeps checkpoints from reaching
    // the WAL's end, and the WAL grows meanwhile; SQLite reuses the file from its start later
    // but never shrinks it unless told to. Cut it back when it starts over.
    writer.pragma_update(None, "journal_size_limit", WAL_LIMIT).map_err(fail)?;
    // A file of ours (not the process's in-memory database) is backed up before it is migrated.
    let file = (opts.path != ":memory:" && !target.starts_with("file:")).then_some(target);
    migrate(&mut writer, file, &opts.before_migration)
        .map_err(|e| format!("cannot open database {}: {e}", opts.path))?;
    if mode == "WAL" {
        // One commit in the WAL from the start (the schema version written again, unchanged):
        // a snapshot's mark is taken from the WAL's header, which SQLite gives only once the
        // WAL holds a commit (see `Tx::mark`); until the first write, revalidations would
        // read their rows.
        // Read and written under the write lock: a newer coursed migrating meanwhile is not undone.
        writer.execute_batch("BEGIN IMMEDIATE").map_err(fail)?;
        let rewritten = writer
            .query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
            .and_then(|version| writer.pragma_update(None, "user_version", version));
        let ended = writer.execute_batch(if rewritten.is_ok() { "COMMIT" } else { "ROLLBACK" });
        rewritten.and(ended).map_err(fail)?;
    }
    writer.busy_timeout(opts.busy_timeout).map_err(fail)?;
    Ok(writer)
}

/// Runs `f` again while it fails with `SQLITE_BUSY`, for up to `wait`. Changing the journal mode
/// takes the file's write lock while holding a read lock, and SQLite then answers BUSY at once
/// instead of waiting (two connections doing so at once would wait for each other forever), so
/// the busy timeout does not cover it: replicas starting together on a new file did fail.
pub(super) fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>, wait: Duration) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + wait;
    let mut pause = Duration::from_millis(1);
    loop {
        match f() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            outcome => return outcome,
        }
    }
}

/// Creates (or migrates) the database file `path` and closes it again.
pub fn create(path: &str) -> Result<(), String> {
    open_writer(path, &Options::new(path, Durability::Full)).map(drop)
}

/// Per-connection settings, each for a reason.
pub fn configure(c: &Connection, busy: Duration) -> rusqlite::Result<()> {
    // Enforce the schema's REFERENCES clauses (cascade, set null).
    c.pragma_update(None, "foreign_keys", true)?;
    // Wait for another process's lock rather than failing at once.
    c.busy_timeout(busy)?;
    // Read pages straight from a mapping of the whole file instead of copying them into the
    // heap (the build raises SQLite's cap on the mapping: see .cargo/config.toml).
    c.pragma_update(None, "mmap_size", 1i64 << 40)?;
    // A small page cache keeps private memory low; mmap serves the reads.
    c.pragma_update(None, "cache_size", -2048)?;
    c.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// The schema version this coursed brings every database to.
pub fn schema_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings the schema up to date; refuses files that are newer or not ours. The file `file`, when
/// given, holding data and about to be migrated, is first backed up as `before` says.
fn migrate(c: &mut Connection, file: Option<&str>, before: &BeforeMigration) -> Result<(), String> {
    let sql = |e: rusqlite::Error| e.to_string();
    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sql)?;
    let app: i64 = tx.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(sql)?;
    let known = schema_version();
    if app != 0 && app != APPLICATION_ID {
        return Err(format!("the file belongs to another application (application_id {app:#x})"));
    }
    if version > known {
        return Err(format!(
            "its schema version is {version}, newer than this coursed knows ({known}); use a newer coursed"
        ));
    }
    if version == 0 {
        let tables: i64 = tx.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).map_err(sql)?;
        if tables > 0 {
            return Err("it holds tables but is not a coursed database".into());
        }
    }
    if version > 0 && version < known {
        let shared = crate::store::tx::Shared::default();
        let holds = upgrade::holds_data(&mut super::tx::SqliteTx { conn: &tx, shared: &shared }, version);
        match (file, before, holds.map_err(|e| e.to_string())?) {
            (Some(file), BeforeMigration::Backup { dir }, true) => {
                super::backup::before_migration(file, version, known, dir.as_deref())?
            }
            (Some(_), BeforeMigration::Migrate, true) => log::warn!(
                "migrating the database from schema version {version} to {known} without a backup \
                 (--backup-before-migrate off): coursed cannot undo it"
            ),
            _ => {}
        }
        // A migration may rebuild a search index: on a large catalogue, a minute or more.
        log::info!("migrating the database schema from version {version} to {known}");
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        let began = std::time::Instant::now();
        let failed = |e: String| format!("migration {} failed: {e}", i + 1);
        // A migration may have the words of existing rows computed in the middle (search).
        let (before, after) = step.split_once(WORDS_MARKER).unwrap_or((step, ""));
        run_sql(&tx, before).map_err(|e| failed(e.to_string()))?;
        if !after.is_empty() {
            let shared = crate::store::tx::Shared::default();
            let rows = crate::store::search::backfill_all(&mut super::tx::SqliteTx { conn: &tx, shared: &shared })
                .map_err(|e| failed(e.to_string()))?;
            if rows > 0 {
                log::info!("search words computed for {rows} existing resources");
            }
            run_sql(&tx, after).map_err(|e| failed(e.to_string()))?;
        }
        if version > 0 {
            log::info!("migration {} of {known} done in {:.1} s", i + 1, began.elapsed().as_secs_f64());
        }
    }
    if version == known {
        return tx.commit().map_err(sql);
    }
    tx.pragma_update(None, "user_version", known).map_err(sql)?;
    tx.pragma_update(None, "application_id", APPLICATION_ID).map_err(sql)?;
    // The commit writes and syncs every page the migration changed: on a large file, a while.
    let committing = std::time::Instant::now();
    tx.commit().map_err(sql)?;
    log::info!(
        "database schema migrated from version {version} to {known} (committed in {:.1} s)",
        committing.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs the statements of a migration, skipping those marked for a table the database lacks
/// (see [`WHERE_EXISTS`]).
fn run_sql(c: &Connection, sql: &str) -> rusqlite::Result<()> {
    let mut parts = sql.split(WHERE_EXISTS);
    c.execute_batch(parts.next().unwrap_or_default())?;
    for part in parts {
        let (table, statements) = part.split_once('\n').unwrap_or((part, ""));
        let table = table.trim();
        let exists: bool =
            c.query_row("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = ?1)", [table], |r| r.get(0))?;
        if exists {
            c.execute_batch(statements)?;
        } else {
            log::warn!("the database has no table {table}: a migration leaves it out");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version-3 file with a module and a subject (indexed by the schema's triggers); with
    /// `without_subjects_index`, the subjects' index of all texts dropped with its triggers.
    fn version_3(path: &str, without_subjects_index: bool) {
        let c = Connection::open(path).unwrap();
        for step in &MIGRATIONS[..3] {
            c.execute_batch(step).unwrap();
        }
        c.execute_batch(&format!(
            "PRAGMA user_version = 3; PRAGMA application_id = {APPLICATION_ID};
             INSERT INTO modules (id, title, title_words, created_at, updated_at) VALUES ('m', 'Waves', 'waves', 'x', 'x');
             INSERT INTO subjects (id, title, title_words, content, content_words, created_at, updated_at)
                 VALUES ('s', 'Light', 'light', 'Photon photon', 'photon photon', 'x', 'x');"
        ))
        .unwrap();
        if without_subjects_index {
            c.execute_batch(
                "DROP TRIGGER subjects_search_insert; DROP TRIGGER subjects_search_delete;
                 DROP TRIGGER subjects_search_update; DROP TABLE subjects_search_vocab; DROP TABLE subjects_search;",
            )
            .unwrap();
        }
    }

    #[test]
    fn a_wal_grown_behind_a_long_reader_is_cut_back_when_it_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let path = path.to_str().unwrap();
        let writer = open_writer(path, &Options::new(path, Durability::Normal)).unwrap();
        writer.execute_batch("CREATE TABLE blobs (b BLOB)").unwrap();
        let reader = Connection::open(path).unwrap();
        // The reader's snapshot keeps every later frame in the WAL.
        reader.execute_batch("BEGIN; SELECT count(*) FROM blobs;").unwrap();
        let blob = vec![7u8; 1 << 20];
        for _ in 0..(WAL_LIMIT >> 20) + 8 {
            writer.execute("INSERT INTO blobs (b) VALUES (?1)", [&blob]).unwrap();
        }
        let wal = format!("{path}-wal");
        let grown = std::fs::metadata(&wal).unwrap().len();
        assert!(grown > WAL_LIMIT as u64, "the WAL grew to {grown} bytes only");
        reader.execute_batch("COMMIT").unwrap();
        // Everything copied; the next write starts the WAL over, and cuts it back.
        writer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())).unwrap();
        writer.execute_batch("DELETE FROM blobs").unwrap();
        let cut = std::fs::metadata(&wal).unwrap().len();
        assert!(cut <= WAL_LIMIT as u64, "the WAL stays at {cut} bytes");
    }

    fn sql_of(c: &Connection, table: &str) -> Option<String> {
        c.query_row("SELECT sql FROM sqlite_master WHERE name = ?1", [table], |r| r.get(0)).ok()
    }

    #[test]
    fn migration_4_rebuilds_the_indexes_of_rows_and_leaves_out_a_dropped_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db").to_str().unwrap().to_owned();
        version_3(&path, false);
        create(&path).unwrap();
        let c = Connection::open(&path).unwrap();
        assert_eq!(c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), MIGRATIONS.len() as i64);
        for t in ["modules", "subjects", "chapters"] {
            assert!(sql_of(&c, &format!("{t}_search")).unwrap().contains("detail='none'"), "{t}");
            c.execute_batch(&format!("INSERT INTO {t}_search ({t}_search, rank) VALUES ('integrity-check', 1)"))
                .unwrap();
        }
        let found = |q: &str| -> i64 {
            c.query_row("SELECT doc FROM subjects_search_vocab WHERE term = ?1", [q], |r| r.get(0)).unwrap_or(0)
        };
        assert_eq!((found("photon"), found("light")), (1, 1), "the rows are indexed again");

        let path = dir.path().join("dropped.db").to_str().unwrap().to_owned();
        version_3(&path, true);
        create(&path).unwrap();
        let c = Connection::open(&path).unwrap();
        assert_eq!(c.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), MIGRATIONS.len() as i64);
        assert_eq!(sql_of(&c, "subjects_search"), None, "a dropped index is not made again without its triggers");
        assert!(sql_of(&c, "modules_search").unwrap().contains("detail='none'"));
    }
}
