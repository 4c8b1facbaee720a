//! Writing the lines of a bundle into the target's transaction, a batch of one type at a time:
//! each batch is checked against what the transaction holds (earlier lines included) before it
//! is written, so that a fault names its line.

use std::collections::{HashMap, HashSet};

use crate::resources::{ResourceType, TYPES};
use crate::store::bulk::{Counts, Loader};
use crate::store::{DbError, Selection, Tx, Value};

/// Lines checked and written together.
const BATCH: usize = 100;

/// The temporary table of the ids a merge has seen (so that a repeated id is caught).
const SEEN: &str = "coursed_bundle_seen";

/// One resource line: its row in [`Selection::whole`] column order, its search words appended
/// ([`crate::store::bulk::stored_columns`] order).
pub struct Line {
    pub number: u64,
    pub rt: &'static ResourceType,
    pub row: Vec<Value>,
}

impl Line {
    pub fn id(&self) -> &str {
        match &self.row[0] {
            Value::Text(id) => id,
            _ => "",
        }
    }
    fn fault(&self, detail: impl std::fmt::Display) -> String {
        format!("line {}: {} {}: {detail}", self.number, self.rt.name, self.id())
    }
}

pub struct Apply<'t> {
    loader: Loader<'t>,
    merge: bool,
    batch: Vec<Line>,
    updated: Counts,
    /// Inserted by the upserts of a merge (the loader counts the others).
    upserted: Counts,
    /// Resource lines read, per type (for the trailer).
    seen: Counts,
}

