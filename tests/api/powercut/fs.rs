//! The power-cut file system: a FUSE file system in this test process, holding every file in
//! memory (see `disk`), that the tests mount under a temporary directory, run coursed (and
//! PostgreSQL) on, and then cut the power of.
//!
//! The power goes off at a chosen moment: at the n-th change (a write, truncation, creation,
//! rename, removal or sync) after `arm(n)`, or at once with `cut()`. From that change on, every
//! request fails with EIO, as if the machine had stopped: nothing more reaches the disk and
//! nothing more is acknowledged by it. The test then kills what ran on it and calls `cut()`,
//! which drops everything that was not synced and turns the power back on.
//!
//! Faults (`fail`) make the next writes or syncs of a file fail with an errno instead.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use super::disk::{Kind, Meta, Node, PAGE};

/// Nothing is cached by the kernel beyond a request: a cut must be seen at once.
const TTL: Duration = Duration::ZERO;

/// When a name in a directory becomes durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    /// Only when its directory is synced (POSIX's promise, and all that coursed relies on).
    Strict,
    /// Also when the file or directory it names is synced, with the names of its new parents:
    /// a journaling file system's commit (ext4, XFS), which PostgreSQL relies on (a new
    /// database's directory, copied and synced, is not synced in `base/`).
    Journaled,
}

/// What a fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Write,
    Sync,
}

#[derive(Clone, Debug)]
struct Fault {
    op: Op,
    /// The file's name ends with this.
    name: String,
    errno: i32,
    times: u32,
}

/// Counts since the file system was mounted.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub changes: u64,
    pub syncs: u64,
    pub cuts: u64,
    pub faults: u64,
}

struct State {
    nodes: Vec<Option<Node>>,
    names: Names,
    on: bool,
    /// The power goes off when `counts.changes` reaches this.
    armed: Option<u64>,
    /// Or at the n-th write (or sync) of a file whose name ends so: (op, name, n).
    armed_on: Option<(Op, String, u64)>,
    /// The next sync of a file whose name ends so waits until released (or the power goes).
    hold: Option<String>,
    /// A sync is waiting.
    holding: bool,
    counts: Counts,
    faults: Vec<Fault>,
}

struct Shared {
    state: Mutex<State>,
    off: Condvar,
    /// How long each sync takes (µs), as on a disk that writes its cache out: 0 by default.
    sync_micros: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl State {
    fn node(&self, ino: INodeNo) -> Result<&Node, Errno> {
        self.nodes.get(ino.0 as usize).and_then(Option::as_ref).ok_or(Errno::ENOENT)
    }

    fn node_mut(&mut self, ino: INodeNo) -> Result<&mut Node, Errno> {
        self.nodes.get_mut(ino.0 as usize).and_then(Option::as_mut).ok_or(Errno::ENOENT)
    }

    fn powered(&self) -> Result<(), Errno> {
        if self.on {
            Ok(())
        } else {
            Err(Errno::EIO)
        }
    }

    /// Every change passes here: the power may go off at it.
    fn change(&mut self, shared_off: &Condvar) -> Result<(), Errno> {
        self.powered()?;
        self.counts.changes += 1;
        if self.armed.is_some_and(|at| self.counts.changes >= at) {
            self.on = false;
            self.armed = None;
            shared_off.notify_all();
            return Err(Errno::EIO);
        }
        Ok(())
    }

    /// A write or sync of `ino`: the power may go at it, or a fault answer it.
    fn fault(&mut self, op: Op, ino: INodeNo, shared_off: &Condvar) -> Result<(), Errno> {
        if self.faults.is_empty() && self.armed_on.is_none() {
            return Ok(());
        }
        let name = self.node(ino)?.name.to_string_lossy().into_owned();
        if let Some((on, pattern, n)) = &mut self.armed_on {
            if *on == op && matches(&name, pattern) {
                *n -= 1;
                if *n == 0 {
                    self.on = false;
                    self.armed_on = None;
                    shared_off.notify_all();
                    return Err(Errno::EIO);
                }
            }
        }
        let hit = self.faults.iter_mut().find(|f| f.op == op && f.times > 0 && name.ends_with(&f.name));
        match hit {
            Some(fault) => {
                fault.times -= 1;
                let errno = fault.errno;
                self.faults.retain(|f| f.times > 0);
                self.counts.faults += 1;
                Err(Errno::from_i32(errno))
            }
            None => Ok(()),
        }
    }

    fn attr(&self, ino: INodeNo) -> Result<FileAttr, Errno> {
        let node = self.node(ino)?;
        let size = node.size();
        Ok(FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: node.meta.atime,
            mtime: node.meta.mtime,
            ctime: node.meta.ctime,
            crtime: node.meta.ctime,
            kind: match node.kind {
                Kind::File => FileType::RegularFile,
                Kind::Dir => FileType::Directory,
                Kind::Symlink => FileType::Symlink,
            },
            perm: node.meta.perm,
            nlink: if node.kind == Kind::Dir { 2 } else { 1 },
            uid: node.meta.uid,
            gid: node.meta.gid,
            rdev: 0,
            blksize: PAGE as u32,
            flags: 0,
        })
    }

