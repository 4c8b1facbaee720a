//! The writer thread: group commit, one savepoint per write, and (with full durability) the
//! flush of each committed group to disk overlapped with the next group's work.
//!
//! A group is committed with `synchronous=NORMAL`: its pages are written to the WAL without
//! waiting for the disk. A second thread then makes the WAL durable with `fdatasync` and only
//! then answers the group's requests, while the writer goes on with the next group. One flush
//! covers every group committed before it started, so flushes coalesce under load. A request is
//! never answered before its write is on disk, exactly as with `synchronous=FULL`; the writer
//! just no longer idles while the disk works. What other requests may see in the meantime is a
//! write committed but not yet flushed (for the length of one flush): only a power loss in that
//! window could take back something a reader saw, never something a writer was told is done.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};

use rusqlite::{Connection, TransactionBehavior};

use super::checkpoint::Checkpoints;
use super::indexing::GroupIndexing;
use super::tx::{db_error, SqliteTx};
use super::{Deliver, Failed, Job};
use crate::error::{Error, Result};
use crate::store::tx::Shared;
use crate::store::WriteContext;

/// The most writes committed together.
const MAX_GROUP: usize = 512;

/// A committed (or failed) group on its way to its requests.
struct Committed {
    delivers: Vec<Deliver>,
    outcome: Result<()>,
    /// The group's number in commit order, when readers are kept from it until it is synced.
    group: Option<u64>,
}

/// The writer thread: group commit, one savepoint per write. With `wal`, answers go through the
/// flushing thread (see the module's documentation); without, they go out at once (the
/// connection's own `synchronous` setting decides what a commit waits for). `target` is what
/// the connection was opened with (a path or URI), for the checkpointing connection.
pub fn write_loop(
    conn: Connection,
    target: &str,
    shared: &Shared,
    queue: mpsc::Receiver<Job>,
    wal: Option<WalFile>,
    failed: &Arc<Failed>,
) {
    std::thread::scope(|scope| {
        let flusher = wal.map(|wal| {
            let (to_flush, committed) = mpsc::channel::<Committed>();
            let thread = std::thread::Builder::new()
                .name("coursed-flush".into())
                .spawn_scoped(scope, move || flush_loop(wal, committed, shared, failed));
            (to_flush, thread)
        });
        let (to_flush, thread) = match flusher {
            Some((tx, Ok(thread))) => (Some(tx), Some(thread)),
            Some((_, Err(e))) => {
                // No thread to flush on: commit with a flush of its own instead (every commit
                // is then on the disk before anyone reads it).
                log::warn!("cannot start the flushing thread ({e}); commits flush inline");
                let _ = conn.pragma_update(None, "synchronous", "FULL");
                (None, None)
            }
            None => (None, None),
        };
        let publish = to_flush.is_some();
        group_loop(conn, target, shared, queue, failed, publish, |c| match &to_flush {
            Some(tx) => {
                if let Err(mpsc::SendError(c)) = tx.send(c) {
                    // Committed, and nothing will sync it: as after a failed sync.
                    failed.set("the thread that syncs the WAL stopped".to_owned());
                    deliver(c.delivers, Err(Error::storage_failed()));
                }
            }
            None => deliver(c.delivers, c.outcome),
        });
        // The connection is closed (its last commit checkpointed) once every answer is out.
        drop(to_flush);
        if let Some(t) = thread {
            let _ = t.join();
        }
    });
    log::debug!("writer stopped");
}

