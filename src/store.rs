//! Generic list / get / create / update / delete, driven by a resource declaration.
//!
//! SQL text is built only from declared names; every value is bound.

use std::sync::OnceLock;

use rusqlite::types::{Value, ValueRef};
use rusqlite::{params_from_iter, Connection, OptionalExtension, Row};

use crate::db::Db;
use crate::error::{Error, Problem, Result};
use crate::jsonapi::body::{singular, Changes};
use crate::jsonapi::query::{Filter, FilterValue, Include, Query};
use crate::paging;
use crate::relations;
use crate::resources::{Attribute, Relationship, ResourceType, TYPES};

/// Which columns of a type to read and which members to render (sparse fieldsets, include).
#[derive(Debug, Clone)]
pub struct Selection {
    pub rt: &'static ResourceType,
    /// Attributes rendered, in declaration order.
    pub attrs: Vec<&'static Attribute>,
    /// To-one relationships whose column is read (rendered, included, or needed for grouping).
    pub to_one: Vec<&'static Relationship>,
    /// Relationships rendered.
    pub rels: Vec<&'static Relationship>,
    columns: String,
    by_id: String,
}

/// What rendering reads of a resource: an owned [`Record`], or a SQLite row being stepped.
pub trait Fields {
    fn id(&self) -> &str;
    /// Attribute `i` of the selection.
    fn attr(&self, i: usize) -> ValueRef<'_>;
    /// The parent id through to-one relationship `i` of the selection, if set.
    fn parent(&self, i: usize) -> Option<&str>;
    /// To-many linkage, known for relationships named in `include`.
    fn children(&self, rel: &Relationship) -> Option<&[String]>;
}

/// One resource, read and kept (for `include`, which needs the whole page before rendering).
#[derive(Debug, Clone)]
pub struct Record {
    pub id: String,
    pub attrs: Vec<Value>,
    pub parents: Vec<Option<String>>,
    pub children: Vec<(&'static Relationship, Vec<String>)>,
}

impl Fields for Record {
    fn id(&self) -> &str {
        &self.id
    }
    fn attr(&self, i: usize) -> ValueRef<'_> {
        self.attrs.get(i).map_or(ValueRef::Null, ValueRef::from)
    }
    fn parent(&self, i: usize) -> Option<&str> {
        self.parents.get(i)?.as_deref()
    }
    fn children(&self, rel: &Relationship) -> Option<&[String]> {
        self.children.iter().find(|(r, _)| std::ptr::eq(*r, rel)).map(|(_, ids)| ids.as_slice())
    }
}

/// A row selected with [`Selection::columns`], read in place (no copies).
pub struct RowFields<'a, 'r> {
    row: &'a Row<'r>,
    attrs: usize,
}

fn text(v: ValueRef<'_>) -> Option<&str> {
    match v {
        ValueRef::Text(t) => std::str::from_utf8(t).ok(),
        _ => None,
    }
}

impl Fields for RowFields<'_, '_> {
    fn id(&self) -> &str {
        self.row.get_ref(0).ok().and_then(text).unwrap_or("")
    }
    fn attr(&self, i: usize) -> ValueRef<'_> {
        self.row.get_ref(1 + i).unwrap_or(ValueRef::Null)
    }
    fn parent(&self, i: usize) -> Option<&str> {
        self.row.get_ref(1 + self.attrs + i).ok().and_then(text)
    }
    fn children(&self, _: &Relationship) -> Option<&[String]> {
        None
    }
}

impl Record {
    pub fn of(f: &impl Fields, sel: &Selection) -> Record {
        Record {
            id: f.id().to_owned(),
            attrs: (0..sel.attrs.len()).map(|i| owned(f.attr(i))).collect(),
            parents: (0..sel.to_one.len()).map(|i| f.parent(i).map(str::to_owned)).collect(),
            children: Vec::new(),
        }
    }
}