    fn lookup(&self, parent: INodeNo, name: &OsStr) -> Result<INodeNo, Errno> {
        let dir = self.node(parent)?;
        if dir.kind != Kind::Dir {
            return Err(Errno::ENOTDIR);
        }
        dir.entries.get(name).map(|ino| INodeNo(*ino)).ok_or(Errno::ENOENT)
    }

    /// A new node named `name` in `parent` (not yet durable there).
    fn make(&mut self, req: &Request, parent: INodeNo, name: &OsStr, kind: Kind, mode: u32) -> Result<INodeNo, Errno> {
        if self.lookup(parent, name).is_ok() {
            return Err(Errno::EEXIST);
        }
        let now = SystemTime::now();
        let meta =
            Meta { perm: (mode & 0o7777) as u16, uid: req.uid(), gid: req.gid(), atime: now, mtime: now, ctime: now };
        let ino = self.nodes.len() as u64;
        self.nodes.push(Some(Node::new(kind, parent.0, name, meta)));
        let dir = self.node_mut(parent)?;
        dir.entries.insert(name.to_owned(), ino);
        dir.meta.mtime = now;
        Ok(INodeNo(ino))
    }

    fn unlink(&mut self, parent: INodeNo, name: &OsStr, dir_wanted: bool) -> Result<(), Errno> {
        let ino = self.lookup(parent, name)?;
        let node = self.node(ino)?;
        match (node.kind == Kind::Dir, dir_wanted) {
            (true, false) => return Err(Errno::EISDIR),
            (false, true) => return Err(Errno::ENOTDIR),
            (true, true) if !node.entries.is_empty() => return Err(Errno::ENOTEMPTY),
            _ => {}
        }
        self.node_mut(parent)?.entries.remove(name);
        Ok(())
    }
}

/// The file system as FUSE sees it.
struct PowerCutFs {
    shared: Arc<Shared>,
}

macro_rules! answer {
    ($reply:expr, $result:expr, |$v:ident| $ok:expr) => {
        match $result {
            Ok($v) => $ok,
            Err(errno) => $reply.error(errno),
        }
    };
}

impl PowerCutFs {
    fn entry(&self, reply: ReplyEntry, made: impl FnOnce(&mut State) -> Result<INodeNo, Errno>) {
        let mut s = self.shared.lock();
        let result = made(&mut s).and_then(|ino| s.attr(ino));
        answer!(reply, result, |attr| reply.entry(&TTL, &attr, Generation(0)));
    }

    fn empty(&self, reply: ReplyEmpty, done: impl FnOnce(&mut State, &Condvar) -> Result<(), Errno>) {
        let mut s = self.shared.lock();
        let result = done(&mut s, &self.shared.off);
        answer!(reply, result, |_v| reply.ok());
    }
}

