//! The power-cut file system, used through the kernel as any program uses it.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use super::{Names, Op, PowerCut};

fn read(path: &Path) -> Option<String> {
    let mut s = String::new();
    File::open(path).ok()?.read_to_string(&mut s).expect("read");
    Some(s)
}

fn write(path: &Path, text: &str) -> File {
    let mut f = OpenOptions::new().create(true).write(true).truncate(true).open(path).expect("open");
    f.write_all(text.as_bytes()).expect("write");
    f
}

fn sync_dir(path: &Path) {
    File::open(path).expect("open dir").sync_all().expect("fsync dir");
}

#[test]
fn what_is_synced_survives_a_cut_and_what_is_not_is_gone() {
    let Some(disk) = PowerCut::mount() else { return };
    let root = disk.path();
    write(&root.join("kept"), "one").sync_all().unwrap();
    sync_dir(root);
    // Synced, but its directory entry is not.
    write(&root.join("nameless"), "data").sync_all().unwrap();
    // Appended without a sync.
    let mut kept = OpenOptions::new().append(true).open(root.join("kept")).unwrap();
    kept.write_all(b" two").unwrap();
    drop(kept);
    fs::create_dir(root.join("dir")).unwrap();
    assert_eq!(read(&root.join("kept")).as_deref(), Some("one two"));
    assert!(disk.unsynced() > 0);

    disk.cut();
    assert_eq!(read(&root.join("kept")).as_deref(), Some("one"));
    assert_eq!(read(&root.join("nameless")), None);
    assert!(!root.join("dir").exists());
    assert_eq!(disk.unsynced(), 0);

    // A file synced into a synced new directory survives.
    fs::create_dir(root.join("dir")).unwrap();
    sync_dir(root);
    write(&root.join("dir/inner"), "x").sync_all().unwrap();
    sync_dir(&root.join("dir"));
    disk.cut();
    assert_eq!(read(&root.join("dir/inner")).as_deref(), Some("x"));

    // sync_all (a test's set-up) makes everything durable at once.
    write(&root.join("dir/set-up"), "y");
    disk.sync_all();
    disk.cut();
    assert_eq!(read(&root.join("dir/set-up")).as_deref(), Some("y"));
}

#[test]
fn a_rename_is_durable_only_once_its_directory_is_synced() {
    let Some(disk) = PowerCut::mount() else { return };
    let root = disk.path();
    write(&root.join("file"), "old").sync_all().unwrap();
    sync_dir(root);
    write(&root.join("file.tmp"), "new").sync_all().unwrap();
    fs::rename(root.join("file.tmp"), root.join("file")).unwrap();
    assert_eq!(read(&root.join("file")).as_deref(), Some("new"));
    disk.cut();
    assert_eq!(read(&root.join("file")).as_deref(), Some("old"));
    assert!(!root.join("file.tmp").exists());

    write(&root.join("file.tmp"), "new").sync_all().unwrap();
    fs::rename(root.join("file.tmp"), root.join("file")).unwrap();
    sync_dir(root);
    disk.cut();
    assert_eq!(read(&root.join("file")).as_deref(), Some("new"));

    // An unlink not synced comes back after the cut, with the bytes that were synced.
    fs::remove_file(root.join("file")).unwrap();
    disk.cut();
    assert_eq!(read(&root.join("file")).as_deref(), Some("new"));
    // Across directories: the entry is where the synced directories say.
    fs::create_dir(root.join("a")).unwrap();
    sync_dir(root);
    fs::rename(root.join("file"), root.join("a/moved")).unwrap();
    sync_dir(&root.join("a"));
    disk.cut();
    assert_eq!(read(&root.join("a/moved")).as_deref(), Some("new"), "the new directory was synced");
    assert_eq!(read(&root.join("file")).as_deref(), Some("new"), "the old one was not");
}

#[test]
fn a_truncation_is_undone_by_a_cut_unless_synced() {
    let Some(disk) = PowerCut::mount() else { return };
    let root = disk.path();
    let long = "0123456789".repeat(1000);
    write(&root.join("f"), &long).sync_all().unwrap();
    sync_dir(root);
    let f = OpenOptions::new().write(true).open(root.join("f")).unwrap();
    f.set_len(10).unwrap();
    f.set_len(20).unwrap();
    assert_eq!(read(&root.join("f")).unwrap(), format!("0123456789{}", "\0".repeat(10)));
    drop(f);
    disk.cut();
    assert_eq!(read(&root.join("f")).unwrap(), long);
    let f = OpenOptions::new().write(true).open(root.join("f")).unwrap();
    f.set_len(10).unwrap();
    f.sync_data().unwrap();
    drop(f);
    disk.cut();
    assert_eq!(read(&root.join("f")).unwrap(), "0123456789");
}

