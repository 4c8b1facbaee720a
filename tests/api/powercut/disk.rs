//! The disk behind the power-cut file system: every file and directory as the programs above
//! see it, and beside it what a disk would still hold if the power went now.
//!
//! - A file's bytes are pages. A write lands in the file's dirty pages; `fsync` and `fdatasync`
//!   move them to the durable pages, with the size. `fsync` also keeps the mode, owner and times;
//!   `fdatasync` does not.
//! - A directory's entries are durable only when the directory itself is synced: a new file, a
//!   rename or an unlink is forgotten by a cut until then (the file's own bytes notwithstanding).
//! - A cut drops everything not durable. Inodes are never freed, so that a name a cut brings
//!   back finds its file's durable bytes.
//! - A failed `fsync` behaves as Linux's does: the pages it could not write are marked clean,
//!   so they stay readable until the cut but a later `fsync` succeeds without writing them.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::time::SystemTime;

pub const PAGE: usize = 4096;
type Page = Box<[u8; PAGE]>;

fn zero_page() -> Page {
    Box::new([0; PAGE])
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
}

#[derive(Clone, Copy, Debug)]
pub struct Meta {
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub atime: SystemTime,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
}

/// A file's bytes: what is durable, what a failed sync lost (still readable), what is dirty.
#[derive(Default)]
pub struct Pages {
    durable: Vec<Page>,
    durable_size: u64,
    lost: BTreeMap<u64, Page>,
    dirty: BTreeMap<u64, Page>,
    size: u64,
}

impl Pages {
    pub fn size(&self) -> u64 {
        self.size
    }

    fn page(&self, index: u64) -> Option<&Page> {
        self.dirty.get(&index).or_else(|| self.lost.get(&index)).or_else(|| self.durable.get(index as usize))
    }

    /// The page to write into: dirty, copied up from below on first write.
    fn page_mut(&mut self, index: u64) -> &mut Page {
        if !self.dirty.contains_key(&index) {
            let copy = self.page(index).cloned().unwrap_or_else(zero_page);
            self.dirty.insert(index, copy);
        }
        self.dirty.get_mut(&index).expect("just inserted")
    }

    pub fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let end = self.size.min(offset.saturating_add(len as u64));
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let mut at = offset;
        while at < end {
            let (index, within) = (at / PAGE as u64, (at % PAGE as u64) as usize);
            let n = (PAGE - within).min((end - at) as usize);
            match self.page(index) {
                Some(page) => out.extend_from_slice(&page[within..within + n]),
                None => out.resize(out.len() + n, 0),
            }
            at += n as u64;
        }
        out
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let mut done = 0;
        while done < data.len() {
            let at = offset + done as u64;
            let (index, within) = (at / PAGE as u64, (at % PAGE as u64) as usize);
            let n = (PAGE - within).min(data.len() - done);
            self.page_mut(index)[within..within + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        self.size = self.size.max(offset + data.len() as u64);
    }

    /// Sets the size; bytes past a shrunk end read as zeros if the file grows again.
    pub fn truncate(&mut self, size: u64) {
        if size < self.size {
            let first_gone = size.div_ceil(PAGE as u64);
            let last = (self.durable.len() as u64).max(self.size.div_ceil(PAGE as u64));
            self.dirty.retain(|index, _| *index < first_gone);
            for index in first_gone..last {
                if self.page(index).is_some() {
                    self.dirty.insert(index, zero_page());
                }
            }
            let within = (size % PAGE as u64) as usize;
            if within != 0 {
                self.page_mut(size / PAGE as u64)[within..].fill(0);
            }
        }
        self.size = size;
    }

    /// fsync/fdatasync succeeded: the dirty pages and the size are on the disk.
    fn sync(&mut self) {
        for (index, page) in std::mem::take(&mut self.dirty) {
            let index = index as usize;
            while self.durable.len() <= index {
                self.durable.push(zero_page());
            }
            self.durable[index] = page;
        }
        self.durable.truncate(self.size.div_ceil(PAGE as u64) as usize);
        self.durable_size = self.size;
    }

    /// fsync failed: the dirty pages were not written, and will not be by a later sync.
    fn sync_failed(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        self.lost.extend(dirty);
    }

    fn cut(&mut self) {
        self.dirty.clear();
        self.lost.clear();
        self.size = self.durable_size;
    }

    pub fn unsynced(&self) -> usize {
        self.dirty.len()
    }
}

pub struct Node {
    pub kind: Kind,
    /// The name it was last given (for faults aimed at files by name), in `parent`.
    pub name: OsString,
    pub parent: u64,
    pub meta: Meta,
    durable_meta: Meta,
    pub pages: Pages,
    pub entries: BTreeMap<OsString, u64>,
    durable_entries: BTreeMap<OsString, u64>,
    pub target: OsString,
}

impl Node {
    pub fn new(kind: Kind, parent: u64, name: &OsStr, meta: Meta) -> Node {
        Node {
            kind,
            parent,
            name: name.to_owned(),
            meta,
            durable_meta: meta,
            pages: Pages::default(),
            entries: BTreeMap::new(),
            durable_entries: BTreeMap::new(),
            target: OsString::new(),
        }
    }

