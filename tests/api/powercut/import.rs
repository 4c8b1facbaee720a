//! `coursed import --merge` cut by the power: a bundle is merged into the database in one
//! transaction, so after the cut it is all there (always, when the command said it was done)
//! or not at all.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::cuts::{feed_replays_to, sqlite_checks, stop, titles, Draw, Machine, Rng};

/// A bundle of its own for each round (another seed, other ids): its path and its subjects' ids.
fn bundle(dir: &Path, seed: u64) -> (PathBuf, BTreeSet<String>) {
    let (db, out) = (dir.join(format!("gen-{seed}.db")), dir.join(format!("bundle-{seed}.jsonl")));
    let (db, out_arg) = (db.to_str().unwrap(), out.to_str().unwrap());
    let seed_arg = seed.to_string();
    let shape = ["--modules", "3", "--subjects-per-module", "15", "--chapters-per-subject", "2"];
    run(&[&["generate", "--database", db, "--seed", &seed_arg][..], &shape].concat());
    run(&["export", "--database", db, "--output", out_arg]);
    // Every generated catalogue numbers its external ids from 1: left out, so that bundles of
    // other seeds merge side by side.
    let mut subjects = BTreeSet::new();
    let mut lines = Vec::new();
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(attributes) = v["attributes"].as_object_mut() {
            attributes.remove("external_id");
        }
        if v["type"] == "subjects" {
            subjects.insert(v["id"].as_str().unwrap().to_owned());
        }
        lines.push(v.to_string());
    }
    std::fs::write(&out, lines.join("\n") + "\n").unwrap();
    (out, subjects)
}

fn run(args: &[&str]) {
    let done = Command::new(env!("CARGO_BIN_EXE_coursed")).args(args).stdout(Stdio::null()).output().unwrap();
    assert!(done.status.success(), "{args:?}: {}", String::from_utf8_lossy(&done.stderr));
}

/// `cuts` merges, each cut at a random change (or, now and then, after it is done).
pub fn merges(machine: &Machine, database: &str, seed: u64, cuts: usize) {
    let disk = machine.disk;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(seed);
    // The bundles merged for sure, and the subjects they brought.
    let mut kept: BTreeSet<String> = BTreeSet::new();
    let mut span = machine.span;
    for round in 0..cuts {
        let (file, subjects) = bundle(dir.path(), seed.wrapping_mul(1000) + round as u64);
        let at = rng.range(1, span * 11 / 10);
        let armed_at = disk.counts().changes;
        disk.arm(at);
        let mut import = Command::new(env!("CARGO_BIN_EXE_coursed"))
            .args(["import", "--merge", "--database", database, file.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = import.try_wait().unwrap() {
                break Some(status);
            }
            if disk.wait_off(Duration::from_millis(10)) {
                break None;
            }
            assert!(Instant::now() < deadline, "the import neither ended nor was cut");
        };
        // The power goes with the import wherever it is.
        let _ = import.kill();
        let status = status.or_else(|| import.wait().ok());
        let done = status.is_some_and(|s| s.success());
        if disk.is_on() {
            span = (disk.counts().changes - armed_at).max(10);
        }
        let met = !disk.is_on();
        if !met && !done {
            let mut why = String::new();
            std::io::Read::read_to_string(&mut import.stderr.take().unwrap(), &mut why).unwrap();
            panic!("cut {round}: the import failed with the power on: {why}");
        }
        machine.cut(None);
        let server = machine.start();
        let titles = titles(&server);
        let present: BTreeSet<String> = titles.keys().cloned().collect();
        let arrived = subjects.intersection(&present).count();
        eprintln!(
            "cut {round}: at change {at}{}, import {}; {arrived} of {} subjects there",
            if met { "" } else { " (not met: after it)" },
            if done { "done" } else { "cut" },
            subjects.len()
        );
        assert!(
            arrived == 0 || arrived == subjects.len(),
            "cut {round}: a merge half there: {arrived} of {}",
            subjects.len()
        );
        assert!(!done || arrived == subjects.len(), "cut {round}: a merge said done and lost");
        assert!(kept.is_subset(&present), "cut {round}: a merge done before was lost");
        if arrived > 0 {
            kept.extend(subjects);
        }
        feed_replays_to(&server, &titles, round);
        stop(server);
        if machine.sqlite.is_some() {
            sqlite_checks(database);
        }
    }
}
