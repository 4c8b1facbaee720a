//! Where pages start. For a table in id order, the index keeps the id at every `STRIDE`-th
//! position, so that page N begins from a key instead of stepping over (N - 1) × size rows.
//!
//! An index is valid for one generation of its table (`row_counts.gen`, which the schema's
//! triggers move on every insert and delete, whoever makes them: another process, another
//! replica). It is a cache versioned from the database, never a source of truth. A stale index
//! is rebuilt in the background, at most once a second per table; until then pages are read
//! with a plain `OFFSET`, which is always right, only slower for deep pages.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Rows between two keys: a deep page skips fewer than this many rows after its key.
pub const STRIDE: u64 = 256;
const REBUILD_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct PageIndex {
    tables: Mutex<HashMap<&'static str, Entry>>,
    /// Some entry is `wanted`: every read asks [`PageIndex::claim_rebuild`], and this spares
    /// the lock (shared by every thread) when no rebuild is due, which is nearly always.
    wanted: AtomicBool,
}

#[derive(Default)]
struct Entry {
    gen: i64,
    keys: Option<Arc<[String]>>,
    /// A read found the index stale; a rebuild is due.
    wanted: bool,
    building: bool,
    last_build: Option<Instant>,
}

impl PageIndex {
    /// The key to start at and the rows to skip after it, for row `offset` of `table` in
    /// generation `gen`; `None` when the index is not current.
    pub fn start(&self, table: &str, gen: i64, offset: u64) -> Option<(String, u64)> {
        let tables = self.tables.lock().ok()?;
        let e = tables.get(table).filter(|e| e.gen == gen)?;
        let key = e.keys.as_ref()?.get((offset / STRIDE) as usize)?.clone();
        Some((key, offset % STRIDE))
    }

    /// Notes that `table`'s index is stale (the store rebuilds it after the read).
    pub fn want(&self, table: &'static str) {
        if let Ok(mut tables) = self.tables.lock() {
            tables.entry(table).or_default().wanted = true;
            self.wanted.store(true, Ordering::Release);
        }
    }

    /// A table whose rebuild should start now, marked as running.
    pub fn claim_rebuild(&self) -> Option<&'static str> {
        if !self.wanted.load(Ordering::Acquire) {
            return None;
        }
        let mut tables = self.tables.lock().ok()?;
        let (table, e) = tables
            .iter_mut()
            .find(|(_, e)| e.wanted && !e.building && e.last_build.is_none_or(|t| t.elapsed() >= REBUILD_EVERY))?;
        e.wanted = false;
        e.building = true;
        e.last_build = Some(Instant::now());
        let table = *table;
        self.wanted.store(tables.values().any(|e| e.wanted), Ordering::Release);
        Some(table)
    }

    /// Ends a rebuild, keeping its result when it succeeded.
    pub fn finish(&self, table: &'static str, built: Option<(i64, Vec<String>)>) {
        if let Ok(mut tables) = self.tables.lock() {
            let e = tables.entry(table).or_default();
            e.building = false;
            if let Some((gen, keys)) = built {
                e.gen = gen;
                e.keys = Some(keys.into());
            }
        }
    }
}