impl Filesystem for PowerCutFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.entry(reply, |s| {
            s.powered()?;
            s.lookup(parent, name)
        });
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let s = self.shared.lock();
        answer!(reply, s.powered().and_then(|_| s.attr(ino)), |attr| reply.attr(&TTL, &attr));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut s = self.shared.lock();
        let shared = self.shared.clone();
        let result = (|| {
            s.change(&shared.off)?;
            if size.is_some() {
                s.fault(Op::Write, ino, &shared.off)?;
            }
            let node = s.node_mut(ino)?;
            let now = SystemTime::now();
            let time = |t: TimeOrNow| match t {
                TimeOrNow::SpecificTime(t) => t,
                TimeOrNow::Now => now,
            };
            if let Some(mode) = mode {
                node.meta.perm = (mode & 0o7777) as u16;
            }
            if let Some(uid) = uid {
                node.meta.uid = uid;
            }
            if let Some(gid) = gid {
                node.meta.gid = gid;
            }
            if let Some(size) = size {
                if node.kind != Kind::File {
                    return Err(Errno::EISDIR);
                }
                node.pages.truncate(size);
                node.meta.mtime = now;
            }
            if let Some(t) = atime {
                node.meta.atime = time(t);
            }
            if let Some(t) = mtime {
                node.meta.mtime = time(t);
            }
            node.meta.ctime = now;
            s.attr(ino)
        })();
        answer!(reply, result, |attr| reply.attr(&TTL, &attr));
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let s = self.shared.lock();
        let result = s.powered().and_then(|_| s.node(ino)).map(|n| n.target.clone());
        answer!(reply, result, |target| reply.data(target.as_encoded_bytes()));
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let off = self.shared.clone();
        self.entry(reply, |s| {
            s.change(&off.off)?;
            s.make(req, parent, name, Kind::Dir, mode & !umask)
        });
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let off = self.shared.clone();
        self.entry(reply, |s| {
            s.change(&off.off)?;
            let ino = s.make(req, parent, link_name, Kind::Symlink, 0o777)?;
            let node = s.node_mut(ino)?;
            node.target = target.as_os_str().to_owned();
            node.sync(false); // a symlink's target is written with it
            Ok(ino)
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(reply, |s, off| {
            s.change(off)?;
            s.unlink(parent, name, false)
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.empty(reply, |s, off| {
            s.change(off)?;
            s.unlink(parent, name, true)
        });
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.empty(reply, |s, off| {
            s.change(off)?;
            if flags.contains(RenameFlags::RENAME_EXCHANGE) || flags.contains(RenameFlags::RENAME_WHITEOUT) {
                return Err(Errno::EINVAL);
            }
            let ino = s.lookup(parent, name)?;
            if let Ok(existing) = s.lookup(newparent, newname) {
                if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                    return Err(Errno::EEXIST);
                }
                if existing == ino {
                    return Ok(());
                }
                let (moving, replaced) = (s.node(ino)?, s.node(existing)?);
                match (moving.kind == Kind::Dir, replaced.kind == Kind::Dir) {
                    (true, false) => return Err(Errno::ENOTDIR),
                    (false, true) => return Err(Errno::EISDIR),
                    (true, true) if !replaced.entries.is_empty() => return Err(Errno::ENOTEMPTY),
                    _ => {}
                }
            }
            s.node_mut(parent)?.entries.remove(name);
            s.node_mut(newparent)?.entries.insert(newname.to_owned(), ino.0);
            let node = s.node_mut(ino)?;
            node.name = newname.to_owned();
            node.parent = newparent.0;
            node.meta.ctime = SystemTime::now();
            Ok(())
        });
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut s = self.shared.lock();
        let shared = self.shared.clone();
        let result = (|| {
            s.powered()?;
            s.node(ino)?;
            if flags.0 & libc::O_TRUNC != 0 {
                s.change(&shared.off)?;
                s.node_mut(ino)?.pages.truncate(0);
            }
            Ok(())
        })();
        answer!(reply, result, |_v| reply.opened(FileHandle(0), FopenFlags::empty()));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut s = self.shared.lock();
        let shared = self.shared.clone();
        let result = (|| {
            s.change(&shared.off)?;
            let ino = match s.lookup(parent, name) {
                Ok(_) if flags & libc::O_EXCL != 0 => return Err(Errno::EEXIST),
                Ok(ino) => {
                    if flags & libc::O_TRUNC != 0 {
                        s.node_mut(ino)?.pages.truncate(0);
                    }
                    ino
                }
                Err(_) => s.make(req, parent, name, Kind::File, mode & !umask)?,
            };
            s.attr(ino)
        })();
        answer!(reply, result, |attr| reply.created(&TTL, &attr, Generation(0), FileHandle(0), FopenFlags::empty()));
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let s = self.shared.lock();
        let result = s.powered().and_then(|_| s.node(ino)).map(|n| n.pages.read(offset, size as usize));
        answer!(reply, result, |data| reply.data(&data));
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = self.shared.lock();
        let shared = self.shared.clone();
        let result = (|| {
            s.change(&shared.off)?;
            s.fault(Op::Write, ino, &shared.off)?;
            let node = s.node_mut(ino)?;
            node.pages.write(offset, data);
            node.meta.mtime = SystemTime::now();
            Ok(data.len() as u32)
        })();
        answer!(reply, result, |n| reply.written(n));
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        let micros = self.shared.sync_micros.load(std::sync::atomic::Ordering::Relaxed);
        if micros > 0 {
            // Outside the lock: the disk is busy, the file system is not.
            std::thread::sleep(Duration::from_micros(micros));
        }
        let mut s = self.shared.lock();
        let held =
            s.hold.as_deref().is_some_and(|name| s.node(ino).is_ok_and(|n| matches(&n.name.to_string_lossy(), name)));
        if held {
            // Waits (the lock let go, so that the other thread serves everyone else) until
            // released, or until the power goes.
            s.hold = None;
            s.holding = true;
            let cuts = s.counts.cuts;
            self.shared.off.notify_all();
            s = self.shared.off.wait_while(s, |s| s.holding && s.on).unwrap_or_else(|p| p.into_inner());
            s.holding = false;
            if s.counts.cuts != cuts {
                // The power went while it waited: it never reached the disk.
                return reply.error(Errno::EIO);
            }
        }
        let result = sync(&mut s, &self.shared.off, ino, datasync);
        answer!(reply, result, |_v| reply.ok());
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let s = self.shared.lock();
        let result = s.powered().and_then(|_| s.node(ino)).map(|dir| {
            let mut all = vec![(ino.0, FileType::Directory, OsStr::new(".").to_owned())];
            all.push((ino.0, FileType::Directory, OsStr::new("..").to_owned()));
            for (name, child) in &dir.entries {
                let kind = match s.nodes[*child as usize].as_ref().map(|n| n.kind) {
                    Some(Kind::Dir) => FileType::Directory,
                    Some(Kind::Symlink) => FileType::Symlink,
                    _ => FileType::RegularFile,
                };
                all.push((*child, kind, name.clone()));
            }
            all
        });
        answer!(reply, result, |all| {
            for (i, (child, kind, name)) in all.into_iter().enumerate().skip(offset as usize) {
                if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                    break;
                }
            }
            reply.ok()
        });
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, datasync: bool, reply: ReplyEmpty) {
        self.empty(reply, |s, off| sync(s, off, ino, datasync));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(1 << 24, 1 << 24, 1 << 24, 1 << 20, 1 << 20, PAGE as u32, 255, PAGE as u32);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.empty(reply, |s, off| {
            if mode != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            s.change(off)?;
            s.fault(Op::Write, ino, off)?;
            let pages = &mut s.node_mut(ino)?.pages;
            if offset + length > pages.size() {
                pages.truncate(offset + length);
            }
            Ok(())
        });
    }
}

