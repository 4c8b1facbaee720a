//! One page of a collection: filters, sort, paging, and its total.

use super::clauses::{count_of, counted, order_by, where_clause};
use super::paging::STRIDE;
use super::select::{for_each, RowFields, Selection};
use super::tx::{snapshot, Tx, Value};
use crate::error::Result;
use crate::jsonapi::query::{Filter, FilterValue, Query, SortKey};
use crate::resources::{Kind, Relationship, ResourceType};

/// One page of a collection: calls `each` for its rows in order and returns the total count.
/// `scope` restricts it to the children of one parent through a to-many relationship
/// (`/modules/{id}/subjects`).
pub fn list(
    tx: &mut dyn Tx,
    sel: &Selection,
    q: &Query,
    scope: Option<(&Relationship, &str)>,
    each: impl FnMut(&RowFields<'_>),
) -> Result<u64> {
    let rt = sel.rt;
    let dialect = tx.dialect();
    let mut wheres: Vec<String> = Vec::new();
    let mut params: Vec<Value> = Vec::new();
    // Parent constraints (column, parent id; `None` matches nothing): the scope, `filter[rel]`.
    let mut parents: Vec<(&str, Option<&str>)> = Vec::new();
    if let Some((rel, parent)) = scope {
        parents.push((rel.fk.column, Some(parent)));
    }
    for f in &q.filters {
        match f {
            Filter::Parent(rel, parent) => parents.push((rel.fk.column, parent.as_deref())),
            // Read through the column's index as a parent's children are, but counted:
            // `row_counts` keeps the count of each parent's children, not of the rows without one.
            Filter::NoParent(rel) => wheres.push(format!("{} IS NULL", rel.fk.column)),
            Filter::Ids(ids) => {
                wheres.push(dialect.in_ids("id"));
                params.push(Value::Ids(ids.clone()));
            }
            Filter::Equals(attr, v) => {
                wheres.push(format!("{} = ?", attr.name));
                params.push(match v {
                    FilterValue::Text(s) => Value::Text(s.clone()),
                    FilterValue::Bool(b) => Value::Bool(*b),
                    FilterValue::Integer(i) => Value::Int(*i),
                });
            }
            Filter::Nothing => wheres.push("1 = 0".into()),
        }
    }
    if let Some(search) = &q.search {
        add_parents(&parents, &mut wheres, &mut params);
        return super::search::page(tx, sel, q, search, wheres, params, each);
    }
    // The count is kept in `row_counts` for the whole table and for one parent's children.
    let whole = wheres.is_empty() && parents.is_empty();
    let counter = match (wheres.is_empty(), parents.as_slice()) {
        (true, []) => Some((rt.table.to_owned(), String::new())),
        (true, [(column, Some(parent))]) => Some((format!("{}.{column}", rt.table), (*parent).to_owned())),
        _ => None,
    };
    add_parents(&parents, &mut wheres, &mut params);
    let mut filter = where_clause(&wheres);
    let (total, gen) = match counter {
        Some((tbl, parent)) => counted(tx, tbl, parent)?,
        None => (count_of(tx, &format!("SELECT count(*) FROM {}{filter}", rt.table), &params)?, 0),
    };
    let mut offset = q.page.offset();
    if offset >= total {
        return Ok(total);
    }
    if whole && q.in_id_order() && offset >= STRIDE {
        match tx.pages().start(rt.table, gen, offset) {
            Some((key, skip)) => {
                filter = " WHERE id >= ?".into();
                params.push(Value::Text(key));
                offset = skip;
            }
            None => tx.pages().want(rt.table),
        }
    }
    let order = match (q.sort.is_empty(), scope) {
        (true, Some((rel, _))) => rel.fk.children_order.to_owned(),
        (true, None) => "id".to_owned(),
        (false, _) => order_by(rt, &q.sort, None),
    };
    let deep = offset >= STRIDE;
    let sql = match deep.then(|| group_key(rt, &q.sort)).flatten() {
        // A deep page in the order of an attribute: the group of rows with that attribute's
        // value at the offset is found by walking its index alone (from the nearer end), and
        // the page is read from within that group on (see `group_start`).
        Some(key) => {
            let (bound, skip) = group_start(tx, rt.table, &wheres, &params, key, offset, total)?;
            offset = skip;
            let cmp = if key.descending { "<=" } else { ">=" };
            let from = where_clause(
                &[
                    &wheres[..],
                    &[format!("{col} {cmp} (SELECT {col} FROM {} WHERE id = ?)", rt.table, col = key.column)],
                ]
                .concat(),
            );
            params.push(Value::Text(bound));
            format!("SELECT {} FROM {}{from} ORDER BY {order} LIMIT ? OFFSET ?", sel.columns(), rt.table)
        }
        // A deep page steps over its offset by the keys alone (a walk of the index that serves
        // the order, where one does, without visiting a row), then reads its own rows.
        None if deep => format!(
            "SELECT {} FROM {table} WHERE id IN (SELECT id FROM {table}{filter} ORDER BY {order} LIMIT ? OFFSET ?) \
             ORDER BY {order}",
            sel.columns(),
            table = rt.table
        ),
        None => format!("SELECT {} FROM {}{filter} ORDER BY {order} LIMIT ? OFFSET ?", sel.columns(), rt.table),
    };
    params.push(Value::Int(q.page.size as i64));
    params.push(Value::Int(offset.min(i64::MAX as u64) as i64));
    for_each(tx, sel, &sql, &params, each)?;
    Ok(total)
}

/// The first sort key of a deep page that is read from the start of its group (see
/// [`group_start`]): a sortable attribute, each of which has an index of its own (`key`, `id`).
/// Not `id` (whose own pages are found from kept keys or by a walk of the primary key), nor
/// relevance, nor a nullable column (whose nulls the engines place apart).
fn group_key<'q>(rt: &ResourceType, sort: &'q [SortKey]) -> Option<&'q SortKey> {
    let first = sort.first()?;
    rt.attribute(first.column).is_some_and(|a| a.sortable && a.kind != Kind::NullableText).then_some(first)
}

