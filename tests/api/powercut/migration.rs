//! A new version's first start cut by the power while it backs up and migrates an old database:
//! the file is then the old version or the new one, never between, the next start finishes the
//! job, and a whole backup of the old version is beside it.
//!
//! The old database is made from a new one: migrations 6 to 8 (the history, webhooks and
//! following) only create tables, views, indexes and triggers, so dropping what they create
//! and setting `user_version` back to 5 gives the file as version 5 left it. Migration 6 then
//! records a `create` revision for every resource, the heaviest of them.

use std::process::{Command, Stdio};

use super::cuts::{all, feed_replays_to, sqlite_checks, stop, titles, Draw, Machine, Rng};
use crate::process::Starting;

const OLD: i64 = 5;
const NEW: i64 = 8;
const LATER: [&str; 3] = [
    include_str!("../../../migrations/sqlite/0006-history.sql"),
    include_str!("../../../migrations/sqlite/0007-webhooks.sql"),
    include_str!("../../../migrations/sqlite/0008-follow.sql"),
];

/// The names of what a migration's SQL creates, as `(kind, name)`.
fn created(sql: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in sql.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let kind = match words.as_slice() {
            ["CREATE", "TABLE", ..] => "TABLE",
            ["CREATE", "VIEW", ..] => "VIEW",
            ["CREATE", "TRIGGER", ..] => "TRIGGER",
            ["CREATE", "INDEX", ..] | ["CREATE", "UNIQUE", "INDEX", ..] => "INDEX",
            _ => continue,
        };
        let at = words.iter().position(|w| *w == kind).unwrap() + 1;
        let name = words[at..].iter().find(|w| !["IF", "NOT", "EXISTS"].contains(w)).unwrap();
        found.push((kind.to_owned(), name.trim_end_matches('(').to_owned()));
    }
    found
}

/// The 400 subjects of the old database are there after the migration, and so is a revision of
/// each: the feed replays to them.
fn every_subject_there(server: &crate::process::Server, round: usize) {
    let titles = titles(server);
    assert_eq!(titles.len(), 400, "cut {round}: every subject is still there");
    feed_replays_to(server, &titles, round);
}

/// Turns a database of this version into the one version 5 left.
fn to_version_5(database: &str) {
    let db = rusqlite::Connection::open(database).unwrap();
    assert_eq!(db.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).unwrap(), NEW, "update OLD/NEW");
    for (kind, name) in LATER.iter().rev().flat_map(|sql| created(sql).into_iter().rev()) {
        if kind != "INDEX" {
            db.execute_batch(&format!("DROP {kind} IF EXISTS {name}")).unwrap();
        }
    }
    db.execute_batch(&format!("PRAGMA user_version = {OLD}; VACUUM")).unwrap();
    let left: i64 = db
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name IN ('revisions', 'coursed_webhooks', 'coursed_feed')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(left, 0);
}

fn version(database: &str) -> i64 {
    let db = rusqlite::Connection::open(database).unwrap();
    db.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
}

/// The backups of version 5 beside `database` (those the migration takes first), and what a cut
/// left of one being written.
fn backups_beside(database: &str) -> (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>) {
    let path = std::path::Path::new(database);
    let name = path.file_name().unwrap().to_str().unwrap();
    let entries = std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().path());
    entries
        .filter(|p| p.file_name().unwrap().to_str().unwrap().contains(&format!("{name}.schema-{OLD}-")))
        .partition(|p| !p.file_name().unwrap().to_str().unwrap().starts_with('.'))
}

