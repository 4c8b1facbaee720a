//! Power cuts: a file system that forgets what was not synced (`fs`, over `disk`), its own
//! tests (`fs_tests`), and coursed run on it and cut at many points (`cuts`).

mod atomic;
mod cuts;
mod disk;
mod failures;
mod feed;
mod fs;
mod fs_tests;
mod import;
mod migration;

pub use fs::{Names, Op, PowerCut};

use cuts::Style;

#[test]
fn sqlite_single_writes_from_many_clients_survive_power_cuts() {
    let Some(disk) = PowerCut::mount() else { return };
    let (seed, n) = cuts::plan(10);
    cuts::single_writes(&sqlite(&disk, &[]), Style::Mixed, seed, n);
}

#[test]
fn sqlite_checkpoints_survive_power_cuts_at_each_of_their_steps() {
    let Some(disk) = PowerCut::mount() else { return };
    let (seed, n) = cuts::plan(3);
    cuts::single_writes(&sqlite(&disk, &[]), Style::Checkpoints, seed, n);
}

#[test]
fn sqlite_atomic_operations_and_relationship_replaces_are_all_or_nothing_across_power_cuts() {
    let Some(disk) = PowerCut::mount() else { return };
    let (seed, n) = cuts::plan(8);
    cuts::rounds(&sqlite(&disk, &[]), Style::Mixed, seed, n, &mut atomic::Courses::default());
}

#[test]
fn sqlite_scheduled_backups_are_whole_or_absent_after_power_cuts() {
    let Some(disk) = PowerCut::mount() else { return };
    let dir = disk.path().join("backups");
    let more = ["--backup-dir", dir.to_str().unwrap(), "--backup-every", "1s", "--backup-keep", "3"];
    let machine = cuts::Machine { backups: Some(dir.clone()), ..sqlite(&disk, &more) };
    let (seed, n) = cuts::plan(6);
    cuts::single_writes(&machine, Style::Backups, seed, n);
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().any(|n| n.starts_with("coursed-")), "backups were kept across the cuts: {names:?}");
}

#[test]
fn sqlite_merges_are_all_or_nothing_across_power_cuts() {
    let Some(disk) = PowerCut::mount() else { return };
    let machine = cuts::Machine { span: 3000, ..sqlite(&disk, &[]) };
    let (seed, n) = cuts::plan(6);
    import::merges(&machine, machine.sqlite.as_deref().unwrap(), seed, n);
}

#[test]
fn sqlite_a_migration_cut_by_the_power_is_undone_whole_and_finished_at_the_next_start() {
    let Some(disk) = PowerCut::mount() else { return };
    let machine = cuts::Machine { span: 3000, ..sqlite(&disk, &[]) };
    let (seed, n) = cuts::plan(6);
    migration::first_starts(&machine, seed, n);
}

#[test]
fn sqlite_no_reader_of_the_feed_is_told_of_a_revision_a_power_cut_takes_back() {
    let Some(disk) = PowerCut::mount() else { return };
    let school = tempfile::tempdir().unwrap();
    let school = school.path().join("school.db");
    let machine = sqlite(&disk, &[]);
    let mut followed = feed::Followed::new(machine.sqlite.as_deref().unwrap(), school.to_str().unwrap());
    disk.sync_all();
    // Syncs as slow as a disk's: the window in which a commit is readable and not yet on the
    // disk is then as wide as it is in use.
    disk.slow_syncs(std::time::Duration::from_millis(3));
    let (seed, n) = cuts::plan(6);
    cuts::rounds(&machine, Style::Mixed, seed, n, &mut followed);
}

#[test]
fn sqlite_a_revision_reaches_the_feed_only_once_it_is_on_the_disk() {
    let Some(disk) = PowerCut::mount() else { return };
    feed::served_only_once_on_the_disk(&sqlite(&disk, &[]));
}

#[test]
fn postgres_single_writes_from_many_clients_survive_power_cuts() {
    let (seed, n) = cuts::plan(5);
    on_postgres(|machine| cuts::single_writes(machine, Style::Mixed, seed, n));
}