fn owned(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

impl Selection {
    /// Everything of `rt` in `fieldset` (all when `None`), plus the columns `include` needs.
    pub fn new(rt: &'static ResourceType, fieldset: Option<&[String]>, include: &[Include]) -> Selection {
        if fieldset.is_none() && include.is_empty() {
            return Selection::whole(rt).clone();
        }
        Selection::build(rt, fieldset, include)
    }

    /// The selection of every field of `rt`, built once.
    pub fn whole(rt: &'static ResourceType) -> &'static Selection {
        static WHOLE: OnceLock<Vec<Selection>> = OnceLock::new();
        let all = WHOLE.get_or_init(|| TYPES.iter().map(|t| Selection::build(t, None, &[])).collect());
        all.iter().find(|s| std::ptr::eq(s.rt, rt)).expect("every type is in the registry")
    }

    fn build(rt: &'static ResourceType, fieldset: Option<&[String]>, include: &[Include]) -> Selection {
        let wants = |name: &str| fieldset.is_none_or(|f| f.iter().any(|x| x == name));
        let attrs = rt.attributes.iter().filter(|a| wants(a.name)).collect();
        let rels = rt.relationships.iter().filter(|r| wants(r.name)).collect();
        let to_one = rt.to_one().filter(|r| wants(r.name) || include.iter().any(|i| std::ptr::eq(i.rel, *r))).collect();
        let mut sel = Selection { rt, attrs, to_one, rels, columns: String::new(), by_id: String::new() };
        sel.build_columns();
        sel
    }

    /// Also reads the column of the to-one relationship `rel` (to group rows by parent).
    pub fn with_parent(mut self, rel: &'static Relationship) -> Selection {
        if !self.to_one.iter().any(|r| std::ptr::eq(*r, rel)) {
            self.to_one.push(rel);
            self.build_columns();
        }
        self
    }

    fn build_columns(&mut self) {
        let mut cols = vec!["id"];
        cols.extend(self.attrs.iter().map(|a| a.name));
        cols.extend(self.to_one.iter().map(|r| r.fk.column));
        self.columns = cols.join(", ");
        self.by_id = format!("SELECT {} FROM {} WHERE id = ?1", self.columns, self.rt.table);
    }

    /// The column list of a `SELECT`.
    pub fn columns(&self) -> &str {
        &self.columns
    }

    /// Views a row selected with [`Selection::columns`].
    pub fn fields<'a, 'r>(&self, row: &'a Row<'r>) -> RowFields<'a, 'r> {
        RowFields { row, attrs: self.attrs.len() }
    }

    /// The parent id of `rec` through the to-one `rel`, if read and set.
    pub fn parent_of<'r>(&self, rec: &'r impl Fields, rel: &Relationship) -> Option<&'r str> {
        let i = self.to_one.iter().position(|r| std::ptr::eq(*r, rel))?;
        rec.parent(i)
    }
}

/// Calls `each` with the row of resource `id`; `false` when there is none.
pub fn get_with(conn: &Connection, sel: &Selection, id: &str, each: impl FnOnce(&RowFields<'_, '_>)) -> Result<bool> {
    let mut st = conn.prepare_cached(&sel.by_id)?;
    let mut rows = st.query([id])?;
    Ok(match rows.next()? {
        Some(row) => {
            each(&sel.fields(row));
            true
        }
        None => false,
    })
}

/// The resource `id`, or `None`.
pub fn get(conn: &Connection, sel: &Selection, id: &str) -> Result<Option<Record>> {
    let mut rec = None;
    get_with(conn, sel, id, |f| rec = Some(Record::of(f, sel)))?;
    Ok(rec)
}

/// Reads the resources of `sql` (a statement selecting [`Selection::columns`]).
pub fn read_all(conn: &Connection, sel: &Selection, sql: &str, params: &[Value]) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    for_each(conn, sel, sql, params, |f| out.push(Record::of(f, sel)))?;
    Ok(out)
}

fn for_each(
    conn: &Connection,
    sel: &Selection,
    sql: &str,
    params: &[Value],
    mut each: impl FnMut(&RowFields<'_, '_>),
) -> Result<usize> {
    let mut st = conn.prepare_cached(sql)?;
    let mut rows = st.query(params_from_iter(params))?;
    let mut n = 0;
    while let Some(row) = rows.next()? {
        each(&sel.fields(row));
        n += 1;
    }
    Ok(n)
}

