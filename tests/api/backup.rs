//! `coursed backup` while a server writes, and scheduled backups that rotate: every backup is a
//! SQLite file that passes its integrity check, holds every write acknowledged before it began,
//! and opens with `coursed serve`.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::helpers::{on_both, Engine};
use crate::process::{new_subject, Server, Starting};

const TOKEN: &str = "backup-token";

/// The ids of the subjects in the SQLite file `path`, after checking its integrity.
fn checked_subject_ids(path: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok", "{}", path.display());
    let mut stmt = conn.prepare("SELECT id FROM subjects WHERE title <> ''").unwrap();
    let ids = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    ids
}

fn backup(database: &str, output: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_coursed"))
        .args(["backup", "--database", database, "--output", output.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap()
}

/// Polls `done` every 50 ms until it holds, for at most `limit`.
fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

on_both!(a_backup_taken_while_a_server_writes_holds_every_acknowledged_write_and_opens);
async fn a_backup_taken_while_a_server_writes_holds_every_acknowledged_write_and_opens() {
    let dir = tempfile::tempdir().unwrap();
    let database = Engine::current().fresh_database(dir.path());
    let server = Server::start(&["--database", &database, "--token", TOKEN]);
    let acknowledged = Mutex::new(Vec::<String>::new());
    let stop = AtomicBool::new(false);
    let output = dir.path().join("backup.db");
    let (before, out) = std::thread::scope(|scope| {
        for w in 0..2 {
            let (server, acknowledged, stop) = (&server, &acknowledged, &stop);
            scope.spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    let (status, body) =
                        server.call("POST", "/v1/subjects", TOKEN, Some(&new_subject(&format!("w{w} {i}"))));
                    assert_eq!(status, 201, "{body}");
                    acknowledged.lock().unwrap().push(body["data"]["id"].as_str().unwrap().to_owned());
                    i += 1;
                }
            });
        }
        wait_until(Duration::from_secs(30), "20 writes", || acknowledged.lock().unwrap().len() >= 20);
        let before = acknowledged.lock().unwrap().clone();
        let out = backup(&database, &output, &[]);
        // Writes go on after the backup, so that it ran among them.
        let after = acknowledged.lock().unwrap().len();
        wait_until(Duration::from_secs(30), "writes after the backup", || acknowledged.lock().unwrap().len() > after);
        stop.store(true, Ordering::SeqCst);
        (before, out)
    });
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("backed up"), "{out:?}");
    let held = checked_subject_ids(&output);
    assert!(before.iter().all(|id| held.contains(id)), "an acknowledged write is missing from the backup");
    assert!(held.len() < acknowledged.lock().unwrap().len(), "the backup should predate the last writes");
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!names.iter().any(|n| n.to_string_lossy().contains("partial")), "{names:?}");

    // The backup serves.
    let restored = Server::start(&["--database", output.to_str().unwrap(), "--token", TOKEN]);
    let (status, body) = restored.call("GET", &format!("/v1/subjects/{}", before[0]), TOKEN, None);
    assert_eq!(status, 200, "{body}");
    let (_, body) = restored.call("GET", "/v1/subjects", TOKEN, None);
    assert_eq!(body["meta"]["page"]["total"], held.len());
}

#[test]
fn a_backup_refuses_to_overwrite_a_file_unless_forced_and_never_writes_over_its_database() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("school.db");
    let database = database.to_str().unwrap();
    coursed::dataset::generate(database, shape(), None).unwrap();
    let output = dir.path().join("copy.db");
    std::fs::write(&output, "keep me").unwrap();
    let refused = backup(database, &output, &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--force"), "{refused:?}");
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "keep me");
    let forced = backup(database, &output, &["--force"]);
    assert!(forced.status.success(), "{forced:?}");
    assert_eq!(checked_subject_ids(&output).len(), 4);
    // Onto the database itself, with --force or without: refused, and never told to use --force.
    for flags in [&[][..], &["--force"]] {
        let onto_itself = backup(database, Path::new(database), flags);
        assert!(!onto_itself.status.success());
        let said = String::from_utf8_lossy(&onto_itself.stderr);
        assert!(said.contains("the database itself") && !said.contains("--force"), "{onto_itself:?}");
    }
    let missing = backup(dir.path().join("nothing.db").to_str().unwrap(), &dir.path().join("x.db"), &[]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("there is no database"), "{missing:?}");
    // Into a folder that does not exist: the folder is named, before any work, and nothing is made.
    let folder = dir.path().join("no-such-folder");
    let refused = backup(database, &folder.join("b.db"), &[]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(said.contains(&format!("the folder {} does not exist", folder.display())), "{said}");
    assert!(!said.contains(".partial"), "{said}");
    assert!(!folder.exists());
}