/// `name` ends with `pattern`, or holds what follows a leading `*`.
fn matches(name: &str, pattern: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(inner) => name.contains(inner),
        None => name.ends_with(pattern),
    }
}

fn sync(s: &mut State, off: &Condvar, ino: INodeNo, datasync: bool) -> Result<(), Errno> {
    s.change(off)?;
    s.counts.syncs += 1;
    if let Err(errno) = s.fault(Op::Sync, ino, off) {
        if s.on {
            s.node_mut(ino)?.sync_failed();
        }
        return Err(errno);
    }
    s.node_mut(ino)?.sync(datasync);
    if s.names == Names::Journaled {
        journal(s, ino.0);
    }
    Ok(())
}

/// A journaling file system's fsync: the names of the synced file, up to the root, are durable
/// as they are now, and its old names are gone.
fn journal(s: &mut State, ino: u64) {
    for dir in s.nodes.iter_mut().flatten().filter(|n| n.kind == Kind::Dir) {
        dir.forget_entries_of(ino);
    }
    let mut at = ino;
    while at != INodeNo::ROOT.0 {
        let Some(node) = s.nodes[at as usize].as_ref() else { return };
        let (parent, name) = (node.parent, node.name.clone());
        let Some(dir) = s.nodes[parent as usize].as_mut() else { return };
        if dir.entries.get(&name) != Some(&at) {
            return; // unlinked: no name to keep
        }
        dir.journal_entry(&name, at);
        at = parent;
    }
}