/// One page of a collection: calls `each` for its rows in order and returns the total count.
/// `scope` restricts it to the children of one parent through a to-many relationship
/// (`/modules/{id}/subjects`).
pub fn list(
    db: &Db,
    conn: &Connection,
    sel: &Selection,
    q: &Query,
    scope: Option<(&Relationship, &str)>,
    each: impl FnMut(&RowFields<'_, '_>),
) -> Result<u64> {
    let rt = sel.rt;
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
            Filter::Ids(ids) => {
                wheres.push("id IN (SELECT value FROM json_each(?))".into());
                params.push(Value::Text(serde_json::to_string(ids).unwrap_or_default()));
            }
            Filter::Equals(attr, v) => {
                wheres.push(format!("{} = ?", attr.name));
                params.push(match v {
                    FilterValue::Text(s) => Value::Text(s.clone()),
                    FilterValue::Bool(b) => Value::Integer(i64::from(*b)),
                    FilterValue::Integer(i) => Value::Integer(*i),
                });
            }
        }
    }
    // The count is kept in `row_counts` for the whole table and for one parent's children.
    let whole = wheres.is_empty() && parents.is_empty();
    let counter = match (wheres.is_empty(), parents.as_slice()) {
        (true, []) => Some((rt.table.to_owned(), String::new())),
        (true, [(column, Some(parent))]) => Some((format!("{}.{column}", rt.table), (*parent).to_owned())),
        _ => None,
    };
    for (column, parent) in parents {
        match parent {
            Some(p) => {
                wheres.push(format!("{column} = ?"));
                params.push(Value::Text(p.to_owned()));
            }
            None => wheres.push("0".into()),
        }
    }
    let mut filter = if wheres.is_empty() { String::new() } else { format!(" WHERE {}", wheres.join(" AND ")) };

    let (total, gen) = match &counter {
        Some((tbl, parent)) => conn
            .prepare_cached("SELECT n, gen FROM row_counts WHERE tbl = ?1 AND parent = ?2")?
            .query_row([tbl, parent], |r| Ok((r.get::<_, i64>(0)?.max(0) as u64, r.get::<_, i64>(1)?)))
            .optional()?
            .unwrap_or((0, 0)),
        None => {
            let sql = format!("SELECT count(*) FROM {}{filter}", rt.table);
            (conn.prepare_cached(&sql)?.query_row(params_from_iter(&params), |r| r.get::<_, i64>(0))? as u64, 0)
        }
    };
    let mut offset = q.page.offset();
    if offset >= total {
        return Ok(total);
    }
    let id_order = q.sort.is_empty() || matches!(q.sort.as_slice(), [k] if k.column == "id" && !k.descending);
    if whole && id_order && offset >= paging::STRIDE {
        match db.pages().start(rt.table, gen, offset) {
            Some((key, skip)) => {
                filter = " WHERE id >= ?".into();
                params.push(Value::Text(key));
                offset = skip;
            }
            None => db.refresh_pages(rt.table),
        }
    }
    let order = match (q.sort.is_empty(), scope) {
        (true, Some((rel, _))) => rel.fk.children_order.to_owned(),
        (true, None) => "id".to_owned(),
        (false, _) => {
            let mut keys: Vec<String> =
                q.sort.iter().map(|k| format!("{}{}", k.column, if k.descending { " DESC" } else { "" })).collect();
            if !q.sort.iter().any(|k| k.column == "id") {
                keys.push("id".into());
            }
            keys.join(", ")
        }
    };
    let sql = format!("SELECT {} FROM {}{filter} ORDER BY {order} LIMIT ? OFFSET ?", sel.columns(), rt.table);
    params.push(Value::Integer(q.page.size as i64));
    params.push(Value::Integer(offset.min(i64::MAX as u64) as i64));
    for_each(conn, sel, &sql, &params, each)?;
    Ok(total)
}

/// Inserts a new resource and its relationships; returns its id.
pub fn create(conn: &Connection, rt: &'static ResourceType, changes: &Changes) -> Result<String> {
    let id = uuid::Uuid::now_v7().hyphenated().to_string();
    let now = now();
    relations::check_targets_exist(conn, &changes.relationships)?;
    let mut columns = vec!["id", "created_at", "updated_at"];
    let mut values = vec![Value::Text(id.clone()), Value::Text(now.clone()), Value::Text(now.clone())];
    for (attr, value) in &changes.attributes {
        columns.push(attr.name);
        values.push(value.clone());
    }
    for l in changes.relationships.iter().filter(|l| l.rel.is_to_one()) {
        relations::check_parent_allowed(l)?;
        columns.push(l.rel.fk.column);
        values.push(l.ids.first().map_or(Value::Null, |p| Value::Text(p.clone())));
    }
    let marks = vec!["?"; columns.len()].join(", ");
    let sql = format!("INSERT INTO {} ({}) VALUES ({marks})", rt.table, columns.join(", "));
    conn.prepare_cached(&sql)?.execute(params_from_iter(&values)).map_err(|e| unique_violation(rt, e))?;
    for l in changes.relationships.iter().filter(|l| !l.rel.is_to_one()) {
        relations::replace_children(conn, l, &id, &now)?;
    }
    Ok(id)
}