/// `cuts` first starts on a copy of the same version-5 database, each cut at a random change.
pub fn first_starts(machine: &Machine, seed: u64, cuts: usize) {
    let disk = machine.disk;
    let database = machine.sqlite.as_deref().expect("a SQLite machine");
    let scratch = tempfile::tempdir().unwrap();
    let old = scratch.path().join("old.db");
    let old = old.to_str().unwrap();
    let generate = ["generate", "--database", old, "--modules", "10", "--subjects-per-module", "40"];
    let done = Command::new(env!("CARGO_BIN_EXE_coursed")).args(generate).stdout(Stdio::null()).output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    to_version_5(old);
    let mut rng = Rng(seed);
    let mut span = machine.span;
    let (mut old_left, mut new_found) = (0, 0);
    for round in 0..cuts {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{database}{suffix}"));
        }
        let (whole, partial) = backups_beside(database);
        whole.iter().chain(&partial).for_each(|p| std::fs::remove_file(p).unwrap());
        std::fs::copy(old, database).unwrap();
        disk.sync_all();
        let at = rng.range(1, span * 11 / 10);
        let armed_at = disk.counts().changes;
        disk.arm(at);
        let starting = Starting::spawn(&machine.args()).ready();
        if disk.is_on() {
            span = (disk.counts().changes - armed_at).max(10);
        }
        let met = !disk.is_on();
        match starting {
            Ok(server) => machine.cut(Some(server)),
            Err(e) => {
                assert!(met, "cut {round}: coursed failed to start with the power on: {e}");
                machine.cut(None);
            }
        }
        let found = version(database);
        eprintln!(
            "cut {round}: at change {at}{}: version {found}",
            if met { "" } else { " (not met: after the start)" }
        );
        assert!(
            found == OLD || found == NEW,
            "cut {round}: the database is at version {found}, between {OLD} and {NEW}"
        );
        if found == OLD {
            old_left += 1;
        } else {
            new_found += 1;
        }
        let server = machine.start();
        assert_eq!(version(database), NEW, "the next start finishes the migration");
        every_subject_there(&server, round);
        stop(server);
        sqlite_checks(database);
        // A backup of the old version was taken before the migration that committed: whole, of
        // version 5, with every subject (a cut while writing one may leave its hidden partial).
        let (whole, _) = backups_beside(database);
        assert!(!whole.is_empty(), "cut {round}: no backup taken before the migration");
        for backup in &whole {
            let b = backup.to_str().unwrap();
            assert_eq!(version(b), OLD, "cut {round}: {b}");
            sqlite_checks_of_version_5(b, round);
        }
    }
    eprintln!("{old_left} cuts left version {OLD}, {new_found} found version {NEW}");
}

