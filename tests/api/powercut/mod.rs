//! Power cuts: a file system that forgets what was not synced (`fs`, over `disk`), its own
//! tests (`fs_tests`), and coursed run on it and cut at many points (`cuts`).

mod cuts;
mod disk;
mod fs;
mod fs_tests;

pub use fs::{Op, PowerCut};

#[test]
fn sqlite_single_writes_from_many_clients_survive_power_cuts() {
    let Some(disk) = PowerCut::mount() else { return };
    let database = disk.path().join("course.db").to_str().unwrap().to_owned();
    let (seed, n) = cuts::plan(12);
    cuts::single_writes(&disk, &["--database", &database, "--token", cuts::TOKEN], Some(&database), seed, n);
}

/// The check can fail: with `--durability normal` an acknowledged write waits for the next
/// checkpoint to reach the disk (as documented), and the cuts find one lost.
#[test]
fn the_cuts_find_the_writes_that_durability_normal_acknowledges_before_their_sync() {
    let Some(disk) = PowerCut::mount() else { return };
    let database = disk.path().join("course.db").to_str().unwrap().to_owned();
    let args = ["--database", &database, "--token", cuts::TOKEN, "--durability", "normal"];
    let cuts = || cuts::single_writes(&disk, &args, Some(&database), 7, 6);
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(cuts));
    let message = found.expect_err("a cut lost an acknowledged write");
    let message = message.downcast_ref::<String>().map(String::as_str).unwrap_or_default();
    assert!(message.contains("an acknowledged write lost?"), "{message}");
}