#[test]
fn fdatasync_keeps_the_data_and_size_and_fsync_also_the_mode() {
    let Some(disk) = PowerCut::mount() else { return };
    let root = disk.path();
    let path = root.join("f");
    write(&path, "a").sync_all().unwrap();
    sync_dir(root);
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let before = mode(&path);
    let f = write(&path, "bb");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    f.sync_data().unwrap();
    disk.cut();
    assert_eq!(read(&path).as_deref(), Some("bb"));
    assert_eq!(mode(&path), before, "fdatasync does not keep the mode");
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    f.sync_all().unwrap();
    disk.cut();
    assert_eq!(mode(&path), 0o600, "fsync does");
}

#[test]
fn an_armed_cut_stops_every_change_from_its_moment_on() {
    let Some(disk) = PowerCut::mount() else { return };
    let root = disk.path();
    let mut f = write(&root.join("f"), "synced"); // create, truncate-on-open and write: changes
    f.sync_all().unwrap();
    sync_dir(root);
    disk.arm(2);
    f.write_all(b"+1").unwrap();
    let err = f.write_all(b"+2").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert!(disk.wait_off(Duration::ZERO));
    assert!(f.sync_all().is_err(), "a sync after the cut must not succeed");
    assert!(File::open(root.join("f")).is_err(), "nothing is served while the power is off");
    drop(f);
    disk.cut();
    assert!(disk.is_on());
    assert_eq!(read(&root.join("f")).as_deref(), Some("synced"));
}

#[test]
fn a_failed_fsync_loses_its_pages_for_good_as_on_linux() {
    let Some(disk) = PowerCut::mount() else { return };
    let root = disk.path();
    let path = root.join("data.db");
    write(&path, "old").sync_all().unwrap();
    sync_dir(root);
    disk.fail(Op::Sync, ".db", libc::EIO, 1);
    let f = write(&path, "new");
    assert_eq!(f.sync_all().unwrap_err().raw_os_error(), Some(libc::EIO));
    assert_eq!(read(&path).as_deref(), Some("new"), "still readable from memory");
    f.sync_all().expect("the second fsync reports success");
    drop(f);
    disk.cut();
    assert_eq!(read(&path).as_deref(), Some("old"), "but it never wrote the pages");

    disk.fail(Op::Write, ".db", libc::ENOSPC, 1);
    let mut f = OpenOptions::new().write(true).open(&path).unwrap();
    assert_eq!(f.write_all(b"full").unwrap_err().raw_os_error(), Some(libc::ENOSPC));
    f.write_all(b"room").unwrap();
    assert_eq!(disk.counts().faults, 2);
}

#[test]
fn sqlite_in_wal_mode_keeps_its_commits_across_a_cut() {
    let Some(disk) = PowerCut::mount() else { return };
    let path = disk.path().join("t.db");
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t(x); INSERT INTO t VALUES (1), (2);",
    )
    .unwrap();
    db.execute_batch("PRAGMA synchronous=OFF; INSERT INTO t VALUES (3);").unwrap();
    drop(db);
    disk.cut();
    let db = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = db.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 2, "the commit made with synchronous=OFF is gone, the others are kept");
    let ok: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn a_journaling_disk_keeps_the_names_of_a_synced_file_and_of_its_new_parents() {
    let Some(disk) = PowerCut::mount_with(Names::Journaled) else { return };
    let root = disk.path();
    fs::create_dir_all(root.join("a/b")).unwrap();
    write(&root.join("a/b/f"), "synced").sync_all().unwrap();
    write(&root.join("a/g"), "not synced");
    disk.cut();
    assert_eq!(read(&root.join("a/b/f")).as_deref(), Some("synced"));
    assert_eq!(read(&root.join("a/g")), None);
    // A rename is journaled with the renamed file's sync: one name, the new one.
    fs::rename(root.join("a/b/f"), root.join("a/moved")).unwrap();
    File::open(root.join("a/moved")).unwrap().sync_all().unwrap();
    disk.cut();
    assert_eq!(read(&root.join("a/moved")).as_deref(), Some("synced"));
    assert_eq!(read(&root.join("a/b/f")), None);
}