/// A backup of version 5 passes its integrity check and holds the 400 subjects.
fn sqlite_checks_of_version_5(backup: &str, round: usize) {
    let db = rusqlite::Connection::open_with_flags(backup, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let ok: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok", "cut {round}: {backup}");
    let subjects: i64 = db.query_row("SELECT count(*) FROM subjects", [], |r| r.get(0)).unwrap();
    assert_eq!(subjects, 400, "cut {round}: {backup}");
}

/// PostgreSQL: coursed's first start on an empty database (every migration, one transaction
/// under an advisory lock) cut by the power: the schema is all there or not at all, and the
/// next start makes it.
pub fn postgres_first_starts(disk: &super::PowerCut, pg: &crate::pg_cluster::Private, seed: u64, cuts: usize) {
    let mut rng = Rng(seed);
    let mut span = 400;
    let version = |url: &str| -> i64 {
        let exists = crate::pg_cluster::sql(url, "SELECT to_regclass('coursed_schema') IS NOT NULL").unwrap();
        if exists.as_deref() != Some("t") {
            return 0;
        }
        let found = crate::pg_cluster::sql(url, "SELECT count(*) FROM coursed_schema").unwrap();
        found.and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    // The version this coursed makes: as a start with the power on leaves it.
    let reference = pg.fresh_database();
    let args = ["--database", &reference, "--token", super::cuts::TOKEN].map(str::to_owned).to_vec();
    let before = disk.counts().changes;
    let started = Machine { disk, args, sqlite: None, postgres: Some(pg), backups: None, span }.start();
    // The cuts fall within the changes a whole first start makes.
    span = disk.counts().changes - before;
    stop(started);
    let known = version(&reference);
    assert!(known > 0);
    let (mut none, mut whole) = (0, 0);
    for round in 0..cuts {
        let database = pg.fresh_database();
        let args = ["--database", &database, "--token", super::cuts::TOKEN].map(str::to_owned).to_vec();
        let machine = Machine { disk, args, sqlite: None, postgres: Some(pg), backups: None, span };
        // Around the end of the start, where the migration's transaction commits.
        let at = rng.range(span / 2, span * 3 / 2);
        let armed_at = disk.counts().changes;
        disk.arm(at);
        let starting = Starting::spawn(&machine.args()).ready();
        if disk.is_on() {
            span = (disk.counts().changes - armed_at).max(10);
        }
        match starting {
            Ok(server) => machine.cut(Some(server)),
            Err(e) => {
                assert!(!disk.is_on(), "cut {round}: coursed failed to start with the power on: {e}");
                machine.cut(None);
            }
        }
        let found = version(&database);
        eprintln!("cut {round}: at change {at} of {span}: schema version {found}");
        assert!(found == 0 || found == known, "cut {round}: the schema is at version {found}, between 0 and {known}");
        if found == 0 {
            none += 1;
        } else {
            whole += 1;
        }
        let server = machine.start();
        assert_eq!(version(&database), known, "the next start makes the schema");
        assert_eq!(all(&server, "subjects", "title").len(), 0);
        stop(server);
    }
    eprintln!("{none} cuts left no schema, {whole} a whole one");
}

/// A PostgreSQL database as version 6 left it, made from one of this version: migrations 7 to
/// 10 (the history, webhooks, following, and the history triggers heeding followers) create
/// tables, views, functions and triggers, and 7 replaced `chapters_deleted`, given back here as
/// migration 5 wrote it.
fn postgres_to_version_6(url: &str) {
    let five = include_str!("../../../migrations/postgres/0005-linkage-generations.sql");
    let start = five.find("CREATE OR REPLACE FUNCTION chapters_deleted()").expect("chapters_deleted in migration 5");
    let end = start + five[start..].find("END $$;").expect("its end") + "END $$;".len();
    let mut sql = String::new();
    for t in ["modules", "subjects", "chapters"] {
        sql += &format!(
            "DROP TRIGGER IF EXISTS {t}_revision ON {t}; DROP TRIGGER IF EXISTS {t}_revision_update ON {t};\n"
        );
    }
    sql += "DROP VIEW IF EXISTS revision_log; DROP VIEW IF EXISTS history_bounds;\n\
            DROP TABLE IF EXISTS revisions, revision_pending, revision_head, revision_feed, coursed_webhooks, \
            coursed_follow, coursed_feed CASCADE;\n\
            DROP FUNCTION IF EXISTS modules_revision, subjects_revision, chapters_revision, coursed_time CASCADE;\n";
    sql += &five[start..end];
    sql += "\nDELETE FROM coursed_schema WHERE version > 6;";
    crate::pg_cluster::sql(url, &sql).unwrap();
}

/// PostgreSQL: this version's first start on a version-6 database (migration 7 records a
/// revision for each of 400 resources) cut by the power: version 6 or the newest, never
/// between, and the next start finishes.
pub fn postgres_upgrades(disk: &super::PowerCut, pg: &crate::pg_cluster::Private, seed: u64, cuts: usize) {
    let old = pg.fresh_database();
    let generate = ["generate", "--database", &old, "--modules", "10", "--subjects-per-module", "40"];
    let done = Command::new(env!("CARGO_BIN_EXE_coursed")).args(generate).stdout(Stdio::null()).output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let version = |url: &str| -> i64 {
        let found = crate::pg_cluster::sql(url, "SELECT count(*) FROM coursed_schema").unwrap();
        found.and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    let newest = version(&old);
    postgres_to_version_6(&old);
    assert_eq!(version(&old), 6);
    let old_name = old.rsplit('/').next().unwrap().split('?').next().unwrap().to_owned();
    let mut rng = Rng(seed);
    let mut span = 0;
    let (mut six, mut new) = (0, 0);
    for round in 0..cuts {
        // A copy of the old database for each start (its template is not connected to).
        let name = format!("{old_name}_{round}");
        crate::pg_cluster::sql(&pg.url(), &format!("CREATE DATABASE {name} TEMPLATE {old_name} STRATEGY FILE_COPY"))
            .unwrap();
        let url = old.replace(&old_name, &name);
        // The test's own database, which it migrates without a backup.
        let args = ["--database", &url, "--token", super::cuts::TOKEN, "--backup-before-migrate", "off"]
            .map(str::to_owned)
            .to_vec();
        let machine = Machine { disk, args, sqlite: None, postgres: Some(pg), backups: None, span };
        let armed_at = disk.counts().changes;
        let at = if span == 0 { u64::MAX } else { rng.range(span / 4, span * 5 / 4) };
        if span > 0 {
            disk.arm(at);
        }
        let starting = Starting::spawn(&machine.args()).ready();
        if disk.is_on() {
            span = disk.counts().changes - armed_at;
        }
        match starting {
            Ok(server) => machine.cut(Some(server)),
            Err(e) => {
                assert!(!disk.is_on(), "cut {round}: coursed failed to start with the power on: {e}");
                machine.cut(None);
            }
        }
        let found = version(&url);
        match at {
            u64::MAX => eprintln!("start {round}: {span} changes, not cut: version {found}"),
            _ => eprintln!("cut {round}: at change {at} of {span}: version {found}"),
        }
        assert!(found == 6 || found == newest, "cut {round}: version {found}, between 6 and {newest}");
        if found == 6 {
            six += 1;
        } else {
            new += 1;
        }
        let server = machine.start();
        assert_eq!(version(&url), newest, "the next start finishes the migration");
        every_subject_there(&server, round);
        stop(server);
    }
    eprintln!("{six} cuts left version 6, {new} found version {newest}");
}