fn shape() -> coursed::dataset::Shape {
    coursed::dataset::Shape { modules: 2, subjects_per_module: 2, chapters_per_subject: 1, seed: 7 }
}

/// The flags of a server on `database` that backs up into `backups` every second.
fn every_second<'a>(database: &'a str, backups: &'a Path) -> [&'a str; 8] {
    let dir = backups.to_str().unwrap();
    ["--database", database, "--token", TOKEN, "--backup-dir", dir, "--backup-every", "1s"]
}

on_both!(scheduled_backups_are_written_every_period_and_only_the_newest_are_kept);
async fn scheduled_backups_are_written_every_period_and_only_the_newest_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let database = Engine::current().fresh_database(dir.path());
    let backups = dir.path().join("backups");
    std::fs::create_dir_all(&backups).unwrap();
    // Files that are not scheduled backups are never removed.
    for other in ["notes.txt", "coursed-before-upgrade.db"] {
        std::fs::write(backups.join(other), "x").unwrap();
    }
    let server = Server::start(&[&every_second(&database, &backups)[..], &["--backup-keep", "2"]].concat());
    let (status, body) = server.call("POST", "/v1/subjects", TOKEN, Some(&new_subject("Kept")));
    assert_eq!(status, 201);
    let id = body["data"]["id"].as_str().unwrap().to_owned();
    let written_after = coursed::time::now_ms();
    let backup_names = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&backups)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| coursed::backup::is_backup_name(n))
            .collect();
        names.sort();
        names
    };
    // Each backup's name is its scheduled time: one named after the write began after it.
    let mut seen = std::collections::BTreeSet::new();
    let newer = |name: &str| *coursed::backup::backup_name(written_after + 1000) <= *name;
    wait_until(Duration::from_secs(60), "three backups, the last after the write", || {
        seen.extend(backup_names());
        seen.len() >= 3 && seen.iter().next_back().is_some_and(|n| newer(n))
    });
    // A new backup is renamed into place before the oldest is removed: three files may be
    // seen for a moment, never for long.
    let mut kept = Vec::new();
    wait_until(Duration::from_secs(10), "at most two backups kept", || {
        kept = backup_names();
        kept.len() <= 2
    });
    let newest = backups.join(kept.last().unwrap());
    assert!(checked_subject_ids(&newest).contains(&id));
    for other in ["notes.txt", "coursed-before-upgrade.db"] {
        assert!(backups.join(other).exists(), "{other} was removed");
    }
}

#[test]
fn scheduled_backup_settings_are_checked_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let backups = dir.path().join("b");
    let backups = backups.to_str().unwrap();
    let db = dir.path().join("s.db");
    let db = db.to_str().unwrap();
    for (args, says) in [
        (vec!["--database", ":memory:", "--backup-dir", backups], ":memory:"),
        (vec!["--database", db, "--backup-dir", backups, "--backup-every", "500ms"], "at least 1s"),
        (vec!["--database", db, "--backup-dir", backups, "--backup-keep", "0"], "at least 1"),
        (vec!["--database", db, "--backup-dir", backups, "--backup-every", "6x"], "unit"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_coursed"))
            .args(["serve", "--port", "0", "--token", "t"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{args:?}: {out:?}");
    }
}

#[test]
fn a_scheduled_backup_that_fails_is_logged_and_tried_again_while_the_server_serves() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("s.db");
    let backups = dir.path().join("backups");
    // Folders where the next minute's backups would go: renaming a backup onto one fails.
    let now = coursed::time::now_ms();
    let blocked: Vec<_> = (0..60).map(|s| backups.join(coursed::backup::backup_name(now + s * 1000))).collect();
    for b in &blocked {
        std::fs::create_dir_all(b.join("inside")).unwrap();
    }
    let starting = Starting::spawn(&every_second(database.to_str().unwrap(), &backups));
    let line = starting.wait_for_stderr("failed");
    assert!(line.contains("is a folder") && line.contains("trying again"), "{line}");
    let server = starting.ready().unwrap();
    let (status, _) = server.call("GET", "/v1/subjects", TOKEN, None);
    assert_eq!(status, 200);
    for b in &blocked {
        std::fs::remove_dir_all(b).unwrap();
    }
    let written = || {
        std::fs::read_dir(&backups).unwrap().any(|e| {
            let e = e.unwrap();
            e.file_type().unwrap().is_file() && coursed::backup::is_backup_name(&e.file_name().to_string_lossy())
        })
    };
    wait_until(Duration::from_secs(30), "a backup after the failures", written);
}
