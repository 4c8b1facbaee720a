//! A new coursed on an old database: a SQLite file holding data is backed up (beside it, or into
//! --backup-dir) before a migration, which cannot be undone, and left as it was when that
//! fails; a PostgreSQL database holding data is migrated only once told a backup exists.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::copy::schema_version_1;
use crate::helpers::{assert_valid_jsonapi, Engine};
use crate::process::{Server, Starting};

const TOKEN: &str = "4b8e2f9a1c7d3e6f0a5b9c2d8e1f4a7b";

/// Rows of the first schema: a module and a subject in it.
const ROWS: &str = "INSERT INTO modules (id, title, created_at, updated_at) VALUES
        ('01900000-0000-7000-8000-000000000001', 'Old module', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
    INSERT INTO subjects (id, title, module_id, created_at, updated_at) VALUES
        ('01900000-0000-7000-8000-000000000002', 'Old subject', '01900000-0000-7000-8000-000000000001',
         '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');";

fn version(path: &Path) -> i64 {
    let c = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
}

/// The backups taken before a migration from schema 1 in `dir`.
fn backups_in(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("course.db.schema-1-"))
        .collect();
    found.sort();
    found
}

/// A backup that is the old database: its version, its integrity, its subject.
fn assert_is_the_old_database(backup: &Path) {
    assert_eq!(version(backup), 1, "{}", backup.display());
    let c = rusqlite::Connection::open(backup).unwrap();
    assert_eq!(c.query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0)).unwrap(), "ok");
    assert_eq!(c.query_row("SELECT title FROM subjects", [], |r| r.get::<_, String>(0)).unwrap(), "Old subject");
}

fn subjects_served(server: &Server) -> serde_json::Value {
    let (status, body) = server.call("GET", "/v1/subjects", TOKEN, None);
    assert_eq!(status, 200, "{body}");
    assert_valid_jsonapi(&body);
    body["meta"]["page"]["total"].clone()
}

/// `coursed serve ARGS` that is expected to stop at start: what it said.
fn refused_start(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["serve", "--port", "0", "--token", TOKEN])
        .args(args)
        .env_remove("COURSED_BACKUP_BEFORE_MIGRATE")
        .env_remove("COURSED_BACKUP_DIR")
        .output()
        .unwrap();
    assert!(!out.status.success(), "it started: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_sqlite_database_is_backed_up_beside_itself_before_a_migration_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("course.db");
    schema_version_1(&db, ROWS);
    let database = db.to_str().unwrap();
    let starting = Starting::spawn(&["--database", database, "--token", TOKEN]);
    let said = starting.wait_for_stderr("backed up the database");
    let server = starting.ready().unwrap();
    let backups = backups_in(dir.path());
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert!(said.contains("schema version 1") && said.contains(backups[0].to_str().unwrap()), "{said}");
    assert_is_the_old_database(&backups[0]);
    assert!(version(&db) > 1, "migrated");
    assert_eq!(subjects_served(&server), 1);
    drop(server);
    // Nothing left to migrate: no more backups.
    drop(Server::start(&["--database", database, "--token", TOKEN]));
    assert_eq!(backups_in(dir.path()), backups);

    // A database without data is migrated without one.
    let empty = tempfile::tempdir().unwrap();
    let db = empty.path().join("course.db");
    schema_version_1(&db, "");
    drop(Server::start(&["--database", db.to_str().unwrap(), "--token", TOKEN]));
    assert!(version(&db) > 1);
    assert_eq!(backups_in(empty.path()), Vec::<PathBuf>::new());
}

#[test]
fn the_backup_goes_to_the_backup_folder_and_a_failed_one_leaves_the_database_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("course.db");
    schema_version_1(&db, ROWS);
    let database = db.to_str().unwrap();
    // A folder that cannot be made (a file holds its name): nothing is migrated.
    let blocked = dir.path().join("blocked");
    std::fs::write(&blocked, "a file").unwrap();
    let said = refused_start(&["--database", database, "--backup-dir", blocked.to_str().unwrap()]);
    assert!(said.contains("nothing was migrated") && said.contains("--backup-before-migrate off"), "{said}");
    assert!(said.contains(&blocked.display().to_string()), "{said}");
    assert_eq!(version(&db), 1, "left as it was");

    let folder = dir.path().join("backups");
    let server = Server::start(&["--database", database, "--backup-dir", folder.to_str().unwrap(), "--token", TOKEN]);
    let backups = backups_in(&folder);
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_is_the_old_database(&backups[0]);
    assert_eq!(backups_in(dir.path()), Vec::<PathBuf>::new(), "none beside the database");
    assert_eq!(subjects_served(&server), 1);
}

#[test]
fn with_backups_off_or_from_a_command_the_migration_says_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("course.db");
    schema_version_1(&db, ROWS);
    let database = db.to_str().unwrap();
    let starting = Starting::spawn(&["--database", database, "--token", TOKEN, "--backup-before-migrate", "off"]);
    let said = starting.wait_for_stderr("without a backup");
    assert!(said.contains("cannot undo"), "{said}");
    let server = starting.ready().unwrap();
    assert_eq!(backups_in(dir.path()), Vec::<PathBuf>::new());
    assert_eq!(subjects_served(&server), 1);

    // A command that opens an old database backs it up first too.
    let other = tempfile::tempdir().unwrap();
    let db = other.path().join("course.db");
    schema_version_1(&db, ROWS);
    let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["token", "list", "--database", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(backups_in(other.path()).len(), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("backed up the database"), "{out:?}");
}

#[test]
fn a_postgres_database_holding_data_is_migrated_only_once_told_a_backup_exists() {
    if crate::pg_cluster::server().is_none() {
        return;
    }
    let old = |rows: &str| {
        let dir = tempfile::tempdir().unwrap();
        let database = Engine::Postgres.fresh_database(dir.path());
        let schema = include_str!("../../schema.postgres.sql");
        Engine::Postgres
            .execute(&database, &format!("{schema}\nINSERT INTO coursed_schema (version) VALUES (1);\n{rows}"));
        database
    };
    let version = |url: &str| crate::pg_cluster::sql(url, "SELECT max(version) FROM coursed_schema").unwrap();
    let database = old(ROWS);
    let said = refused_start(&["--database", &database]);
    assert!(said.contains("schema version is 1") && said.contains("pg_dump"), "{said}");
    assert!(said.contains("--backup-before-migrate off"), "{said}");
    assert_eq!(version(&database).as_deref(), Some("1"), "left as it was");

    let starting = Starting::spawn(&["--database", &database, "--token", TOKEN, "--backup-before-migrate", "off"]);
    let warned = starting.wait_for_stderr("--backup-before-migrate off");
    assert!(warned.contains("cannot undo"), "{warned}");
    let server = starting.ready().unwrap();
    assert_eq!(subjects_served(&server), 1);
    assert_ne!(version(&database).as_deref(), Some("1"));

    // An old database without data needs no backup.
    let empty = old("");
    drop(Server::start(&["--database", &empty, "--token", TOKEN]));
    assert_ne!(version(&empty).as_deref(), Some("1"));
}