fn group_loop(
    mut conn: Connection,
    target: &str,
    shared: &Shared,
    queue: mpsc::Receiver<Job>,
    failed: &Arc<Failed>,
    publish: bool,
    finish: impl Fn(Committed),
) {
    let indexing =
        GroupIndexing::install(&conn).map_err(|e| log::warn!("search indexing stays one write at a time ({e})")).ok();
    let mut checkpoints = Checkpoints::start(&conn, target, failed);
    // What the connection's `history_context` holds (see `history_context`).
    let mut held: Option<WriteContext> = None;
    // Groups committed, for readers of the feed to be kept from those not yet synced.
    let mut groups = 0u64;
    while let Ok(first) = queue.recv() {
        let mut group = VecDeque::from([first]);
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push_back(job),
                Err(_) => break,
            }
        }
        if failed.get().is_some() {
            // Queued before the writes stopped: none is run.
            let refused = group.into_iter().map(|job| (job.run)(None).1).collect();
            deliver(refused, Err(Error::storage_failed()));
            continue;
        }
        let mut delivers = Vec::with_capacity(group.len());
        let (size, started) = (group.len(), std::time::Instant::now());
        let number = publish.then(|| {
            groups += 1;
            groups
        });
        let commit = Commit { number, failed };
        let outcome = run_group(&mut conn, shared, indexing.as_ref(), &mut held, &mut group, &mut delivers, commit)
            .map_err(|e| Error::from(db_error(e)))
            .and_then(|committed| if committed { Ok(()) } else { Err(Error::storage_failed()) });
        if outcome.is_err() {
            // Rolled back with the group.
            held = None;
        }
        log::trace!("committed a group of {size} writes in {} µs", started.elapsed().as_micros());
        crate::metrics::M.sqlite_group.0.observe(size as f64);
        crate::metrics::M.sqlite_commit.time(started.elapsed());
        // Writes left unrun because the group failed get the group's error.
        delivers.extend(group.into_iter().map(|job| (job.run)(None).1));
        finish(Committed { delivers, outcome, group: number });
        // After the group is on its way: a checkpoint on the writer overlaps the group's flush.
        if let Some(c) = checkpoints.as_mut().filter(|_| failed.get().is_none()) {
            c.committed(&conn, failed);
        }
    }
    if let Some(c) = checkpoints {
        c.stop(&conn);
    }
    if failed.get().is_some() {
        // Closing the last connection checkpoints the WAL into the database file and removes
        // it: not what a failed sync left, which the next start reads again from the WAL.
        if let Err(e) = conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true) {
            log::error!("cannot keep the WAL at close ({e}): the process ends without closing the database");
            std::mem::forget(conn);
            return;
        }
    }
    drop(conn);
}

fn deliver(delivers: Vec<Deliver>, outcome: Result<()>) {
    for d in delivers {
        d(outcome.clone());
    }
}

/// Flushes the WAL behind the writer and answers the groups it made durable, after telling
/// the feed's readers how far it is on the disk.
fn flush_loop(mut wal: WalFile, committed: mpsc::Receiver<Committed>, shared: &Shared, failed: &Failed) {
    while let Ok(first) = committed.recv() {
        let mut batch = vec![first];
        batch.extend(committed.try_iter());
        if failed.get().is_none() && batch.iter().any(|c| c.outcome.is_ok()) {
            let started = std::time::Instant::now();
            if let Err(e) = wal.flush() {
                // After a failed fsync the kernel may have dropped the pages it could not write
                // and report success next time: nothing committed since the last good flush can
                // be trusted to be on disk, and its requests cannot be told either way. (A WAL
                // that cannot even be opened to sync it leaves them as unknown.)
                failed.set(e);
            }
            log::trace!("flushed {} groups in {} µs", batch.len(), started.elapsed().as_micros());
            crate::metrics::M.sqlite_sync.time(started.elapsed());
        }
        // On the disk (or rolled back, with nothing to sync): readers of the feed may be served
        // them, before their writers are answered. Never after a failed sync.
        if failed.get().is_none() {
            if let Some(group) = batch.iter().filter_map(|c| c.group).max() {
                shared.unflushed.synced(group);
            }
        }
        for c in batch {
            // Committed, but not known to be on the disk: neither done nor undone.
            let outcome = if failed.get().is_some() { Err(Error::storage_failed()) } else { c.outcome };
            deliver(c.delivers, outcome);
        }
    }
}

/// The database's write-ahead log, as a file to `fdatasync`.
pub struct WalFile {
    path: PathBuf,
    file: Option<File>,
}

impl WalFile {
    /// The WAL of the database file `database` (as SQLite names it: `<database>-wal`).
    pub fn of(database: &str) -> WalFile {
        WalFile { path: PathBuf::from(format!("{database}-wal")), file: None }
    }

    /// Makes everything written to the WAL so far durable. The file is opened at the first
    /// flush (SQLite creates it with the first commit) and reopened if the path ever names
    /// another file: SQLite removes the WAL only when its last connection closes, which the
    /// writer's open connection prevents, but a flush of a file no longer in use would be a
    /// silent loss, so it is checked (one `stat`).
    pub fn flush(&mut self) -> std::result::Result<(), String> {
        let cannot_open = |e: std::io::Error| format!("cannot open {} to sync it ({e})", self.path.display());
        let current = std::fs::metadata(&self.path).map_err(cannot_open)?;
        let held = match &self.file {
            Some(f) => {
                f.metadata().map(|m| (m.dev(), m.ino()) == (current.dev(), current.ino())).map_err(cannot_open)?
            }
            None => false,
        };
        if !held {
            self.file = Some(File::open(&self.path).map_err(cannot_open)?);
        }
        let synced = self.file.as_ref().map_or(Ok(()), File::sync_data);
        synced.map_err(|e| format!("the disk failed to sync {} ({e})", self.path.display()))
    }

