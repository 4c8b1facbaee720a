//! The relation-aware queries: related resources, linkage, linkage writes and `include`.
//!
//! Everything here is derived from a [`Relationship`] and its [`ForeignKey`]: the to-one side
//! reads or writes the column of its own row, the to-many side reads or writes the column of the
//! rows that name it. One foreign key therefore answers both directions.
//!
//! [`ForeignKey`]: crate::resources::ForeignKey

use std::collections::{HashMap, HashSet};

use rusqlite::types::Value;
use rusqlite::Connection;

use crate::error::{Error, Result};
use crate::jsonapi::body::{singular, Linkage};
use crate::jsonapi::query::{Include, Query};
use crate::resources::Relationship;
use crate::store::{self, Record, Selection};

/// The linkage of one resource's relationship: `Err(404)` when the resource does not exist.
pub fn linkage(conn: &Connection, rel: &Relationship, owner: &str) -> Result<Vec<String>> {
    if rel.is_to_one() {
        return Ok(parent_id(conn, rel, owner)?.into_iter().collect());
    }
    let owner_type = rel.fk.parent;
    if !store::exists(conn, owner_type, owner)? {
        return Err(store::not_found(owner_type, owner));
    }
    let fk = rel.fk;
    let sql = format!("SELECT id FROM {} WHERE {} = ?1 ORDER BY {}", fk.child.table, fk.column, fk.children_order);
    let mut st = conn.prepare_cached(&sql)?;
    let ids = st.query_map([owner], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    Ok(ids)
}

/// The parent id of `child` through the to-one `rel` (`None` when unset); 404 if no such child.
pub fn parent_id(conn: &Connection, rel: &Relationship, child: &str) -> Result<Option<String>> {
    let fk = rel.fk;
    let sql = format!("SELECT {} FROM {} WHERE id = ?1", fk.column, fk.child.table);
    let mut st = conn.prepare_cached(&sql)?;
    let mut rows = st.query([child])?;
    match rows.next()? {
        Some(row) => Ok(row.get(0)?),
        None => Err(store::not_found(fk.child, child)),
    }
}

/// 404 for every id named in `linkages` that does not exist, all reported at once.
pub fn check_targets_exist(conn: &Connection, linkages: &[Linkage]) -> Result<()> {
    let mut problems = Vec::new();
    for l in linkages.iter().filter(|l| !l.ids.is_empty()) {
        let target = l.rel.target();
        if let [id] = l.ids.as_slice() {
            // One id (a to-one linkage, mostly): a plain primary-key lookup.
            if !store::exists(conn, target, id)? {
                problems.push(store::missing(target, id).at(l.pointer_of(0)));
            }
            continue;
        }
        let sql = format!(
            "SELECT key, value FROM json_each(?1) WHERE NOT EXISTS (SELECT 1 FROM {} WHERE id = json_each.value)",
            target.table
        );
        let mut st = conn.prepare_cached(&sql)?;
        let missing = st.query_map([ids_json(&l.ids)], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        for m in missing {
            let (index, id) = m?;
            problems.push(store::missing(target, &id).at(l.pointer_of(index as usize)));
        }
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
pub fn set_parent(conn: &Connection, l: &Linkage, child: &str) -> Result<()> {
    let fk = l.rel.fk;
    if !store::exists(conn, fk.child, child)? {
        return Err(store::not_found(fk.child, child));
    }
    check_parent_allowed(l)?;
    check_targets_exist(conn, std::slice::from_ref(l))?;
    let parent = l.ids.first().map_or(Value::Null, |p| Value::Text(p.clone()));
    let sql = format!(
        "UPDATE {} SET {col} = ?1, updated_at = ?2 WHERE id = ?3 AND {col} IS NOT ?1",
        fk.child.table,
        col = fk.column
    );
    conn.prepare_cached(&sql)?.execute(rusqlite::params![parent, store::now(), child])?;
    Ok(())
}

/// Whole-set replace of a to-many relationship: the named children move to `parent`, the
/// others are unlinked (or, when they must keep a parent, the write is refused with 403).
pub fn replace_children(conn: &Connection, l: &Linkage, parent: &str, now: &str) -> Result<()> {
    unlink(conn, l, parent, now, "NOT IN")?;
    add_children(conn, l, parent, now)
}

/// Links the named children to `parent` (those already linked are left as they are).
pub fn add_children(conn: &Connection, l: &Linkage, parent: &str, now: &str) -> Result<()> {
    let fk = l.rel.fk;
    let sql = format!(
        "UPDATE {} SET {col} = ?1, updated_at = ?3 WHERE id IN (SELECT value FROM json_each(?2)) AND {col} IS NOT ?1",
        fk.child.table,
        col = fk.column
    );
    conn.prepare_cached(&sql)?.execute(rusqlite::params![parent, ids_json(&l.ids), now])?;
    Ok(())
}

/// Unlinks the named children from `parent` (those not linked to it are left as they are).
pub fn remove_children(conn: &Connection, l: &Linkage, parent: &str, now: &str) -> Result<()> {
    unlink(conn, l, parent, now, "IN")
}

/// Unlinks from `parent` the children whose id is (`IN`) or is not (`NOT IN`) named in `l`; when
/// the key is not nullable, refuses with 403 if that would leave any child without a parent.
fn unlink(conn: &Connection, l: &Linkage, parent: &str, now: &str, named: &str) -> Result<()> {
    let fk = l.rel.fk;
    let which = format!("{} = ?1 AND id {named} (SELECT value FROM json_each(?2))", fk.column);
    let ids = ids_json(&l.ids);
    if fk.nullable {
        let sql = format!("UPDATE {} SET {} = NULL, updated_at = ?3 WHERE {which}", fk.child.table, fk.column);
        conn.prepare_cached(&sql)?.execute(rusqlite::params![parent, ids, now])?;
        return Ok(());
    }
    let sql = format!("SELECT id FROM {} WHERE {which} ORDER BY id LIMIT 5", fk.child.table);
    let orphans: Vec<String> = conn
        .prepare_cached(&sql)?
        .query_map(rusqlite::params![parent, ids], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    if orphans.is_empty() {
        Ok(())
    } else {
        Err(orphan_error(l, &orphans))
    }
}

/// Unlinks every child of `parent` through the nullable to-many `rel` (before deleting it).
pub fn unlink_all_children(conn: &Connection, rel: &Relationship, parent: &str, now: &str) -> Result<()> {
    let fk = rel.fk;
    let sql = format!("UPDATE {} SET {col} = NULL, updated_at = ?2 WHERE {col} = ?1", fk.child.table, col = fk.column);
    conn.prepare_cached(&sql)?.execute([parent, now])?;
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
pub fn include(
    conn: &Connection,
    q: &Query,
    sel: &Selection,
    records: &mut [Record],
) -> Result<Vec<(Selection, Vec<Record>)>> {
    let mut seen: HashSet<(&'static str, String)> = records.iter().map(|r| (sel.rt.name, r.id.clone())).collect();
    let mut out = Vec::new();
    include_level(conn, q, sel, records, &q.include, &mut seen, &mut out)?;
    Ok(out)
}

fn include_level(
    conn: &Connection,
    q: &Query,
    sel: &Selection,
    records: &mut [Record],
    tree: &[Include],
    seen: &mut HashSet<(&'static str, String)>,
    out: &mut Vec<(Selection, Vec<Record>)>,
) -> Result<()> {
    for node in tree {
        let (rel, target) = (node.rel, node.rel.target());
        let mut child_sel = Selection::new(target, q.fieldset(target), &node.children);
        let mut loaded = if rel.is_to_one() {
            let mut ids: Vec<&str> = records.iter().filter_map(|r| sel.parent_of(r, rel)).collect();
            ids.sort_unstable();
            ids.dedup();
            let sql = format!(
                "SELECT {} FROM {} WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id",
                child_sel.columns(),
                target.table
            );
            store::read_all(conn, &child_sel, &sql, &[Value::Text(ids_json(&ids))])?
        } else {
            let inverse = rel.inverse();
            child_sel = child_sel.with_parent(inverse);
            let parents: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
            let fk = rel.fk;
            let sql = format!(
                "SELECT {} FROM {} WHERE {col} IN (SELECT value FROM json_each(?1)) ORDER BY {col}, {}",
                child_sel.columns(),
                target.table,
                fk.children_order,
                col = fk.column
            );
            let loaded = store::read_all(conn, &child_sel, &sql, &[Value::Text(ids_json(&parents))])?;
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
        include_level(conn, q, &child_sel, &mut loaded, &node.children, seen, out)?;
        loaded.retain(|r| seen.insert((target.name, r.id.clone())));
        out.push((child_sel, loaded));
    }
    Ok(())
}

fn ids_json<S: AsRef<str>>(ids: &[S]) -> String {
    let list: Vec<&str> = ids.iter().map(AsRef::as_ref).collect();
    serde_json::to_string(&list).unwrap_or_else(|_| "[]".into())
}