/// Applies a partial update; absent attributes and relationships keep their values.
pub fn update(conn: &Connection, rt: &'static ResourceType, id: &str, changes: &Changes) -> Result<()> {
    if !exists(conn, rt, id)? {
        return Err(not_found(rt, id));
    }
    let now = now();
    relations::check_targets_exist(conn, &changes.relationships)?;
    let mut sets = vec!["updated_at = ?".to_owned()];
    let mut values = vec![Value::Text(now.clone())];
    for (attr, value) in &changes.attributes {
        sets.push(format!("{} = ?", attr.name));
        values.push(value.clone());
    }
    for l in changes.relationships.iter().filter(|l| l.rel.is_to_one()) {
        relations::check_parent_allowed(l)?;
        sets.push(format!("{} = ?", l.rel.fk.column));
        values.push(l.ids.first().map_or(Value::Null, |p| Value::Text(p.clone())));
    }
    values.push(Value::Text(id.to_owned()));
    let sql = format!("UPDATE {} SET {} WHERE id = ?", rt.table, sets.join(", "));
    conn.prepare_cached(&sql)?.execute(params_from_iter(&values)).map_err(|e| unique_violation(rt, e))?;
    for l in changes.relationships.iter().filter(|l| !l.rel.is_to_one()) {
        relations::replace_children(conn, l, id, &now)?;
    }
    Ok(())
}

/// Deletes a resource: children through nullable keys are unlinked (their `updated_at` moves),
/// children through not-null keys are deleted with it (the schema's cascade).
pub fn delete(conn: &Connection, rt: &'static ResourceType, id: &str) -> Result<()> {
    if !exists(conn, rt, id)? {
        return Err(not_found(rt, id));
    }
    let now = now();
    for rel in rt.relationships.iter().filter(|r| !r.is_to_one() && r.fk.nullable) {
        relations::unlink_all_children(conn, rel, id, &now)?;
    }
    conn.prepare_cached(&format!("DELETE FROM {} WHERE id = ?1", rt.table))?.execute([id])?;
    Ok(())
}

pub fn exists(conn: &Connection, rt: &ResourceType, id: &str) -> Result<bool> {
    let sql = format!("SELECT 1 FROM {} WHERE id = ?1", rt.table);
    Ok(conn.prepare_cached(&sql)?.exists([id])?)
}

pub fn not_found(rt: &ResourceType, id: &str) -> Error {
    missing(rt, id).into()
}

/// The 404 problem for resource `id` of `rt`, which does not exist.
pub fn missing(rt: &ResourceType, id: &str) -> Problem {
    Problem::new(
        warp::http::StatusCode::NOT_FOUND,
        "not_found",
        format!("There is no {} with id `{id}`.", singular(rt)),
    )
}

/// A duplicate of a unique attribute is the client's conflict (409), anything else a fault.
fn unique_violation(rt: &ResourceType, e: rusqlite::Error) -> Error {
    let msg = e.to_string();
    let dup = rt
        .attributes
        .iter()
        .find(|a| a.unique && msg.contains(&format!("UNIQUE constraint failed: {}.{}", rt.table, a.name)));
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

/// The current time as RFC 3339 UTC with milliseconds, e.g. `2026-11-21T20:53:31.123Z`.
pub fn now() -> String {
    timestamp(std::time::SystemTime::now())
}

/// `at` as RFC 3339 UTC with milliseconds.
pub fn timestamp(at: std::time::SystemTime) -> String {
    let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonapi::query::{Accepts, Query};
    use crate::resources::SUBJECTS;

    #[test]
    fn a_sparse_fieldset_reads_only_the_columns_it_needs() {
        let q = Query::parse(Some("fields[subjects]=title"), &SUBJECTS, Accepts::Single).unwrap();
        assert_eq!(Selection::new(&SUBJECTS, q.fieldset(&SUBJECTS), &q.include).columns(), "id, title");
        // A to-one relationship in the fieldset, or one to include, reads its key column.
        let q = Query::parse(Some("fields[subjects]=title&include=module"), &SUBJECTS, Accepts::Single).unwrap();
        assert_eq!(Selection::new(&SUBJECTS, q.fieldset(&SUBJECTS), &q.include).columns(), "id, title, module_id");
        let q = Query::parse(Some("fields[subjects]=chapters"), &SUBJECTS, Accepts::Single).unwrap();
        assert_eq!(Selection::new(&SUBJECTS, q.fieldset(&SUBJECTS), &q.include).columns(), "id");
        assert_eq!(
            Selection::whole(&SUBJECTS).columns(),
            "id, title, introduction, content, external_id, available_for_courses, created_at, updated_at, module_id"
        );
    }
}