    /// Whether the WAL file exists (SQLite makes it with the first write).
    pub fn exists(&self) -> bool {
        self.path.exists()
    }
}

/// How a group commits: its number in commit order, when the feed's readers are kept from it
/// until it is synced; and the state that, once set, rolls it back instead.
struct Commit<'a> {
    number: Option<u64>,
    failed: &'a Failed,
}

/// Runs the queued writes in one transaction, then brings the search indexes up to date with
/// them; an `Err` or `Ok(false)` (the writes stopped meanwhile) means nothing of the group was
/// kept.
fn run_group(
    conn: &mut Connection,
    shared: &Shared,
    indexing: Option<&GroupIndexing>,
    held: &mut Option<WriteContext>,
    group: &mut VecDeque<Job>,
    delivers: &mut Vec<Deliver>,
    commit: Commit,
) -> rusqlite::Result<bool> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if let Some(number) = commit.number {
        // Before anything of the group can be read: the feed's head it starts after (one step
        // down an index), which readers are served up to until the group is synced.
        let before = tx.prepare_cached("SELECT coalesce(max(seq), 0) FROM revisions")?.query_row([], |r| r.get(0))?;
        shared.unflushed.committing(number, before);
    }
    let started = std::time::Instant::now();
    // Prepared once per connection, unlike rusqlite's `Savepoint`, which parses each time.
    let run = |sql: &str| tx.prepare_cached(sql).and_then(|mut st| st.execute([])).map(drop);
    while let Some(next) = group.front() {
        // Outside the write's savepoint, so that a write rolled back leaves it as it is known.
        if held.as_ref() != Some(&next.ctx) {
            history_context(&tx, &next.ctx)?;
            *held = Some(next.ctx.clone());
        }
        run("SAVEPOINT write")?;
        let Some(job) = group.pop_front() else { break };
        let (ok, deliver) = (job.run)(Some(&mut SqliteTx { conn: &tx, shared }));
        delivers.push(deliver);
        if !ok {
            run("ROLLBACK TO write")?;
        }
        run("RELEASE write")?;
    }
    match indexing {
        Some(indexing) => indexing.flush(&tx)?,
        // The schema's triggers ran, reading the file's own `history_context`: set back, so
        // that other connections' writes are not recorded as this group's last caller.
        None => {
            run("UPDATE main.history_context SET actor = 'sqlite', action = NULL WHERE id = 1")?;
            *held = None;
        }
    }
    log::trace!("ran {} writes in {} µs", delivers.len(), started.elapsed().as_micros());
    if commit.failed.get().is_some() {
        // A sync failed while the group ran: it is rolled back, as every write from now on.
        return Ok(false);
    }
    tx.commit().map(|()| true)
}

/// Tells the history triggers who writes next: the writer's TEMP `history_context` (see
/// `indexing.rs`), or the file's own one where the writer runs the schema's triggers.
fn history_context(conn: &Connection, ctx: &WriteContext) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE history_context SET actor = ?1, action = ?2 WHERE id = 1")?
        .execute(rusqlite::params![&*ctx.by, ctx.action()])
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wal_is_reopened_when_its_path_names_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let wal_path = dir.path().join("x.db-wal");
        let mut wal = WalFile::of(db.to_str().unwrap());
        assert!(wal.flush().is_err(), "no WAL yet: a flush must fail, not pass silently");
        std::fs::write(&wal_path, b"one").unwrap();
        wal.flush().unwrap();
        let first = wal.file.as_ref().unwrap().metadata().unwrap().ino();
        wal.flush().unwrap();
        assert_eq!(wal.file.as_ref().unwrap().metadata().unwrap().ino(), first, "the same file is kept");
        // Replaced by a new file (a new inode) under the same name.
        let other = dir.path().join("other");
        std::fs::write(&other, b"two").unwrap();
        std::fs::rename(&other, &wal_path).unwrap();
        wal.flush().unwrap();
        let now = wal.file.as_ref().unwrap().metadata().unwrap().ino();
        assert_ne!(now, first);
        assert_eq!(now, std::fs::metadata(&wal_path).unwrap().ino());
    }
}