/// Where the row at `offset` of an order whose first key is `key` stands, found without
/// sorting: the rows that share a value of `key` (its group) stand together in that order
/// however the later keys order them within the group, and they stand at the same places in
/// the order of `key`'s own index (`key`, then `id`, both in `key`'s direction), which a walk
/// of the index alone steps through (from its nearer end). Returns the id of the row at
/// `offset` in the index's order (its value of `key` is the group's) and how many rows of the
/// group come before `offset`: the page is then the rows from that group on, in the full
/// order, past that many. `wheres` and `params` are the page's conditions.
fn group_start(
    tx: &mut dyn Tx,
    table: &str,
    wheres: &[String],
    params: &[Value],
    key: &SortKey,
    offset: u64,
    total: u64,
) -> Result<(String, u64)> {
    // The walk starts from whichever end of the index is nearer: the last page costs what the
    // first does, and the middle one a walk over half the rows.
    let backwards = offset >= total / 2;
    let dir = if key.descending != backwards { "DESC" } else { "ASC" };
    let col = key.column;
    let sql = format!("SELECT id FROM {table}{} ORDER BY {col} {dir}, id {dir} LIMIT 1 OFFSET ?", where_clause(wheres));
    let mut args = params.to_vec();
    let steps = if backwards { total - 1 - offset } else { offset };
    args.push(Value::Int(steps.min(i64::MAX as u64) as i64));
    let Some(at) = tx.first(&sql, &args)?.and_then(|v| v.cell().as_str().map(str::to_owned)) else {
        return Ok((String::new(), offset));
    };
    // The rows of the group before `at` in the index's order: those past it by id.
    let before = if key.descending { ">" } else { "<" };
    let same = where_clause(
        &[wheres, &[format!("{col} = (SELECT {col} FROM {table} WHERE id = ?)"), format!("id {before} ?")]].concat(),
    );
    args.pop();
    args.extend([Value::Text(at.clone()), Value::Text(at.clone())]);
    let skip = count_of(tx, &format!("SELECT count(*) FROM {table}{same}"), &args)?;
    Ok((at, skip))
}

/// Adds the conditions of the parents (column, id; `None` matches nothing).
fn add_parents(parents: &[(&str, Option<&str>)], wheres: &mut Vec<String>, params: &mut Vec<Value>) {
    for (column, parent) in parents {
        match parent {
            Some(p) => {
                wheres.push(format!("{column} = ?"));
                params.push(Value::Text((*p).to_owned()));
            }
            None => wheres.push("1 = 0".into()),
        }
    }
}

/// Reads the generation of `table` and its keys at every `STRIDE`-th position, consistently.
pub fn page_keys(tx: &mut dyn Tx, table: &str) -> Result<(i64, Vec<String>)> {
    snapshot(tx, |tx| {
        let sql = "SELECT CAST(sum(gen) AS BIGINT) FROM row_counts WHERE tbl = ? AND parent = ''";
        let gen = tx.first(sql, &[Value::Text(table.to_owned())])?.and_then(|v| v.cell().as_i64()).unwrap_or(0);
        let mut keys = Vec::new();
        let mut i = 0u64;
        tx.query(&format!("SELECT id FROM {table} ORDER BY id"), &[], &mut |r| {
            if i.is_multiple_of(STRIDE) {
                keys.push(r.cell(0).as_str().unwrap_or_default().to_owned());
            }
            i += 1;
        })?;
        Ok((gen, keys))
    })
}
