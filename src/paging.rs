//! Where pages start. For a table in id order, the index keeps the id at every `STRIDE`-th
//! position, so that page N begins from a key instead of stepping over (N - 1) × size rows.
//!
//! An index is valid for one generation of its table (`row_counts.gen`, which the schema's
//! triggers move on every insert and delete, whoever makes them). A stale index is rebuilt in
//! the background, at most once a second per table; until then pages are read with a plain
//! `OFFSET`, which is always right, only slower for deep pages.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::error::Result;

/// Rows between two keys: a deep page skips fewer than this many rows after its key.
pub const STRIDE: u64 = 256;
const REBUILD_EVERY: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct PageIndex {
    tables: Mutex<HashMap<&'static str, Entry>>,
}

#[derive(Default)]
struct Entry {
    gen: i64,
    keys: Option<Arc<[String]>>,
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

    /// Whether a rebuild of `table` should start now; if so it is marked as running.
    pub fn claim_rebuild(&self, table: &'static str) -> bool {
        let Ok(mut tables) = self.tables.lock() else { return false };
        let e = tables.entry(table).or_default();
        let due = e.last_build.is_none_or(|t| t.elapsed() >= REBUILD_EVERY);
        if e.building || !due {
            return false;
        }
        e.building = true;
        e.last_build = Some(Instant::now());
        true
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

/// Reads the generation of `table` and its keys at every `STRIDE`-th position, consistently.
pub fn build(conn: &Connection, table: &str) -> Result<(i64, Vec<String>)> {
    crate::db::snapshot(conn, |c| {
        let gen: i64 =
            c.query_row("SELECT gen FROM row_counts WHERE tbl = ?1 AND parent = ''", [table], |r| r.get(0))?;
        let mut st = c.prepare(&format!("SELECT id FROM {table} ORDER BY id"))?;
        let mut rows = st.query([])?;
        let mut keys = Vec::new();
        let mut i = 0u64;
        while let Some(row) = rows.next()? {
            if i.is_multiple_of(STRIDE) {
                keys.push(row.get(0)?);
            }
            i += 1;
        }
        Ok((gen, keys))
    })
}
