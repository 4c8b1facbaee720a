//! Bulk loading: rows of every type streamed into an empty database in one transaction (the
//! `generate`, `load` and `copy` commands), and the streaming read that `copy` feeds it from.
//!
//! A row holds the columns of [`Selection::whole`] in their order: `id`, every attribute, then
//! every to-one relationship's column. Rows are inserted many to a statement.

use super::select::Selection;
use super::tx::{DbError, Row, Tx, Value};
use crate::resources::{ResourceType, TYPES};

/// Rows per `INSERT` statement.
const ROWS_PER_INSERT: usize = 100;
/// Rows per read of a `copy` source.
const ROWS_PER_READ: usize = 1000;

/// What a bulk load does with the resources its target already holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// The target must hold none.
    Refuse,
    /// Remove them first, in the same transaction.
    Replace,
    /// Keep them (the load inserts beside them and may update them).
    Keep,
}

/// How a bulk load treats its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub existing: Existing,
    /// Commit at the end; `false` rolls everything back (a dry run).
    pub commit: bool,
    /// What to suggest when the target is refused for holding resources, e.g. `or --replace`.
    pub hint: &'static str,
    /// The command, as the revisions it records name it (`load`, `import`, ...).
    pub by: &'static str,
    /// The load writes the history of what it loads itself (a copy, a bundle with history):
    /// it records none, and the target's own history is replaced (or, unless replacing, must
    /// be empty: two histories of one resource would clash).
    pub carries_history: bool,
}

impl Target {
    /// The same target, the history of what is loaded carried by the load itself.
    pub fn carrying_history(self) -> Target {
        Target { carries_history: true, ..self }
    }

    /// An empty target (or one emptied first when `replace`), committed.
    pub fn new(replace: bool) -> Target {
        Target {
            existing: if replace { Existing::Replace } else { Existing::Refuse },
            commit: true,
            hint: "or --replace",
            by: "coursed",
            carries_history: false,
        }
    }

    /// The same target, the revisions recorded named by the command `by`.
    pub fn by(self, by: &'static str) -> Target {
        Target { by, ..self }
    }

    /// A target that must hold no resources, for a command that offers no way around that.
    pub fn empty() -> Target {
        Target { hint: "", ..Target::new(false) }
    }

    /// Checks the resources `existing` a target holds; returns whether to remove them first.
    pub fn clear_first(&self, name: &str, existing: u64) -> Result<bool, String> {
        match self.existing {
            _ if existing == 0 => Ok(false),
            Existing::Refuse if self.hint.is_empty() => {
                Err(format!("{name} already holds {existing} resources; use an empty database"))
            }
            Existing::Refuse => {
                Err(format!("{name} already holds {existing} resources; use an empty database ({})", self.hint))
            }
            Existing::Replace => Ok(true),
            Existing::Keep => Ok(false),
        }
    }

    /// Makes way for a carried history (see [`Target::carries_history`]), after
    /// [`Target::clear_first`] and with the history triggers off: a replaced target forgets its
    /// own revisions (its feed's readers are told theirs are gone); any other must keep none.
    pub fn make_way_for_history(&self, tx: &mut dyn Tx, name: &str) -> Result<(), String> {
        if !self.carries_history {
            return Ok(());
        }
        let fail = |e: DbError| format!("cannot read the history of {name}: {e}");
        match self.existing {
            Existing::Replace => super::history::forget_all(tx).map_err(fail),
            Existing::Keep => {
                Err("a history cannot be merged into another: load it into a database without one".into())
            }
            Existing::Refuse => match super::history::count(tx).map_err(fail)? {
                0 => Ok(()),
                n => Err(format!(
                    "{name} keeps the history of {n} changes (of resources deleted since); \
                     carry a history into a database without one{}",
                    if self.hint.is_empty() { String::new() } else { format!(" ({})", self.hint) }
                )),
            },
        }
    }
}

/// Rows written, per type in [`TYPES`] order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts(pub [u64; 3]);

impl Counts {
    pub fn of(&self, rt: &ResourceType) -> u64 {
        TYPES.iter().position(|t| t.name == rt.name).map_or(0, |i| self.0[i])
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = TYPES.iter().zip(self.0).map(|(t, n)| format!("{n} {}", t.name)).collect();
        f.write_str(&parts.join(", "))
    }
}

/// Inserts rows, buffering them into multi-row statements. Parents must come before their
/// children (modules, subjects, chapters); [`Loader::finish`] writes what is buffered.
pub struct Loader<'t> {
    tx: &'t mut dyn Tx,
    rt: Option<&'static ResourceType>,
    rows: Vec<Value>,
    pending: usize,
    pub counts: Counts,
    /// Called with the running total after every statement (a progress bar).
    pub progress: Option<Box<dyn FnMut(u64) + 't>>,
}

impl<'t> Loader<'t> {
    /// The transaction rows go into (for reads between pushes: call [`Loader::flush`] first).
    pub fn tx(&mut self) -> &mut dyn Tx {
        &mut *self.tx
    }

