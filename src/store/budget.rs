//! What a document's budget (see [`Budget`](crate::jsonapi::query::Budget)) lets the store read:
//! rows kept while their bytes and number fit, and the resources an `include` would add, bounded
//! from the counters of children before a row of them is read.

use std::collections::HashSet;

use super::select::{for_each, Fields, Record, Selection};
use super::tx::{Tx, Value};
use crate::error::Result;
use crate::jsonapi::query::Include;
use crate::resources::Relationship;

/// What is left of a document's budget while its resources are read (see
/// [`Budget`](crate::jsonapi::query::Budget)): bytes, and resources it may still include.
#[derive(Debug)]
pub struct Left {
    pub bytes: usize,
    pub resources: usize,
    over: bool,
}

impl Left {
    pub fn new(bytes: usize, resources: usize) -> Left {
        Left { bytes, resources, over: false }
    }

    /// Keeps a copy of `row` in `into` while the budget has room for it; once it has not,
    /// nothing more is kept (the rows after it are stepped over, not copied).
    pub fn keep(&mut self, row: &impl Fields, sel: &Selection, into: &mut Vec<Record>) {
        if self.over {
            return;
        }
        let rec = Record::of(row, sel);
        let size = rec.size();
        if size > self.bytes || self.resources == 0 {
            self.over = true;
            return;
        }
        self.bytes -= size;
        self.resources -= 1;
        into.push(rec);
    }

    /// Whether the rows outgrew the budget.
    pub fn over(&self) -> bool {
        self.over
    }
}

/// [`read_all`] within what is left of a budget; `None` when the rows outgrow it.
pub fn read_within(
    tx: &mut dyn Tx,
    sel: &Selection,
    sql: &str,
    params: &[Value],
    left: &mut Left,
) -> Result<Option<Vec<Record>>> {
    let mut out = Vec::new();
    for_each(tx, sel, sql, params, |f| left.keep(f, sel, &mut out))?;
    Ok((!left.over()).then_some(out))
}

/// At most how many resources `tree` includes for `records` (read with `sel`): each level
/// through a to-many relationship counted from the counters of children (`row_counts`, one
/// statement each, reading no row of the children), each level through a to-one relationship
/// taken as many as the level it comes from. A level reached through the same resource twice
/// counts twice, so this is a bound, never less than what is included.
pub fn included_bound(tx: &mut dyn Tx, sel: &Selection, records: &[Record], tree: &[Include]) -> Result<u64> {
    let ids: Vec<String> = records.iter().map(|r| r.id.clone()).collect();
    let mut bound = 0u64;
    for node in tree {
        let rel = node.rel;
        if rel.is_to_one() {
            // The parents named (each once), and below them what they include.
            let parents: HashSet<&str> = records.iter().filter_map(|r| sel.parent_of(r, rel)).collect();
            let parents: Vec<String> = parents.into_iter().map(str::to_owned).collect();
            bound += parents.len() as u64;
            for child in &node.children {
                bound += below(tx, child, &parents, parents.len() as u64, None)?;
            }
        } else {
            let n = children(tx, rel, &ids)?;
            bound += n;
            for child in &node.children {
                bound += below(tx, child, &ids, n, Some(rel))?;
            }
        }
    }
    Ok(bound)
}

/// The resources the second-level `node` adds below a first level of `level` resources: those
/// of ids `ids` (`via: None`), or the children through `via` of the resources of ids `ids`.
fn below(tx: &mut dyn Tx, node: &Include, ids: &[String], level: u64, via: Option<&Relationship>) -> Result<u64> {
    if node.rel.is_to_one() {
        return Ok(level);
    }
    let Some(via) = via else { return children(tx, node.rel, ids) };
    // The children of the children: their counters, joined to the first level's rows.
    let (first, second) = (via.fk, node.rel.fk);
    let sql = format!(
        "SELECT CAST(coalesce(sum(c.n), 0) AS BIGINT) FROM {t} JOIN row_counts c ON c.tbl = '{}.{}' AND c.parent = {t}.id \
         WHERE {}",
        second.child.table,
        second.column,
        tx.dialect().in_ids(&format!("{}.{}", first.child.table, first.column)),
        t = first.child.table,
    );
    count(tx, &sql, ids)
}

/// How many children the parents of ids `ids` have through the to-many `rel`.
fn children(tx: &mut dyn Tx, rel: &Relationship, ids: &[String]) -> Result<u64> {
    let sql = format!(
        "SELECT CAST(coalesce(sum(n), 0) AS BIGINT) FROM row_counts WHERE tbl = '{}.{}' AND {}",
        rel.fk.child.table,
        rel.fk.column,
        tx.dialect().in_ids("parent")
    );
    count(tx, &sql, ids)
}

fn count(tx: &mut dyn Tx, sql: &str, ids: &[String]) -> Result<u64> {
    let n = tx.first(sql, &[Value::Ids(ids.to_vec())])?.and_then(|v| v.cell().as_i64()).unwrap_or(0);
    Ok(n.max(0) as u64)
}
