//! Create, update and delete of a resource, driven by its declaration.

use super::relations;
use super::select::{get, missing, must_exist, not_found, Record, Selection};
use super::tx::{DbError, Tx, Value};
use crate::error::{Error, Problem, Result};
use crate::jsonapi::body::{singular, Changes, Linkage};
use crate::resources::ResourceType;
use crate::store::Atomicity;

/// How much of a create or update with `changes` must be one transaction: with no to-many
/// linkage it changes only the resource's own row, in one statement.
pub fn atomicity(changes: &Changes) -> Atomicity {
    if changes.relationships.iter().all(|l| l.rel.is_to_one()) {
        Atomicity::OneStatement
    } else {
        Atomicity::Transaction
    }
}

/// How much of a delete of `rt` must be one transaction: unlinking children through a nullable
/// key is a statement of its own; deleting children with their parent is the schema's cascade,
/// part of the one delete.
pub fn delete_atomicity(rt: &ResourceType) -> Atomicity {
    if rt.relationships.iter().any(|r| !r.is_to_one() && r.fk.nullable) {
        Atomicity::Transaction
    } else {
        Atomicity::OneStatement
    }
}

/// Inserts a new resource and its relationships; returns it as stored (every column of
/// [`Selection::tagged`], read back by the same statement).
pub fn create(tx: &mut dyn Tx, rt: &'static ResourceType, changes: &Changes) -> Result<Record> {
    create_as(tx, rt, uuid::Uuid::now_v7().hyphenated().to_string(), None, changes)
}

/// [`create`] under the id `id`, created at `created` (ms; now when `None`): a deleted
/// resource restored from its history.
pub fn create_as(
    tx: &mut dyn Tx,
    rt: &'static ResourceType,
    id: String,
    created: Option<i64>,
    changes: &Changes,
) -> Result<Record> {
    let now = crate::time::now_ms();
    let to_many = changes.relationships.iter().any(|l| !l.rel.is_to_one());
    if to_many {
        relations::check_targets_exist(tx, &changes.relationships)?;
    }
    let mut columns = vec!["id", "created_at", "updated_at"];
    let mut values = vec![Value::Text(id.clone()), Value::Time(created.unwrap_or(now)), Value::Time(now)];
    for (attr, value) in &changes.attributes {
        columns.push(attr.name);
        values.push(value.clone());
    }
    super::search::add_words(&changes.words, &mut columns, &mut values);
    // Without to-many linkage the parents are checked by the insert itself: it inserts only if
    // every parent named exists (one statement instead of one more per parent); only when it
    // inserted nothing are they looked up, to say which is missing.
    let mut guards = Vec::new();
    for l in changes.relationships.iter().filter(|l| l.rel.is_to_one()) {
        relations::check_parent_allowed(l)?;
        columns.push(l.rel.fk.column);
        values.push(Value::text_or_null(l.ids.first().map(String::as_str)));
        if let (false, Some(parent)) = (to_many, l.ids.first()) {
            guards.push(format!("EXISTS (SELECT 1 FROM {} WHERE id = ?)", l.rel.target().table));
            values.push(Value::Text(parent.clone()));
        }
    }
    let marks = vec!["?"; columns.len()].join(", ");
    let rows = if guards.is_empty() {
        format!("VALUES ({marks})")
    } else {
        format!("SELECT {marks} WHERE {}", guards.join(" AND "))
    };
    let sql = format!("INSERT INTO {} ({}) {rows}{}", rt.table, columns.join(", "), returning(rt));
    let Some(rec) = returned(tx, rt, &sql, &values)? else {
        relations::check_targets_exist(tx, &changes.relationships)?;
        // Gone and back between the two statements: as good as missing.
        let l = changes.relationships.iter().find(|l| l.rel.is_to_one() && !l.ids.is_empty());
        return Err(match l {
            Some(l) => missing(l.rel.target(), &l.ids[0]).at(l.pointer_of(0)).into(),
            None => Error::internal("an insert without guards inserted nothing"),
        });
    };
    finish_children(tx, rt, &id, changes, Some(rec), now)
}

/// Writes the to-many linkage of `changes` for resource `id`, returned as `rec` by its own
/// statement (`None`: not written by it). Reads the resource, with the generation of its
/// linkage, when that changed it or it was not returned: after its children are replaced, since
/// replacing them locks it, and a resource that was not updated may have changed meanwhile.
fn finish_children(
    tx: &mut dyn Tx,
    rt: &'static ResourceType,
    id: &str,
    changes: &Changes,
    rec: Option<Record>,
    now: i64,
) -> Result<Record> {
    let mut linked = false;
    for l in changes.relationships.iter().filter(|l| !l.rel.is_to_one()) {
        relations::replace_children(tx, l, id, now)?;
        linked = true;
    }
    match rec {
        Some(rec) if !linked => Ok(rec),
        _ => get(tx, Selection::tagged(rt), id)?.ok_or_else(|| not_found(rt, id)),
    }
}

