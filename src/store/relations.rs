//! The relation-aware queries: related resources, linkage, linkage writes and `include`.
//!
//! Everything here is derived from a [`Relationship`] and its [`ForeignKey`]: the to-one side
//! reads or writes the column of its own row, the to-many side reads or writes the column of the
//! rows that name it. One foreign key therefore answers both directions.
//!
//! [`ForeignKey`]: crate::resources::ForeignKey

use std::collections::{HashMap, HashSet};

use super::budget::{included_bound, read_within, Left};
use super::select::{exists, lock_row, missing, must_exist, not_found, Record, Selection};
use super::tx::{Tx, Value};
use crate::error::{Error, Result};
use crate::jsonapi::body::{singular, Linkage};
use crate::jsonapi::query::{normalize_id, Include, Query};
use crate::resources::Relationship;

/// The linkage of one resource's relationship: `Err(404)` when the resource does not exist.
pub fn linkage(tx: &mut dyn Tx, rel: &Relationship, owner: &str) -> Result<Vec<String>> {
    if rel.is_to_one() {
        return Ok(parent_id(tx, rel, owner)?.into_iter().collect());
    }
    must_exist(tx, rel.fk.parent, owner)?;
    let fk = rel.fk;
    let sql = format!("SELECT id FROM {} WHERE {} = ? ORDER BY {}", fk.child.table, fk.column, fk.children_order);
    Ok(tx.strings(&sql, &[text(owner)])?)
}

/// The parent id of `child` through the to-one `rel` (`None` when unset); 404 if no such child.
pub fn parent_id(tx: &mut dyn Tx, rel: &Relationship, child: &str) -> Result<Option<String>> {
    let fk = rel.fk;
    let sql = format!("SELECT {} FROM {} WHERE id = ?", fk.column, fk.child.table);
    match tx.first(&sql, &[text(child)])? {
        Some(parent) => Ok(parent.cell().as_str().map(str::to_owned)),
        None => Err(not_found(fk.child, child)),
    }
}

/// 404 for every id named in `linkages` that does not exist, all reported at once.
pub fn check_targets_exist(tx: &mut dyn Tx, linkages: &[Linkage]) -> Result<()> {
    let mut problems = Vec::new();
    for l in linkages.iter().filter(|l| !l.ids.is_empty()) {
        let target = l.rel.target();
        // An id that is not a UUID names nothing; only the others are looked up.
        let is_uuid = |(_, id): &(usize, &String)| normalize_id(id).as_deref() == Some(id.as_str());
        let (valid, mut absent): (Vec<_>, Vec<_>) = l.ids.iter().enumerate().partition(is_uuid);
        if let [(index, id)] = valid.as_slice() {
            // One id (a to-one linkage, mostly): a plain primary-key lookup.
            if !exists(tx, target, id)? {
                absent.push((*index, id));
            }
        } else if !valid.is_empty() {
            let sql = format!(
                "SELECT n.key FROM {} WHERE NOT EXISTS (SELECT 1 FROM {} WHERE id = n.value)",
                tx.dialect().ids_table("n"),
                target.table
            );
            let ids = Value::Ids(valid.iter().map(|(_, id)| (*id).clone()).collect());
            let mut keys = Vec::new();
            tx.query(&sql, &[ids], &mut |r| keys.push(r.cell(0).as_i64().unwrap_or(0) as usize))?;
            absent.extend(keys.into_iter().filter_map(|k| valid.get(k).copied()));
        }
        absent.sort_unstable();
        problems.extend(absent.into_iter().map(|(index, id)| missing(target, id).at(l.pointer_of(index))));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::many(problems))
    }
}

/// 403 when a to-one linkage would leave a required parent unset.
pub fn check_parent_allowed(l: &Linkage) -> Result<()> {
    if l.rel.is_to_one() && l.ids.is_empty() && !l.rel.fk.nullable {
        let child = singular(l.rel.fk.child);
        return Err(Error::forbidden(
            l.pointer.clone(),
            format!(
                "A {child} must always belong to a {}; link it to another one instead of null.",
                singular(l.rel.target())
            ),
        ));
    }
    Ok(())
}