#[test]
fn postgres_merges_are_all_or_nothing_across_power_cuts() {
    let (seed, n) = cuts::plan(4);
    on_postgres(|machine| import::merges(machine, &machine.args[1], seed, n));
}

#[test]
fn postgres_recovers_from_a_failed_sync_with_every_acknowledged_write() {
    on_postgres(failures::postgres_recovers_from_a_failed_sync);
}

#[test]
fn postgres_a_first_migration_cut_by_the_power_leaves_no_schema_or_a_whole_one() {
    let Some(on) = PostgresOnDisk::start() else { return };
    let (seed, n) = cuts::plan(3);
    migration::postgres_first_starts(&on.disk, &on.pg, seed, n);
}

#[test]
fn postgres_an_upgrade_cut_by_the_power_is_undone_whole_and_finished_at_the_next_start() {
    let Some(on) = PostgresOnDisk::start() else { return };
    let (seed, n) = cuts::plan(3);
    // The first start is the measure of the rest (the power stays on).
    migration::postgres_upgrades(&on.disk, &on.pg, seed, n + 1);
}

#[test]
fn postgres_atomic_operations_and_relationship_replaces_are_all_or_nothing_across_power_cuts() {
    let (seed, n) = cuts::plan(4);
    on_postgres(|machine| cuts::rounds(machine, Style::Mixed, seed, n, &mut atomic::Courses::default()));
}

/// A PostgreSQL cluster whose data directory is on a power-cut disk (one with names made durable
/// as a journaling file system does, which PostgreSQL relies on), started. The cluster is
/// declared first, so that it is dropped (stopped) before the disk is unmounted.
struct PostgresOnDisk {
    pg: crate::pg_cluster::Private,
    disk: PowerCut,
}

impl PostgresOnDisk {
    fn start() -> Option<PostgresOnDisk> {
        let disk = PowerCut::mount_with(Names::Journaled)?;
        let pg = crate::pg_cluster::Private::init_durable_in(disk.path())?;
        // initdb ran without syncing (it is set-up, not under test): its files are made durable.
        disk.sync_all();
        pg.restart();
        Some(PostgresOnDisk { pg, disk })
    }
}

/// Runs `cuts` with coursed on a PostgreSQL cluster on a power-cut disk.
fn on_postgres(cuts: impl FnOnce(&cuts::Machine)) {
    let Some(on) = PostgresOnDisk::start() else { return };
    let (disk, pg) = (&on.disk, &on.pg);
    let database = pg.fresh_database();
    cuts(&cuts::Machine {
        disk,
        args: args(&database, &[]),
        sqlite: None,
        postgres: Some(pg),
        backups: None,
        span: 400,
    });
}

fn args(database: &str, more: &[&str]) -> Vec<String> {
    let mut args = vec!["--database", database, "--token", cuts::TOKEN];
    args.extend(more);
    args.into_iter().map(str::to_owned).collect()
}

/// coursed on a SQLite file on `disk`.
fn sqlite<'a>(disk: &'a PowerCut, more: &[&str]) -> cuts::Machine<'a> {
    let database = disk.path().join("course.db").to_str().unwrap().to_owned();
    cuts::Machine {
        disk,
        args: args(&database, more),
        sqlite: Some(database),
        postgres: None,
        backups: None,
        span: 4000,
    }
}

/// The check can fail: with `--durability normal` an acknowledged write waits for the next
/// checkpoint to reach the disk (as documented), and the cuts find one lost.
#[test]
fn the_cuts_find_the_writes_that_durability_normal_acknowledges_before_their_sync() {
    let Some(disk) = PowerCut::mount() else { return };
    let machine = sqlite(&disk, &["--durability", "normal"]);
    let cuts = || cuts::single_writes(&machine, Style::Mixed, 7, 6);
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(cuts));
    let message = found.expect_err("a cut lost an acknowledged write");
    let message = message.downcast_ref::<String>().map(String::as_str).unwrap_or_default();
    assert!(message.contains("an acknowledged write lost?"), "{message}");
}