/// Inserts new resources of `rt` in one statement: `items` are the id each gets and what it
/// sets, all the same attributes and to-one relationships, none to-many. Returns them as
/// stored, in order; `None`, before anything is written, when they are not all alike or a
/// parent they name does not exist or may not be null; a 409 when a duplicate is refused (run
/// it under [`attempt`], and create them one by one with [`create`] to learn which one fails).
pub fn create_batch(
    tx: &mut dyn Tx,
    rt: &'static ResourceType,
    items: &[(String, &Changes)],
) -> Result<Option<Vec<Record>>> {
    let Some((_, first)) = items.first() else { return Ok(Some(Vec::new())) };
    let now = crate::time::now_ms();
    let mut columns = vec!["id", "created_at", "updated_at"];
    columns.extend(first.attributes.iter().map(|(a, _)| a.name));
    columns.extend(first.relationships.iter().map(|l| l.rel.fk.column));
    columns.extend(first.words.iter().map(|(c, _)| *c));
    let mut values = Vec::with_capacity(items.len() * columns.len());
    for (id, changes) in items {
        let same = changes.attributes.len() == first.attributes.len()
            && changes.relationships.len() == first.relationships.len()
            && changes.attributes.iter().zip(&first.attributes).all(|((a, _), (b, _))| std::ptr::eq(*a, *b))
            && changes.relationships.iter().zip(&first.relationships).all(|(a, b)| std::ptr::eq(a.rel, b.rel));
        if !same
            || changes.relationships.iter().any(|l| !l.rel.is_to_one() || relations::check_parent_allowed(l).is_err())
        {
            return Ok(None);
        }
        values.extend([Value::Text(id.clone()), Value::Time(now), Value::Time(now)]);
        values.extend(changes.attributes.iter().map(|(_, v)| v.clone()));
        values.extend(changes.relationships.iter().map(|l| Value::text_or_null(l.ids.first().map(String::as_str))));
        super::search::add_words(&changes.words, &mut Vec::new(), &mut values);
    }
    // The parents named, each looked up once (on PostgreSQL a foreign-key violation would read
    // as a concurrent change).
    let parents: Vec<Linkage> = first
        .relationships
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut ids: Vec<String> =
                items.iter().filter_map(|(_, c)| c.relationships[i].ids.first().cloned()).collect();
            ids.sort_unstable();
            ids.dedup();
            Linkage { rel: l.rel, ids, pointer: String::new() }
        })
        .collect();
    match relations::check_targets_exist(tx, &parents) {
        Ok(()) => {}
        Err(e) if e.status == warp::http::StatusCode::NOT_FOUND => return Ok(None),
        Err(e) => return Err(e),
    }
    let sql = format!("{}{}", super::dialect::insert_rows(rt.table, &columns, items.len()), returning(rt));
    let sel = Selection::tagged(rt);
    let mut stored = std::collections::HashMap::with_capacity(items.len());
    tx.query(&sql, &values, &mut |row| {
        let rec = sel.record(row);
        stored.insert(rec.id.clone(), rec);
    })
    .map_err(|e| unique_violation(rt, e))?;
    let recs: Option<Vec<Record>> = items.iter().map(|(id, _)| stored.remove(id)).collect();
    recs.map(Some).ok_or_else(|| Error::internal("a batch insert returned fewer rows than it inserted"))
}

/// Runs `f` under a savepoint: when it gives up (`None`) or fails for the request's own
/// reasons, what it wrote is undone and the transaction goes on (`None`); a database that
/// cannot take the write now is an error, as for any write.
pub fn attempt<T>(tx: &mut dyn Tx, f: impl FnOnce(&mut dyn Tx) -> Result<Option<T>>) -> Result<Option<T>> {
    tx.execute("SAVEPOINT coursed_attempt", &[])?;
    match f(tx) {
        Ok(Some(value)) => {
            tx.execute("RELEASE SAVEPOINT coursed_attempt", &[])?;
            Ok(Some(value))
        }
        Err(e) if e.status == warp::http::StatusCode::SERVICE_UNAVAILABLE => Err(e),
        _ => {
            tx.execute("ROLLBACK TO SAVEPOINT coursed_attempt", &[])?;
            tx.execute("RELEASE SAVEPOINT coursed_attempt", &[])?;
            Ok(None)
        }
    }
}