/// Sets the to-one relationship of `child` (the relationship endpoint's PATCH).
pub fn set_parent(tx: &mut dyn Tx, l: &Linkage, child: &str) -> Result<()> {
    let fk = l.rel.fk;
    must_exist(tx, fk.child, child)?;
    check_parent_allowed(l)?;
    check_targets_exist(tx, std::slice::from_ref(l))?;
    let parent = Value::text_or_null(l.ids.first().map(String::as_str));
    let sql = format!(
        "UPDATE {} SET {col} = ?, updated_at = ? WHERE id = ? AND {}",
        fk.child.table,
        tx.dialect().distinct(fk.column, "?"),
        col = fk.column
    );
    tx.execute(&sql, &[parent.clone(), Value::Time(crate::time::now_ms()), text(child), parent])?;
    Ok(())
}

/// Whole-set replace of a to-many relationship: the named children move to `parent`, the
/// others are unlinked (or, when they must keep a parent, the write is refused with 403).
pub fn replace_children(tx: &mut dyn Tx, l: &Linkage, parent: &str, now: i64) -> Result<()> {
    lock_parent(tx, l.rel, parent)?;
    unlink(tx, l, parent, now, false)?;
    add_children(tx, l, parent, now)
}

/// Links the named children to `parent` (those already linked are left as they are).
pub fn add_children(tx: &mut dyn Tx, l: &Linkage, parent: &str, now: i64) -> Result<()> {
    lock_parent(tx, l.rel, parent)?;
    let fk = l.rel.fk;
    let d = tx.dialect();
    let sql = format!(
        "UPDATE {} SET {} = ?, updated_at = ? WHERE {} AND {}",
        fk.child.table,
        fk.column,
        d.in_ids("id"),
        d.distinct(fk.column, "?")
    );
    tx.execute(&sql, &[text(parent), Value::Time(now), Value::Ids(l.ids.clone()), text(parent)])?;
    Ok(())
}

/// Unlinks the named children from `parent` (those not linked to it are left as they are).
pub fn remove_children(tx: &mut dyn Tx, l: &Linkage, parent: &str, now: i64) -> Result<()> {
    lock_parent(tx, l.rel, parent)?;
    unlink(tx, l, parent, now, true)
}

/// Takes the parent's row lock before a write that reads and changes the set of its children,
/// where the engine has row locks: a concurrent write that links a child to this parent (its
/// foreign-key check locks the parent row) then waits, and each statement of this one sees the
/// children as they are, so that concurrent whole-set writes end as one of them, never a mix.
fn lock_parent(tx: &mut dyn Tx, rel: &Relationship, parent: &str) -> Result<()> {
    lock_row(tx, rel.fk.parent, parent)
}

/// Unlinks from `parent` the children whose id is (`named`) or is not named in `l`; when the
/// key is not nullable, refuses with 403 if that would leave any child without a parent.
fn unlink(tx: &mut dyn Tx, l: &Linkage, parent: &str, now: i64, named: bool) -> Result<()> {
    let fk = l.rel.fk;
    let d = tx.dialect();
    let which = format!("{} = ? AND {}", fk.column, if named { d.in_ids("id") } else { d.not_in_ids("id") });
    let ids = Value::Ids(l.ids.clone());
    if fk.nullable {
        let sql = format!("UPDATE {} SET {} = NULL, updated_at = ? WHERE {which}", fk.child.table, fk.column);
        tx.execute(&sql, &[Value::Time(now), text(parent), ids])?;
        return Ok(());
    }
    let sql = format!("SELECT id FROM {} WHERE {which} ORDER BY id LIMIT 5", fk.child.table);
    let orphans = tx.strings(&sql, &[text(parent), ids])?;
    if orphans.is_empty() {
        Ok(())
    } else {
        Err(orphan_error(l, &orphans))
    }
}

/// Unlinks every child of `parent` through the nullable to-many `rel` (before deleting it).
pub fn unlink_all_children(tx: &mut dyn Tx, rel: &Relationship, parent: &str, now: i64) -> Result<()> {
    let fk = rel.fk;
    let sql = format!("UPDATE {} SET {col} = NULL, updated_at = ? WHERE {col} = ?", fk.child.table, col = fk.column);
    tx.execute(&sql, &[Value::Time(now), text(parent)])?;
    Ok(())
}