/// A mounted power-cut file system; unmounted when dropped.
pub struct PowerCut {
    shared: Arc<Shared>,
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
    _dir: tempfile::TempDir,
}

impl PowerCut {
    /// Mounts a new, empty one (owned by root, mode 0755, open to every user) under a
    /// temporary directory. `None` when FUSE is unavailable here, or a panic with the reason
    /// when COURSED_REQUIRE_FUSE=1 (CI sets it), so that the power-cut tests never skip silently.
    pub fn mount() -> Option<PowerCut> {
        PowerCut::mount_with(Names::Strict)
    }

    /// [`PowerCut::mount`], with names made durable as `names` says.
    pub fn mount_with(names: Names) -> Option<PowerCut> {
        match PowerCut::try_mount(names) {
            Ok(fs) => Some(fs),
            Err(reason) if std::env::var("COURSED_REQUIRE_FUSE").is_ok_and(|v| v == "1") => {
                panic!("FUSE required (COURSED_REQUIRE_FUSE=1) but unavailable: {reason}")
            }
            Err(reason) => {
                static ONCE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
                ONCE.get_or_init(|| eprintln!("FUSE unavailable, the power-cut tests are skipped: {reason}"));
                None
            }
        }
    }

    fn try_mount(names: Names) -> Result<PowerCut, String> {
        if !Path::new("/dev/fuse").exists() {
            return Err("no /dev/fuse".into());
        }
        let dir = tempfile::Builder::new().prefix("coursed-powercut-").tempdir().map_err(|e| e.to_string())?;
        // Open to the `postgres` user, who runs the PostgreSQL cluster kept on it.
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .map_err(|e| e.to_string())?;
        let mountpoint = dir.path().join("disk");
        std::fs::create_dir(&mountpoint).map_err(|e| e.to_string())?;
        let now = SystemTime::now();
        let root = Meta { perm: 0o755, uid: 0, gid: 0, atime: now, mtime: now, ctime: now };
        let state = State {
            nodes: vec![None, Some(Node::new(Kind::Dir, INodeNo::ROOT.0, OsStr::new(""), root))],
            names,
            on: true,
            armed: None,
            armed_on: None,
            hold: None,
            holding: false,
            counts: Counts::default(),
            faults: Vec::new(),
        };
        let shared =
            Arc::new(Shared { state: Mutex::new(state), off: Condvar::new(), sync_micros: Default::default() });
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("coursed-powercut".into()),
            fuser::MountOption::DefaultPermissions,
            fuser::MountOption::NoAtime,
        ];
        config.acl = fuser::SessionACL::All;
        config.n_threads = Some(2);
        let fs = PowerCutFs { shared: shared.clone() };
        let session = fuser::spawn_mount(fs, &mountpoint, &config).map_err(|e| format!("mount: {e}"))?;
        Ok(PowerCut { shared, session: Some(session), mountpoint, _dir: dir })
    }

    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// The power goes off at the `n`-th change from now (n ≥ 1).
    pub fn arm(&self, n: u64) {
        let mut s = self.shared.lock();
        s.armed = Some(s.counts.changes + n.max(1));
    }

    /// The power goes off at the `n`-th `op` (n ≥ 1) from now of a file whose name ends with
    /// `name` (or, for `*text`, holds `text`).
    pub fn arm_on(&self, op: Op, name: &str, n: u64) {
        self.shared.lock().armed_on = Some((op, name.to_owned(), n.max(1)));
    }

    /// The next sync of a file whose name ends with `name` waits, as a slow disk would, until
    /// the power goes.
    pub fn hold_next_sync(&self, name: &str) {
        self.shared.lock().hold = Some(name.to_owned());
    }

    /// Waits until a sync is held, at most `limit`; true when one is.
    pub fn wait_held(&self, limit: Duration) -> bool {
        let s = self.shared.lock();
        let (s, _) = self.shared.off.wait_timeout_while(s, limit, |s| !s.holding).unwrap_or_else(|p| p.into_inner());
        s.holding
    }

    /// Waits until the power went off (armed or cut), at most `limit`; true when it did.
    pub fn wait_off(&self, limit: Duration) -> bool {
        let s = self.shared.lock();
        let (s, _) = self.shared.off.wait_timeout_while(s, limit, |s| s.on).unwrap_or_else(|p| p.into_inner());
        !s.on
    }

    pub fn is_on(&self) -> bool {
        self.shared.lock().on
    }

    /// The power goes off now: every request fails from here on, and nothing more reaches the
    /// disk (a held sync among them), until [`PowerCut::cut`] turns it back on.
    pub fn power_off(&self) {
        self.shared.lock().on = false;
        self.shared.off.notify_all();
    }

    /// The power goes off (if it has not already), everything not synced is forgotten, and the
    /// power comes back. Kill what ran on it first: a process still running when the power
    /// comes back would write on as if nothing had happened.
    pub fn cut(&self) {
        let mut s = self.shared.lock();
        s.on = false;
        s.armed = None;
        s.armed_on = None;
        s.hold = None;
        s.holding = false;
        s.faults.clear();
        for node in s.nodes.iter_mut().flatten() {
            node.cut();
        }
        s.counts.cuts += 1;
        s.on = true;
        self.shared.off.notify_all();
    }

    /// Everything written so far becomes durable (as after `sync` on a real disk): for setting
    /// up a test's starting state.
    pub fn sync_all(&self) {
        let mut s = self.shared.lock();
        for node in s.nodes.iter_mut().flatten() {
            node.sync(false);
        }
    }

    /// The next `times` writes (or syncs) of files whose name ends with `name` fail with `errno`.
    pub fn fail(&self, op: Op, name: &str, errno: i32, times: u32) {
        self.shared.lock().faults.push(Fault { op, name: name.to_owned(), errno, times });
    }

    /// Each file sync takes `d` from now on, as on a real disk (a commit's window between being
    /// readable and being on the disk widens with it).
    pub fn slow_syncs(&self, d: Duration) {
        self.shared.sync_micros.store(d.as_micros() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn counts(&self) -> Counts {
        self.shared.lock().counts
    }

    /// How many pages and directories hold changes a cut would drop.
    pub fn unsynced(&self) -> usize {
        self.shared.lock().nodes.iter().flatten().map(Node::unsynced).sum()
    }
}

impl Drop for PowerCut {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
    }
}