    pub fn new(tx: &'t mut dyn Tx) -> Loader<'t> {
        Loader { tx, rt: None, rows: Vec::new(), pending: 0, counts: Counts::default(), progress: None }
    }

    /// Adds a row of `rt` in [`Selection::whole`] column order.
    pub fn push(&mut self, rt: &'static ResourceType, row: Vec<Value>) -> Result<(), DbError> {
        self.push_stored(rt, with_words(rt, row))
    }

    /// Adds a row of `rt` in [`stored_columns`] order (its words already appended).
    pub fn push_stored(&mut self, rt: &'static ResourceType, row: Vec<Value>) -> Result<(), DbError> {
        if self.rt.is_some_and(|t| !std::ptr::eq(t, rt)) {
            self.flush()?;
        }
        self.rt = Some(rt);
        self.rows.extend(row);
        self.pending += 1;
        if self.pending == ROWS_PER_INSERT {
            self.flush()?;
        }
        Ok(())
    }

    /// Adds a row of `rt` given by column name; columns not named are null.
    pub fn insert(&mut self, rt: &'static ResourceType, fields: &[(&str, Value)]) -> Result<(), DbError> {
        let row = columns(rt)
            .map(|c| fields.iter().find(|(name, _)| *name == c).map_or(Value::Null, |(_, v)| v.clone()))
            .collect();
        self.push(rt, row)
    }

    /// Writes what is buffered now.
    pub fn flush(&mut self) -> Result<(), DbError> {
        let Some(rt) = self.rt else { return Ok(()) };
        if self.pending == 0 {
            return Ok(());
        }
        let sql = super::dialect::insert_rows(rt.table, &stored_columns(rt), self.pending);
        self.tx.execute(&sql, &self.rows)?;
        if let Some(i) = TYPES.iter().position(|t| std::ptr::eq(*t, rt)) {
            self.counts.0[i] += self.pending as u64;
        }
        self.rows.clear();
        self.pending = 0;
        if let Some(p) = &mut self.progress {
            p(self.counts.total());
        }
        Ok(())
    }

    /// Writes what is buffered; returns the rows written.
    pub fn finish(mut self) -> Result<Counts, DbError> {
        self.flush()?;
        Ok(self.counts)
    }
}

/// The columns of a bulk row of `rt`.
pub fn columns(rt: &'static ResourceType) -> impl Iterator<Item = &'static str> {
    Selection::whole(rt).columns().split(", ")
}

/// The columns a bulk row of `rt` is stored with: [`columns`], then the words column of each
/// searchable attribute (see [`with_words`]).
pub fn stored_columns(rt: &'static ResourceType) -> Vec<&'static str> {
    columns(rt).chain(crate::search::columns(rt).map(|(_, how)| how.column)).collect()
}

/// A bulk row of `rt` (in [`columns`] order) with the words of its searchable attributes
/// appended, in [`stored_columns`] order: whatever writes rows in bulk indexes them.
pub fn with_words(rt: &'static ResourceType, row: Vec<Value>) -> Vec<Value> {
    with_known_words(rt, row, &[])
}

/// [`with_words`], taking the words already computed in `known` (words column, words) instead
/// of computing them again.
pub fn with_known_words(rt: &'static ResourceType, mut row: Vec<Value>, known: &[(&'static str, Value)]) -> Vec<Value> {
    let attrs = &Selection::whole(rt).attrs;
    let mut words = Vec::new();
    for (i, attr) in attrs.iter().enumerate() {
        let Some(how) = &attr.search else { continue };
        match known.iter().find(|(column, _)| *column == how.column) {
            Some((_, w)) => words.push(w.clone()),
            None => words.extend(row.get(1 + i).and_then(|v| crate::search::derived(attr, v)).map(|(_, w)| w)),
        }
    }
    row.extend(words);
    row
}

/// Calls `each` with every row of `rt` in id order, in [`Selection::whole`] column order, read
/// a thousand at a time so that memory stays bounded whatever the size of the table.
pub fn read_all(
    tx: &mut dyn Tx,
    rt: &'static ResourceType,
    each: &mut dyn FnMut(Vec<Value>) -> Result<(), DbError>,
) -> Result<(), DbError> {
    let select = format!("SELECT {} FROM {}", Selection::whole(rt).columns(), rt.table);
    let first = format!("{select} ORDER BY id LIMIT {ROWS_PER_READ}");
    let next = format!("{select} WHERE id > ? ORDER BY id LIMIT {ROWS_PER_READ}");
    let width = columns(rt).count();
    let mut after: Option<String> = None;
    loop {
        let mut rows: Vec<Vec<Value>> = Vec::with_capacity(ROWS_PER_READ);
        let mut collect = |r: &dyn Row| rows.push((0..width).map(|i| r.cell(i).to_value()).collect());
        match &after {
            None => tx.query(&first, &[], &mut collect)?,
            Some(id) => tx.query(&next, &[Value::Text(id.clone())], &mut collect)?,
        };
        let Some(last) = rows.last() else { return Ok(()) };
        after = match &last[0] {
            Value::Text(id) => Some(id.clone()),
            _ => return Err(DbError::Other(format!("a row of {} has no text id", rt.table))),
        };
        let done = rows.len() < ROWS_PER_READ;
        for row in rows {
            each(row)?;
        }
        if done {
            return Ok(());
        }
    }
}

/// Readies `tx` for reading the whole database once (see [`read_all`]), in memory that does not
/// grow with the size of the database.
pub fn begin_whole_read(tx: &mut dyn Tx) -> Result<(), DbError> {
    if let Some(sql) = tx.dialect().whole_scan() {
        tx.query(sql, &[], &mut |_| {})?;
    }
    tx.begin_snapshot()
}

/// How many resources `tx`'s database holds, per type.
pub fn counts(tx: &mut dyn Tx) -> Result<Counts, DbError> {
    let mut counts = Counts::default();
    for (i, rt) in TYPES.iter().enumerate() {
        let sql = "SELECT CAST(sum(n) AS BIGINT) FROM row_counts WHERE tbl = ? AND parent = ''";
        counts.0[i] =
            tx.first(sql, &[Value::Text(rt.table.to_owned())])?.and_then(|v| v.cell().as_i64()).unwrap_or(0) as u64;
    }
    Ok(counts)
}