    pub fn size(&self) -> u64 {
        match self.kind {
            Kind::File => self.pages.size(),
            Kind::Dir => PAGE as u64,
            Kind::Symlink => self.target.len() as u64,
        }
    }

    /// A successful fsync (`data_only`: fdatasync) of this file or directory.
    pub fn sync(&mut self, data_only: bool) {
        match self.kind {
            Kind::File => self.pages.sync(),
            Kind::Dir => self.durable_entries = self.entries.clone(),
            Kind::Symlink => {}
        }
        if !data_only || self.kind == Kind::Dir {
            self.durable_meta = self.meta;
        }
    }

    pub fn sync_failed(&mut self) {
        if self.kind == Kind::File {
            self.pages.sync_failed();
        }
    }

    /// The power went: back to what was durable.
    pub fn cut(&mut self) {
        self.pages.cut();
        self.entries = self.durable_entries.clone();
        self.meta = self.durable_meta;
    }

    pub fn unsynced(&self) -> usize {
        self.pages.unsynced() + usize::from(self.entries != self.durable_entries)
    }

    /// The durable entries' names for `ino` that the directory no longer has (a rename or an
    /// unlink, made durable by a journal commit), forgotten; and `name` for it made durable.
    pub fn journal_entry(&mut self, name: &OsStr, ino: u64) {
        let entries = &self.entries;
        self.durable_entries.retain(|n, i| *i != ino || entries.get(n) == Some(&ino));
        self.durable_entries.insert(name.to_owned(), ino);
    }

    pub fn forget_entries_of(&mut self, ino: u64) {
        let entries = &self.entries;
        self.durable_entries.retain(|n, i| *i != ino || entries.get(n) == Some(&ino));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_read_back_what_was_written_and_a_cut_keeps_only_the_synced() {
        let mut p = Pages::default();
        p.write(4090, b"0123456789"); // across a page boundary
        assert_eq!(p.read(4088, 20), b"\0\x000123456789");
        p.sync();
        p.write(4092, b"ab");
        p.write(9000, b"tail");
        assert_eq!(p.size(), 9004);
        p.cut();
        assert_eq!(p.size(), 4100);
        assert_eq!(p.read(4090, 100), b"0123456789");
    }

    #[test]
    fn a_shrunk_file_that_grows_again_reads_zeros() {
        let mut p = Pages::default();
        p.write(0, &[7; 3 * PAGE]);
        p.sync();
        p.truncate(10);
        p.truncate(3 * PAGE as u64);
        assert_eq!(&p.read(0, 10)[..], &[7; 10]);
        assert!(p.read(10, 3 * PAGE).iter().all(|b| *b == 0));
        p.cut();
        assert_eq!(p.read(0, 3 * PAGE), vec![7; 3 * PAGE]);
    }

    #[test]
    fn pages_a_failed_sync_lost_are_read_until_the_cut_but_never_written() {
        let mut p = Pages::default();
        p.write(0, b"old");
        p.sync();
        p.write(0, b"new");
        p.write(PAGE as u64, b"second");
        p.sync_failed();
        assert_eq!(p.read(0, 3), b"new");
        p.write(2 * PAGE as u64, b"third");
        p.sync(); // "succeeds": the lost pages are not written
        p.cut();
        assert_eq!(p.read(0, 3), b"old");
        assert_eq!(p.read(PAGE as u64, 6), b"\0\0\0\0\0\0");
        assert_eq!(p.read(2 * PAGE as u64, 5), b"third");
    }
}