impl<'t> Apply<'t> {
    pub fn new(tx: &'t mut dyn Tx, merge: bool) -> Result<Apply<'t>, DbError> {
        if merge {
            let create = format!(
                "CREATE TEMP TABLE IF NOT EXISTS {SEEN} (tbl TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (tbl, id))"
            );
            tx.execute(&create, &[])?;
            tx.execute(&format!("DELETE FROM {SEEN}"), &[])?;
        }
        let loader = Loader::new(tx);
        Ok(Apply {
            loader,
            merge,
            batch: Vec::with_capacity(BATCH),
            updated: Counts::default(),
            upserted: Counts::default(),
            seen: Counts::default(),
        })
    }

    pub fn push(&mut self, line: Line) -> Result<(), String> {
        if self.batch.first().is_some_and(|b| !std::ptr::eq(b.rt, line.rt)) {
            self.flush()?;
        }
        if let Some(i) = TYPES.iter().position(|t| std::ptr::eq(*t, line.rt)) {
            self.seen.0[i] += 1;
        }
        self.batch.push(line);
        if self.batch.len() == BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the last batch; returns what was inserted and updated, and the lines read.
    pub fn finish(mut self) -> Result<(super::Imported, Counts), String> {
        self.flush()?;
        let mut inserted = self.loader.finish().map_err(|e| format!("writing failed: {e}"))?;
        for (n, more) in inserted.0.iter_mut().zip(self.upserted.0) {
            *n += more;
        }
        Ok((super::Imported { inserted, updated: self.updated, ..Default::default() }, self.seen))
    }

    /// Writes every line pushed so far and lends the transaction (to the revisions that follow
    /// the resources).
    pub fn written(&mut self) -> Result<&mut dyn Tx, String> {
        self.flush()?;
        self.loader.flush().map_err(|e| format!("writing failed: {e}"))?;
        Ok(self.loader.tx())
    }

    fn flush(&mut self) -> Result<(), String> {
        let Some(first) = self.batch.first() else { return Ok(()) };
        let (rt, lines) = (first.rt, (first.number, self.batch[self.batch.len() - 1].number));
        let span = |e: DbError| format!("lines {}-{}: {}: {e}", lines.0, lines.1, rt.name);
        // Rows of earlier batches must be visible to the checks.
        self.loader.flush().map_err(span)?;
        let batch = std::mem::take(&mut self.batch);
        let existing = self.check(&batch).map_err(|e| e.either(span))?;
        if !self.merge {
            for line in batch {
                let number = line.number;
                self.loader.push_stored(rt, line.row).map_err(|e| format!("line {number}: {e}"))?;
            }
            return self.loader.flush().map_err(span);
        }
        // A merge writes the batch as one upsert: new ids inserted, known ones replaced.
        let (total, updates) = (batch.len() as u64, batch.iter().filter(|l| existing.contains(l.id())).count() as u64);
        upsert(self.loader.tx(), rt, batch).map_err(span)?;
        let i = TYPES.iter().position(|t| std::ptr::eq(*t, rt)).unwrap_or(0);
        self.updated.0[i] += updates;
        self.upserted.0[i] += total - updates;
        Ok(())
    }

    /// Checks a batch of one type against itself and the transaction: ids not repeated,
    /// parents present, unique attributes unused. Returns the ids the target already holds
    /// (to update, in a merge).
    fn check(&mut self, batch: &[Line]) -> Result<HashSet<String>, Fault> {
        let rt = batch[0].rt;
        let tx = self.loader.tx();
        let dialect = tx.dialect();
        let mut first_of: HashMap<&str, &Line> = HashMap::with_capacity(batch.len());
        for line in batch {
            if let Some(earlier) = first_of.insert(line.id(), line) {
                return Err(Fault::Line(line.fault(format_args!("the id is also on line {}", earlier.number))));
            }
        }
        let ids = Value::Ids(batch.iter().map(|l| l.id().to_owned()).collect());
        let found = tx.strings(
            &format!("SELECT id FROM {} WHERE {}", rt.table, dialect.in_ids("id")),
            std::slice::from_ref(&ids),
        )?;
        let existing: HashSet<String> = found.into_iter().collect();
        if self.merge {
            let table = Value::Text(rt.table.to_owned());
            let sql = format!("SELECT id FROM {SEEN} WHERE tbl = ? AND {}", dialect.in_ids("id"));
            if let Some(again) = tx.strings(&sql, &[table.clone(), ids])?.first() {
                return Err(Fault::Line(first_of[again.as_str()].fault("the id is on an earlier line too")));
            }
            let values = vec!["(?, ?)"; batch.len()].join(", ");
            let params: Vec<Value> = batch.iter().flat_map(|l| [table.clone(), l.row[0].clone()]).collect();
            tx.execute(&format!("INSERT INTO {SEEN} (tbl, id) VALUES {values}"), &params)?;
        } else if let Some(line) = batch.iter().find(|l| existing.contains(l.id())) {
            // The target was empty: what it holds came from earlier lines.
            return Err(Fault::Line(line.fault("the id is on an earlier line too")));
        }
        let sel = Selection::whole(rt);
        for (i, rel) in sel.to_one.iter().enumerate() {
            let col = 1 + sel.attrs.len() + i;
            let named: Vec<String> = distinct(batch, col);
            if named.is_empty() {
                continue;
            }
            let parent = rel.target();
            let sql = format!("SELECT id FROM {} WHERE {}", parent.table, dialect.in_ids("id"));
            let present = tx.strings(&sql, &[Value::Ids(named)])?;
            if let Some(line) =
                batch.iter().find(|l| text(&l.row[col]).is_some_and(|p| !present.iter().any(|x| x == p)))
            {
                let detail = format!(
                    "relationships.{}: {} {} is neither on an earlier line nor in the database",
                    rel.name,
                    parent.name,
                    text(&line.row[col]).unwrap_or_default()
                );
                return Err(Fault::Line(line.fault(detail)));
            }
        }
        for (i, attr) in sel.attrs.iter().enumerate().filter(|(_, a)| a.unique) {
            let col = 1 + i;
            let mut holder: HashMap<&str, &Line> = HashMap::new();
            for line in batch {
                if let Some(value) = text(&line.row[col]) {
                    if let Some(earlier) = holder.insert(value, line) {
                        let detail = format!("attributes.{}: {value:?} is also on line {}", attr.name, earlier.number);
                        return Err(Fault::Line(line.fault(detail)));
                    }
                }
            }
            if holder.is_empty() {
                continue;
            }
            let values = Value::Ids(holder.keys().map(|v| (*v).to_owned()).collect());
            let sql = format!("SELECT id, {0} FROM {1} WHERE {2}", attr.name, rt.table, dialect.in_ids(attr.name));
            let mut clash = None;
            tx.query(&sql, &[values], &mut |r| {
                let (id, value) = (r.cell(0).as_str().unwrap_or(""), r.cell(1).as_str().unwrap_or(""));
                if let Some(line) = holder.get(value).filter(|l| l.id() != id) {
                    clash.get_or_insert_with(|| {
                        (
                            line.number,
                            line.fault(format_args!(
                                "attributes.{}: {value:?} is already used by {} {id}",
                                attr.name, rt.name
                            )),
                        )
                    });
                }
            })?;
            if let Some((_, fault)) = clash {
                return Err(Fault::Line(fault));
            }
        }
        Ok(existing)
    }
}

/// Writes the rows of `lines` (all of type `rt`, ids distinct) as one statement: ids the target
/// does not hold are inserted, the others replaced (every column the row has).
pub(crate) fn upsert(tx: &mut dyn Tx, rt: &'static ResourceType, lines: Vec<Line>) -> Result<(), DbError> {
    if lines.is_empty() {
        return Ok(());
    }
    let columns = crate::store::bulk::stored_columns(rt);
    let sql = format!(
        "{} ON CONFLICT (id) DO UPDATE SET {}",
        crate::store::dialect::insert_rows(rt.table, &columns, lines.len()),
        columns[1..].iter().map(|c| format!("{c} = excluded.{c}")).collect::<Vec<_>>().join(", ")
    );
    let rows: Vec<Value> = lines.into_iter().flat_map(|l| l.row).collect();
    tx.execute(&sql, &rows).map(drop)
}

/// Why a batch was refused: a line's fault, or the database's.
enum Fault {
    Line(String),
    Db(DbError),
}

impl Fault {
    fn either(self, db: impl FnOnce(DbError) -> String) -> String {
        match self {
            Fault::Line(s) => s,
            Fault::Db(e) => db(e),
        }
    }
}

impl From<DbError> for Fault {
    fn from(e: DbError) -> Fault {
        Fault::Db(e)
    }
}

fn text(v: &Value) -> Option<&str> {
    match v {
        Value::Text(s) => Some(s),
        _ => None,
    }
}

/// The distinct texts of column `col` of the batch.
fn distinct(batch: &[Line], col: usize) -> Vec<String> {
    let mut out: Vec<String> = batch.iter().filter_map(|l| text(&l.row[col]).map(str::to_owned)).collect();
    out.sort_unstable();
    out.dedup();
    out
}