fn orphan_error(l: &Linkage, orphans: &[String]) -> Error {
    let (child, parent) = (l.rel.fk.child, singular(l.rel.fk.parent));
    Error::forbidden(
        l.pointer.clone(),
        format!(
            "Every {} must belong to a {parent}; this would leave {} without one ({}). Move them to another {parent} or delete them first.",
            singular(child),
            child.name,
            orphans.join(", ")
        ),
    )
}

/// The included resources, one group per relationship level; fills the to-many linkage of
/// `records` for included relationships. One query per relationship level for the whole page.
/// What they take counts against `left`, what is left of the document's budget (see
/// [`crate::jsonapi::query::Budget`]): past it, the document's error, and no more is read (each
/// level reads at most one row more than the resources the budget has left).
pub fn include(
    tx: &mut dyn Tx,
    q: &Query,
    sel: &Selection,
    records: &mut [Record],
    left: &mut Left,
) -> Result<Vec<(Selection, Vec<Record>)>> {
    // Past the budget by the counters alone: refused before a row is read.
    if included_bound(tx, sel, records, &q.include)? > left.resources as u64 {
        return Err(q.budget.exceeded());
    }
    let mut seen: HashSet<(&'static str, String)> = records.iter().map(|r| (sel.rt.name, r.id.clone())).collect();
    let mut out = Vec::new();
    include_level(tx, q, sel, records, &q.include, &mut seen, &mut out, left)?;
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn include_level(
    tx: &mut dyn Tx,
    q: &Query,
    sel: &Selection,
    records: &mut [Record],
    tree: &[Include],
    seen: &mut HashSet<(&'static str, String)>,
    out: &mut Vec<(Selection, Vec<Record>)>,
    left: &mut Left,
) -> Result<()> {
    let read = |tx: &mut dyn Tx, sel: &Selection, sql: &str, params: &[Value], left: &mut Left| {
        read_within(tx, sel, sql, params, left)?.ok_or_else(|| q.budget.exceeded())
    };
    for node in tree {
        let (rel, target) = (node.rel, node.rel.target());
        let mut child_sel = Selection::new(target, q.fieldset(target), &node.children);
        let mut loaded = if rel.is_to_one() {
            let mut ids: Vec<String> =
                records.iter().filter_map(|r| sel.parent_of(r, rel)).map(str::to_owned).collect();
            ids.sort_unstable();
            ids.dedup();
            let sql = format!(
                "SELECT {} FROM {} WHERE {} ORDER BY id",
                child_sel.columns(),
                target.table,
                tx.dialect().in_ids("id")
            );
            read(tx, &child_sel, &sql, &[Value::Ids(ids)], left)?
        } else {
            let inverse = rel.inverse();
            child_sel = std::borrow::Cow::Owned(Selection::with_parent(child_sel, inverse));
            let parents: Vec<String> = records.iter().map(|r| r.id.clone()).collect();
            let fk = rel.fk;
            // One row more than the budget's resources tells that it would be exceeded.
            let sql = format!(
                "SELECT {} FROM {} WHERE {} ORDER BY {}, {} LIMIT {}",
                child_sel.columns(),
                target.table,
                tx.dialect().in_ids(fk.column),
                fk.column,
                fk.children_order,
                left.resources.saturating_add(1).min(i64::MAX as usize),
            );
            let loaded = read(tx, &child_sel, &sql, &[Value::Ids(parents)], left)?;
            let mut by_parent: HashMap<&str, Vec<String>> = HashMap::new();
            for child in &loaded {
                if let Some(parent) = child_sel.parent_of(child, inverse) {
                    by_parent.entry(parent).or_default().push(child.id.clone());
                }
            }
            for rec in records.iter_mut() {
                rec.children.push((rel, by_parent.remove(rec.id.as_str()).unwrap_or_default()));
            }
            loaded
        };
        include_level(tx, q, &child_sel, &mut loaded, &node.children, seen, out, left)?;
        loaded.retain(|r| seen.insert((target.name, r.id.clone())));
        out.push((child_sel.into_owned(), loaded));
    }
    Ok(())
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}
