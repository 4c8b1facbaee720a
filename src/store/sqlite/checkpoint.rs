//! Checkpoints behind the writer: the WAL's pages are copied into the database file by a thread
//! of their own, on a connection of their own, while the writer goes on committing.
//!
//! SQLite checkpoints on the committing connection by default (at 1,000 pages of WAL): the
//! writer then stops accepting writes while it reads those pages back, writes them into the
//! database file and syncs it, about a sixth of its time under a stream of creates. A `PASSIVE`
//! checkpoint needs no write lock, so another connection can do it alongside the writer.
//!
//! Such a checkpoint copies the WAL only up to the last commit it sees when it starts, and the
//! WAL is reused from its beginning only once all of it has been copied when a write begins;
//! under a steady stream of writes that never happens by itself. So once the WAL reaches
//! [`WRITER_PAGES`] the thread is asked again each time one of its checkpoints has copied
//! something, each pass copying what was committed during the last (a few groups' worth: the
//! thread copies far faster than the writer writes), and the writer checkpoints itself once at
//! most [`WRITER_REST`] pages are left: it copies those, and the WAL starts over at the next
//! write (unless a reader still uses its start). While the writer checkpoints, no write is
//! committed, so the less it has to do the shorter every writer's wait.
//!
//! SQLite syncs the database file only at a checkpoint that reaches the end of the WAL, which
//! under a stream of writes is the writer's: that sync would then write out every page the
//! thread copied since the WAL started over (tens of megabytes). So the thread starts the pages
//! it copied on their way to disk after each of its checkpoints (on Linux, through the file
//! descriptor SQLite itself holds: closing another one would drop SQLite's locks on the file),
//! and the writer's sync finds little left to write. (Before both, the writer copied about a
//! quarter of the WAL and synced all of it, and held the writes for 8 to 17 ms once a WAL, every
//! tenth of a second under a stream of creates; now about 2 ms: docs/performance.md.)
//!
//! The WAL stays bounded whatever the thread manages to do: from [`WRITER_LIMIT`] pages on, the
//! writer copies whatever is left itself, trying at every commit; only a checkpoint of the
//! thread's that is under way (and so ends) makes it wait for the next.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rusqlite::{ffi, Connection, OpenFlags};

use super::Failed;

/// Pages of WAL (since the last checkpoint the thread was asked for) at which the thread is
/// asked for the next: SQLite's own default interval.
const THREAD_PAGES: i32 = 1000;

/// How long the thread's connection waits for a lock it needs to read the schema or the WAL's
/// index (another process recovering the WAL, say); a `PASSIVE` checkpoint itself never waits,
/// for the writer or anyone else.
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Pages of WAL from which the WAL is to start over: the thread is asked again after each of
/// its checkpoints that copied something, and the writer copies the rest once it is small.
pub const WRITER_PAGES: i32 = 4000;

/// Pages left to copy (by the thread's last report) at which the writer copies them itself.
const WRITER_REST: i32 = 128;

/// Pages of WAL from which the writer copies whatever the thread has left.
const WRITER_LIMIT: i32 = WRITER_PAGES + WRITER_PAGES / 2;

/// The writer's side: counts the WAL's pages at each commit and wakes the thread.
pub struct Checkpoints {
    /// The WAL's size in pages after the last commit, set by SQLite's WAL hook.
    pages: Arc<AtomicI32>,
    /// The WAL's size when the thread was last asked, and what it had copied by then.
    asked_at: Asked,
    /// What the thread's checkpoints report, and the WAL's generation, shared with it.
    progress: Arc<Progress>,
    wake: Option<mpsc::SyncSender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The thread's report of its last checkpoint: the pages of the WAL found copied (SQLite's
/// `nBackfill`) in the high half, tagged in the low half with the WAL's generation as the
/// writer last published it before the checkpoint began. A report of an earlier generation (a
/// checkpoint that ended as the WAL started over) counts as nothing copied.
#[derive(Default)]
struct Progress {
    /// How many times the writer has seen the WAL start over; set by the writer only.
    generation: AtomicU32,
    report: AtomicU64,
}

impl Progress {
    fn report(&self, generation: u32, copied: i32) {
        self.report.store((u64::from(copied.max(0).unsigned_abs()) << 32) | u64::from(generation), Ordering::Relaxed);
    }