/// Applies a partial update (absent attributes and relationships keep their values); returns
/// the resource as stored. An update that changes nothing a client can see in the row (the
/// values it already has, or only a to-many set, whose rows are the children's) leaves the
/// row, and its `updated_at`, as it was.
pub fn update(tx: &mut dyn Tx, rt: &'static ResourceType, id: &str, changes: &Changes) -> Result<Record> {
    if !changes.relationships.is_empty() {
        // A missing resource is reported before missing related ones.
        must_exist(tx, rt, id)?;
    }
    let now = crate::time::now_ms();
    relations::check_targets_exist(tx, &changes.relationships)?;
    let dialect = tx.dialect();
    let mut sets = vec!["updated_at = ?".to_owned()];
    let mut values = vec![Value::Time(now)];
    // What the client sets, compared with what is stored: a write that changes nothing a
    // client can see leaves the row (and its `updated_at`) as it was.
    let mut differs = Vec::new();
    let mut current = Vec::new();
    let mut words = Vec::new();
    for (attr, value) in &changes.attributes {
        sets.push(format!("{} = ?", attr.name));
        values.push(value.clone());
        differs.push(dialect.distinct(attr.name, "?"));
        current.push(value.clone());
    }
    super::search::add_words(&changes.words, &mut words, &mut values);
    sets.extend(words.iter().map(|c| format!("{c} = ?")));
    for l in changes.relationships.iter().filter(|l| l.rel.is_to_one()) {
        relations::check_parent_allowed(l)?;
        let parent = Value::text_or_null(l.ids.first().map(String::as_str));
        sets.push(format!("{} = ?", l.rel.fk.column));
        values.push(parent.clone());
        differs.push(dialect.distinct(l.rel.fk.column, "?"));
        current.push(parent);
    }
    let rec = if differs.is_empty() {
        None
    } else {
        values.push(Value::Text(id.to_owned()));
        values.extend(current);
        let sql = format!(
            "UPDATE {} SET {} WHERE id = ? AND ({}){}",
            rt.table,
            sets.join(", "),
            differs.join(" OR "),
            returning(rt)
        );
        returned(tx, rt, &sql, &values)?
    };
    // Nothing updated: `finish_children` reads the resource as it is, if it exists.
    finish_children(tx, rt, id, changes, rec, now)
}

/// ` RETURNING` every column of the type and the generation of its linkage, so that a write
/// reads back its row (and its entity tag) in its own statement.
fn returning(rt: &'static ResourceType) -> String {
    format!(" RETURNING {}", Selection::tagged(rt).columns())
}

/// The row a write statement returned, if any; a duplicate of a unique attribute is a 409.
fn returned(tx: &mut dyn Tx, rt: &'static ResourceType, sql: &str, values: &[Value]) -> Result<Option<Record>> {
    let sel = Selection::tagged(rt);
    let mut rec = None;
    tx.query(sql, values, &mut |row| rec = rec.take().or_else(|| Some(sel.record(row))))
        .map_err(|e| unique_violation(rt, e))?;
    Ok(rec)
}

/// Deletes a resource: children through nullable keys are unlinked (their `updated_at` moves),
/// children through not-null keys are deleted with it (the schema's cascade).
pub fn delete(tx: &mut dyn Tx, rt: &'static ResourceType, id: &str) -> Result<()> {
    must_exist(tx, rt, id)?;
    let now = crate::time::now_ms();
    for rel in rt.relationships.iter().filter(|r| !r.is_to_one() && r.fk.nullable) {
        relations::unlink_all_children(tx, rel, id, now)?;
    }
    tx.execute(&format!("DELETE FROM {} WHERE id = ?", rt.table), &[Value::Text(id.to_owned())])?;
    Ok(())
}

/// A duplicate of a unique attribute is the client's conflict (409), anything else a fault.
fn unique_violation(rt: &ResourceType, e: DbError) -> Error {
    let dup = match &e {
        DbError::Unique { table, column } if table == rt.table => {
            rt.attributes.iter().find(|a| a.unique && a.name == column)
        }
        _ => None,
    };
    match dup {
        Some(a) => Problem::new(
            warp::http::StatusCode::CONFLICT,
            "duplicate",
            format!("Another {} already has this `{}`; it must be unique.", singular(rt), a.name),
        )
        .at(format!("/data/attributes/{}", a.name))
        .into(),
        None => e.into(),
    }
}