    /// The pages copied in WAL `generation`, as last reported.
    fn copied(&self, generation: u32) -> i32 {
        let report = self.report.load(Ordering::Relaxed);
        if report as u32 == generation {
            i32::try_from(report >> 32).unwrap_or(0)
        } else {
            0
        }
    }
}

/// When the thread was last asked for a checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Asked {
    /// The WAL's size in pages.
    pages: i32,
    /// What the thread had reported copied.
    copied: i32,
}

/// Called by SQLite after each commit of the writer's connection with the WAL's size in pages.
unsafe extern "C" fn on_commit(pages: *mut c_void, _: *mut ffi::sqlite3, _: *const c_char, n: c_int) -> c_int {
    // SAFETY: `pages` is the `AtomicI32` of `Checkpoints::pages`, kept alive until the hook is
    // removed (see `Checkpoints::stop`).
    unsafe { &*(pages as *const AtomicI32) }.store(n, Ordering::Relaxed);
    ffi::SQLITE_OK
}

impl Checkpoints {
    /// Starts checkpointing behind `writer`, a connection to a database file in WAL mode, and
    /// leaves the writer's own checkpoints for when the WAL reaches [`WRITER_PAGES`]. `None`
    /// (SQLite's checkpoints as they were) when the database has no WAL or no thread can be had.
    /// `target`: what `writer` was opened with (a path or a URI), which the thread's connection
    /// opens too.
    pub fn start(writer: &Connection, target: &str, failed: &Arc<Failed>) -> Option<Checkpoints> {
        let mode: String = writer.query_row("PRAGMA journal_mode", [], |r| r.get(0)).ok()?;
        if !mode.eq_ignore_ascii_case("wal") {
            return None;
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(target, flags)
            .and_then(|c| {
                c.busy_timeout(LOCK_WAIT)?;
                // What a checkpoint syncs: the WAL before copying it, the database after.
                c.pragma_update(None, "synchronous", "NORMAL")?;
                Ok(c)
            })
            .map_err(|e| log::warn!("the writer checkpoints alone: cannot open {target} ({e})"))
            .ok()?;
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        let progress = Arc::new(Progress::default());
        let reported = progress.clone();
        let failed = failed.clone();
        let thread = std::thread::Builder::new()
            .name("coursed-checkpoint".into())
            .spawn(move || checkpoint_loop(conn, woken, &reported, &failed))
            .map_err(|e| log::warn!("the writer checkpoints alone: cannot start a thread ({e})"))
            .ok()?;
        let pages = Arc::new(AtomicI32::new(0));
        // SAFETY: the hook's data is `pages`, which this value keeps until `stop` removes the hook.
        unsafe {
            ffi::sqlite3_wal_hook(writer.handle(), Some(on_commit), Arc::as_ptr(&pages) as *mut c_void);
        }
        Some(Checkpoints { pages, asked_at: Asked::default(), progress, wake: Some(wake), thread: Some(thread) })
    }

    /// After each commit of the writer: wakes the thread every [`THREAD_PAGES`] pages of WAL,
    /// and from [`WRITER_PAGES`] on whenever it has copied something since it was last asked,
    /// until the writer copies the rest itself (see the module's documentation).
    pub fn committed(&mut self, writer: &Connection, failed: &Failed) {
        let pages = self.pages.load(Ordering::Relaxed);
        if pages < self.asked_at.pages {
            // The WAL started over.
            self.asked_at = Asked::default();
            self.progress.generation.fetch_add(1, Ordering::Relaxed);
        }
        let copied = self.progress.copied(self.progress.generation.load(Ordering::Relaxed));
        match step(pages, self.asked_at, copied) {
            Step::None => {}
            Step::Wake => {
                self.asked_at = Asked { pages, copied };
                if let Some(wake) = &self.wake {
                    // Full: the thread is already asked.
                    let _ = wake.try_send(());
                }
            }
            Step::Checkpoint => {
                let started = std::time::Instant::now();
                // SAFETY: a plain call on the writer's open connection, on its own thread.
                let rc = unsafe {
                    ffi::sqlite3_wal_checkpoint_v2(
                        writer.handle(),
                        std::ptr::null(),
                        ffi::SQLITE_CHECKPOINT_PASSIVE,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                // Busy: the thread is checkpointing; the next commit tries again.
                if rc != ffi::SQLITE_OK && rc != ffi::SQLITE_BUSY {
                    checkpoint_failed(rc, " on the writer", failed);
                }
                log::trace!(
                    "checkpoint on the writer at {pages} WAL pages: {rc}, {} µs",
                    started.elapsed().as_micros()
                );
            }
        }
    }

    /// Removes the hook from `writer` and stops the thread (before the writer's connection
    /// closes, so that the writer's is the last connection and its close checkpoints the rest).
    pub fn stop(mut self, writer: &Connection) {
        // SAFETY: a plain call on the writer's open connection, on its own thread.
        unsafe {
            ffi::sqlite3_wal_hook(writer.handle(), None, std::ptr::null_mut());
        }
        self.wake.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Checkpoints {
    fn drop(&mut self) {
        if self.wake.is_some() {
            // Dropped without `stop`: the hook may still be installed, so its data must outlive
            // the connection.
            std::mem::forget(self.pages.clone());
        }
    }
}

/// What the writer does after a commit.
#[derive(Debug, PartialEq)]
enum Step {
    None,
    /// Asks the thread for a checkpoint.
    Wake,
    /// Checkpoints itself.
    Checkpoint,
}

/// The writer's step with `pages` pages of WAL, the thread last asked as `asked`, and `copied`
/// pages found copied by its last checkpoint (see the module's documentation). From
/// [`WRITER_PAGES`] on, the thread is asked again only once its last checkpoint copied
/// something: one that copies nothing (a reader still using the WAL's older pages) is not
/// repeated at every commit, only every [`THREAD_PAGES`] pages.
fn step(pages: i32, asked: Asked, copied: i32) -> Step {
    if pages >= WRITER_LIMIT || (pages >= WRITER_PAGES && pages - copied <= WRITER_REST) {
        Step::Checkpoint
    } else if pages - asked.pages >= THREAD_PAGES || (pages >= WRITER_PAGES && copied != asked.copied) {
        Step::Wake
    } else {
        Step::None
    }
}

/// Starts writing the changed pages of the database file `fd` out to disk, without waiting for
/// them or flushing the disk's cache: the sync of the writer's checkpoint then finds them written
/// or on their way, and the disk's cache is flushed once per WAL, not at every checkpoint of the
/// thread's (each flush of the cache makes the WAL's flushes, which requests wait for, wait too).
#[cfg(target_os = "linux")]
fn start_writeback(fd: c_int) {
    // SAFETY: a plain system call on a descriptor of the thread's connection, open as long as it.
    if unsafe { libc::sync_file_range(fd, 0, 0, libc::SYNC_FILE_RANGE_WRITE) } != 0 {
        log::debug!("cannot start writing the database file out: {}", std::io::Error::last_os_error());
    }
}

/// Elsewhere the kernel writes the pages out in its own time, and the writer's sync the rest.
#[cfg(not(target_os = "linux"))]
fn start_writeback(_: c_int) {}

/// Elsewhere no descriptor is needed.
#[cfg(not(target_os = "linux"))]
fn database_fd(_: &Connection) -> Option<c_int> {
    None
}

/// The file descriptor through which SQLite reads and writes `conn`'s database file, when it can
/// be known for sure: the file is one of SQLite's `unix` VFS (whose files begin with their
/// methods, VFS, inode record and descriptor), and the descriptor names the file `conn` has open.
/// coursed opens no descriptor of its own on the database file: closing it would drop every lock
/// SQLite holds on the file (POSIX locks belong to the process and the file, not the descriptor).
#[cfg(target_os = "linux")]
fn database_fd(conn: &Connection) -> Option<c_int> {
    use std::os::unix::fs::MetadataExt as _;
    #[repr(C)]
    struct UnixFile {
        methods: *const ffi::sqlite3_io_methods,
        vfs: *mut ffi::sqlite3_vfs,
        inode: *mut c_void,
        fd: c_int,
    }
    let control = |op: c_int, out: *mut c_void| {
        // SAFETY: both opcodes used here write one pointer to `out`.
        unsafe { ffi::sqlite3_file_control(conn.handle(), c"main".as_ptr(), op, out) }
    };
    let mut vfs: *mut ffi::sqlite3_vfs = std::ptr::null_mut();
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    if control(ffi::SQLITE_FCNTL_VFS_POINTER, (&raw mut vfs).cast()) != ffi::SQLITE_OK
        || control(ffi::SQLITE_FCNTL_FILE_POINTER, (&raw mut file).cast()) != ffi::SQLITE_OK
        || file.is_null()
    {
        return None;
    }
    // SAFETY: looks a VFS up by name.
    if vfs.is_null() || vfs != unsafe { ffi::sqlite3_vfs_find(c"unix".as_ptr()) } {
        return None;
    }
    // SAFETY: the connection's database is a file of the `unix` VFS, a `unixFile`, which starts
    // with these members.
    let fd = unsafe { (*file.cast::<UnixFile>()).fd };
    let path = std::fs::metadata(conn.path()?).ok()?;
    // SAFETY: `fstat` writes a `stat` into `st`.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let same = unsafe { libc::fstat(fd, &raw mut st) } == 0 && st.st_dev == path.dev() && st.st_ino == path.ino();
    same.then_some(fd)
}

fn checkpoint_loop(conn: Connection, woken: mpsc::Receiver<()>, progress: &Progress, failed: &Failed) {
    // Fixed for the connection's life.
    let fd = database_fd(&conn);
    let mut last = 0;
    while woken.recv().is_ok() {
        if failed.get().is_some() {
            break;
        }
        let started = std::time::Instant::now();
        let generation = progress.generation.load(Ordering::Relaxed);
        let outcome = conn.prepare_cached("PRAGMA wal_checkpoint(PASSIVE)").and_then(|mut st| {
            st.query_row([], |r| Ok((r.get::<_, i64>(0)? != 0, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?)))
        });
        match outcome {
            // Another checkpoint (the writer's, another process's) holds the WAL: it does the work.
            Ok((true, _, _)) => log::trace!("checkpoint: busy"),
            Ok((false, wal, done)) => {
                if let Some(fd) = fd.filter(|_| done != last) {
                    start_writeback(fd);
                }
                last = done;
                progress.report(generation, i32::try_from(done).unwrap_or(0));
                crate::metrics::M.sqlite_checkpoint.time(started.elapsed());
                log::trace!(
                    "checkpoint: {done} of {wal} WAL pages in the database file, {} µs",
                    started.elapsed().as_micros()
                );
            }
            Err(e) => checkpoint_failed(e.sqlite_error().map_or(ffi::SQLITE_ERROR, |e| e.extended_code), "", failed),
        }
    }
}

/// A checkpoint that failed with `rc`: one whose sync failed stops the writes (see
/// [`Failed`]: the pages it copied since the WAL started over may be gone, and the next sync
/// would say they are not); others (a write refused, a lock) copy nothing for good and are
/// tried again at the next.
fn checkpoint_failed(rc: c_int, whose: &str, failed: &Failed) {
    let what = ffi::code_to_str(rc);
    match rc {
        ffi::SQLITE_IOERR_FSYNC => failed.set(format!("a checkpoint{whose} could not sync the database file ({what})")),
        ffi::SQLITE_IOERR_DIR_FSYNC => {
            failed.set(format!("a checkpoint{whose} could not sync the database's folder ({what})"))
        }
        _ => log::warn!("checkpoint{whose} failed: {what} (code {rc}); the next one tries again"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits `pages` pages' worth of rows on `c`, a commit of about ten pages at a time,
    /// telling `cp` of each, and returns the WAL file's largest size seen.
    fn write_pages(c: &Connection, cp: &mut Checkpoints, pages: i32, wal: &std::path::Path) -> u64 {
        let mut largest = 0;
        for _ in 0..pages / 10 {
            c.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10)
                 INSERT INTO t (b) SELECT randomblob(3900) FROM n",
                [],
            )
            .unwrap();
            cp.committed(c, &Failed::default());
            largest = largest.max(std::fs::metadata(wal).map(|m| m.len()).unwrap_or(0));
        }
        largest
    }

    fn wal_database(dir: &std::path::Path) -> (Connection, String) {
        let path = dir.join("c.db").to_str().unwrap().to_owned();
        let c = Connection::open(&path).unwrap();
        c.execute_batch(
            "PRAGMA page_size = 4096; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             CREATE TABLE t (b BLOB);",
        )
        .unwrap();
        (c, path)
    }

    #[test]
    fn the_thread_copies_the_wal_and_the_writer_keeps_it_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let (c, path) = wal_database(dir.path());
        let wal = dir.path().join("c.db-wal");
        let database_size = || std::fs::metadata(&path).unwrap().len();
        let empty = database_size();
        let autocheckpoint = |c: &Connection| c.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get::<_, i64>(0));
        assert_eq!(autocheckpoint(&c).unwrap(), 1000, "SQLite's own checkpoints, before");

        // The writer no longer checkpoints at SQLite's 1,000 pages: below its own threshold only
        // the thread can have copied pages into the file.
        let mut cp = Checkpoints::start(&c, &path, &Arc::default()).expect("a WAL database gets a checkpointer");
        assert_eq!(autocheckpoint(&c).unwrap(), 0, "the hook replaces SQLite's checkpoints on the writer");
        write_pages(&c, &mut cp, WRITER_PAGES / 2, &wal);
        cp.stop(&c);
        assert!(
            database_size() > empty + (THREAD_PAGES as u64) * 4096 / 2,
            "the thread checkpointed: the file grew from {empty} to {}",
            database_size()
        );

        // Far past the threshold, the WAL starts over instead of growing. A writer's checkpoint
        // that finds the thread's under way tries again at the next commit, so the WAL grows for
        // as long as the thread's checkpoint takes: slack for a thread slowed down by a busy
        // machine (other tests), well short of the three limits written.
        let mut cp = Checkpoints::start(&c, &path, &Arc::default()).unwrap();
        let largest = write_pages(&c, &mut cp, WRITER_LIMIT * 3, &wal);
        cp.stop(&c);
        let bound = 2 * WRITER_LIMIT as u64 * (4096 + 24) + 32;
        assert!(largest <= bound, "the WAL reached {largest} bytes, past {bound}");
        let rows: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, i64::from(WRITER_PAGES / 2 / 10 * 10 + WRITER_LIMIT * 3 / 10 * 10));
    }

    #[test]
    fn the_writer_asks_the_thread_until_little_is_left_for_itself() {
        let asked = |pages, copied| Asked { pages, copied };
        // Below WRITER_PAGES: the thread every THREAD_PAGES pages.
        assert_eq!(step(THREAD_PAGES - 1, asked(0, 0), 0), Step::None);
        assert_eq!(step(THREAD_PAGES, asked(0, 0), 0), Step::Wake);
        assert_eq!(step(THREAD_PAGES + 10, asked(THREAD_PAGES, 0), THREAD_PAGES), Step::None);
        // From WRITER_PAGES on: the thread again as soon as its last checkpoint copied something,
        // however recently it was asked, as long as much is left.
        let (w, rest) = (WRITER_PAGES, WRITER_REST);
        assert_eq!(step(w, asked(w - 1, w - 2000), w - 1000), Step::Wake);
        assert_eq!(step(w + 50, asked(w + 40, w - 1000), w - rest), Step::Wake);
        // Its checkpoint under way or having copied nothing (a reader holds the WAL): not again
        // at every commit, only every THREAD_PAGES pages.
        assert_eq!(step(w + 50, asked(w + 40, w - 1000), w - 1000), Step::None);
        assert_eq!(step(w + THREAD_PAGES + 40, asked(w + 40, w - 1000), w - 1000), Step::Wake);
        // Little left: the writer copies it, and the WAL starts over.
        assert_eq!(step(w + 50, asked(w + 40, w - 1000), w + 50 - rest), Step::Checkpoint);
        assert_eq!(step(w, asked(w, w), w), Step::Checkpoint);
        // A thread that does not keep up: the writer copies everything at WRITER_LIMIT.
        assert_eq!(step(WRITER_LIMIT - 1, asked(WRITER_LIMIT - 2, 0), 10), Step::Wake);
        assert_eq!(step(WRITER_LIMIT, asked(WRITER_LIMIT - 1, 0), 0), Step::Checkpoint);
    }

    #[test]
    fn a_report_from_before_the_wal_started_over_counts_as_nothing_copied() {
        let progress = Progress::default();
        assert_eq!(progress.copied(0), 0);
        progress.report(0, 3990);
        assert_eq!(progress.copied(0), 3990);
        // The WAL started over (generation 1) as that checkpoint ended: its 3,990 pages are
        // pages of the old WAL, not of the new one.
        assert_eq!(progress.copied(1), 0);
        progress.report(1, 120);
        assert_eq!(progress.copied(1), 120);
        progress.report(u32::MAX, i32::MAX);
        assert_eq!(progress.copied(u32::MAX), i32::MAX);
    }

    /// The descriptor the writeback goes through is SQLite's own for the database file; none is
    /// given for an in-memory database.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_writeback_uses_sqlites_own_descriptor_of_the_database_file() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (c, path) = wal_database(dir.path());
        let fd = database_fd(&c).expect("a file of the unix VFS");
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::fstat(fd, &raw mut st) }, 0);
        let file = std::fs::metadata(&path).unwrap();
        assert_eq!((st.st_dev, st.st_ino), (file.dev(), file.ino()));
        start_writeback(fd);
        let m = Connection::open_in_memory().unwrap();
        assert_eq!(database_fd(&m), None);
    }

    #[test]
    fn a_database_without_a_wal_keeps_sqlite_checkpointing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.db").to_str().unwrap().to_owned();
        let c = Connection::open(&path).unwrap();
        c.execute_batch("PRAGMA journal_mode = DELETE; CREATE TABLE t (b BLOB);").unwrap();
        assert!(Checkpoints::start(&c, &path, &Arc::default()).is_none(), "a rollback journal");
        let memdb = "file:/checkpoint-test?vfs=memdb";
        let m = Connection::open_with_flags(
            memdb,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI,
        )
        .unwrap();
        m.execute_batch("PRAGMA journal_mode = MEMORY; CREATE TABLE t (b BLOB);").unwrap();
        assert!(Checkpoints::start(&m, memdb, &Arc::default()).is_none(), "an in-memory database");
    }
}
