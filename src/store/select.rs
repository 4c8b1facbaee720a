//! Reading resources: which columns a request needs ([`Selection`]), rows viewed in place
//! ([`Fields`]) or kept ([`Record`]), and the point reads every other part builds on.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::tx::{Cell, Row, Tx, Value};
use crate::error::{Error, Problem, Result};
use crate::jsonapi::body::singular;
use crate::jsonapi::query::Include;
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
    /// Also reads the generation of the type's to-many linkage (see [`Selection::tagged`]).
    links: bool,
    columns: String,
    by_id: String,
}

/// What rendering reads of a resource: an owned [`Record`], or a row being stepped.
pub trait Fields {
    fn id(&self) -> &str;
    /// Attribute `i` of the selection.
    fn attr(&self, i: usize) -> Cell<'_>;
    /// The parent id through to-one relationship `i` of the selection, if set.
    fn parent(&self, i: usize) -> Option<&str>;
    /// To-many linkage, known for relationships named in `include`.
    fn children(&self, rel: &Relationship) -> Option<&[String]>;
    /// The generation of the resource's to-many linkage, when read (see [`Selection::tagged`]).
    fn links(&self) -> Option<i64> {
        None
    }
}

/// One resource, read and kept (for `include`, which needs the whole page before rendering).
#[derive(Debug, Clone)]
pub struct Record {
    pub id: String,
    pub attrs: Vec<Value>,
    pub parents: Vec<Option<String>>,
    pub children: Vec<(&'static Relationship, Vec<String>)>,
    /// See [`Fields::links`].
    pub links: Option<i64>,
}

impl Fields for Record {
    fn id(&self) -> &str {
        &self.id
    }
    fn attr(&self, i: usize) -> Cell<'_> {
        self.attrs.get(i).map_or(Cell::Null, Value::cell)
    }
    fn parent(&self, i: usize) -> Option<&str> {
        self.parents.get(i)?.as_deref()
    }
    fn children(&self, rel: &Relationship) -> Option<&[String]> {
        self.children.iter().find(|(r, _)| std::ptr::eq(*r, rel)).map(|(_, ids)| ids.as_slice())
    }
    fn links(&self) -> Option<i64> {
        self.links
    }
}

/// A row selected with [`Selection::columns`], read in place (no copies).
pub struct RowFields<'a> {
    row: &'a dyn Row,
    attrs: usize,
    /// The column of the linkage generation, when read.
    links: Option<usize>,
}

impl Fields for RowFields<'_> {
    fn id(&self) -> &str {
        self.row.cell(0).as_str().unwrap_or("")
    }
    fn attr(&self, i: usize) -> Cell<'_> {
        self.row.cell(1 + i)
    }
    fn parent(&self, i: usize) -> Option<&str> {
        self.row.cell(1 + self.attrs + i).as_str()
    }
    fn children(&self, _: &Relationship) -> Option<&[String]> {
        None
    }
    fn links(&self) -> Option<i64> {
        self.row.cell(self.links?).as_i64()
    }
}

/// The fields of a row read once, for work that reads each more than once (an entity tag and
/// the document); the text is still the row's, not copied.
pub struct ReadOnce<'a> {
    id: &'a str,
    attrs: Vec<Cell<'a>>,
    parents: Vec<Option<&'a str>>,
    links: Option<i64>,
}

impl<'a> ReadOnce<'a> {
    pub fn of(f: &'a impl Fields, sel: &Selection) -> ReadOnce<'a> {
        ReadOnce {
            id: f.id(),
            attrs: (0..sel.attrs.len()).map(|i| f.attr(i)).collect(),
            parents: (0..sel.to_one.len()).map(|i| f.parent(i)).collect(),
            links: f.links(),
        }
    }
}

impl Fields for ReadOnce<'_> {
    fn id(&self) -> &str {
        self.id
    }
    fn attr(&self, i: usize) -> Cell<'_> {
        self.attrs.get(i).copied().unwrap_or(Cell::Null)
    }
    fn parent(&self, i: usize) -> Option<&str> {
        self.parents.get(i).copied().flatten()
    }
    fn children(&self, _: &Relationship) -> Option<&[String]> {
        None
    }
    fn links(&self) -> Option<i64> {
        self.links
    }
}

impl Record {
    /// About the bytes this record takes in memory, and in a document (escaping aside).
    pub fn size(&self) -> usize {
        let text: usize = self.attrs.iter().map(|v| if let Value::Text(s) = v { s.len() } else { 8 }).sum();
        let children: usize = self.children.iter().map(|(_, ids)| ids.len() * 40).sum();
        self.id.len() + text + children + 64 * (self.attrs.len() + self.parents.len())
    }

    pub fn of(f: &impl Fields, sel: &Selection) -> Record {
        Record {
            id: f.id().to_owned(),
            attrs: (0..sel.attrs.len()).map(|i| f.attr(i).to_value()).collect(),
            parents: (0..sel.to_one.len()).map(|i| f.parent(i).map(str::to_owned)).collect(),
            children: Vec::new(),
            links: f.links(),
        }
    }
}

impl Selection {
    /// Everything of `rt` in `fieldset` (all when `None`), plus the columns `include` needs:
    /// borrowed from [`Selection::whole`] when that is all.
    pub fn new(rt: &'static ResourceType, fieldset: Option<&[String]>, include: &[Include]) -> Cow<'static, Selection> {
        if fieldset.is_none() && include.is_empty() {
            return Cow::Borrowed(Selection::whole(rt));
        }
        Cow::Owned(Selection::build(rt, fieldset, include))
    }

    /// The selection of every field of `rt`, built once.
    pub fn whole(rt: &'static ResourceType) -> &'static Selection {
        static WHOLE: OnceLock<Vec<Selection>> = OnceLock::new();
        let all = WHOLE.get_or_init(|| TYPES.iter().map(|t| Selection::build(t, None, &[])).collect());
        all.iter().find(|s| std::ptr::eq(s.rt, rt)).expect("every type is in the registry")
    }

    /// [`Selection::whole`] that also reads the generation of the resource's to-many linkage
    /// (the sum of `row_counts.gen` of its children's counters, which moves whenever a child is
    /// linked or unlinked): what the resource's entity tag is computed from, so that a tag read
    /// before a child was added does not match a write that would replace the set.
    pub fn tagged(rt: &'static ResourceType) -> &'static Selection {
        static TAGGED: OnceLock<Vec<Selection>> = OnceLock::new();
        let all = TAGGED.get_or_init(|| {
            TYPES
                .iter()
                .map(|t| {
                    let mut sel = Selection::build(t, None, &[]);
                    sel.links = t.relationships.iter().any(|r| !r.is_to_one());
                    sel.build_columns();
                    sel
                })
                .collect()
        });
        all.iter().find(|s| std::ptr::eq(s.rt, rt)).expect("every type is in the registry")
    }

    fn build(rt: &'static ResourceType, fieldset: Option<&[String]>, include: &[Include]) -> Selection {
        let wants = |name: &str| fieldset.is_none_or(|f| f.iter().any(|x| x == name));
        let attrs = rt.attributes.iter().filter(|a| wants(a.name)).collect();
        let rels = rt.relationships.iter().filter(|r| wants(r.name)).collect();
        let to_one = rt.to_one().filter(|r| wants(r.name) || include.iter().any(|i| std::ptr::eq(i.rel, *r))).collect();
        let mut sel = Selection { rt, attrs, to_one, rels, links: false, columns: String::new(), by_id: String::new() };
        sel.build_columns();
        sel
    }

    /// Also reads the column of the to-one relationship `rel` (to group rows by parent).
    pub fn with_parent(sel: Cow<'static, Selection>, rel: &'static Relationship) -> Selection {
        let mut sel = sel.into_owned();
        if !sel.to_one.iter().any(|r| std::ptr::eq(*r, rel)) {
            sel.to_one.push(rel);
            sel.build_columns();
        }
        sel
    }

    fn build_columns(&mut self) {
        let mut cols = vec!["id".to_owned()];
        cols.extend(self.attrs.iter().map(|a| a.name.to_owned()));
        cols.extend(self.to_one.iter().map(|r| r.fk.column.to_owned()));
        if self.links {
            cols.push(links_generation(self.rt));
        }
        self.columns = cols.join(", ");
        self.by_id = format!("SELECT {} FROM {} WHERE id = ?", self.columns, self.rt.table);
    }

    /// The column list of a `SELECT`.
    pub fn columns(&self) -> &str {
        &self.columns
    }

    /// A copy of `row`, selected with [`Selection::columns`].
    pub fn record(&self, row: &dyn Row) -> Record {
        Record::of(&self.fields(row), self)
    }

    /// `row`, selected with [`Selection::columns`], read in place.
    fn fields<'a>(&self, row: &'a dyn Row) -> RowFields<'a> {
        let attrs = self.attrs.len();
        RowFields { row, attrs, links: self.links.then_some(1 + attrs + self.to_one.len()) }
    }

    /// The parent id of `rec` through the to-one `rel`, if read and set.
    pub fn parent_of<'r>(&self, rec: &'r impl Fields, rel: &Relationship) -> Option<&'r str> {
        let i = self.to_one.iter().position(|r| std::ptr::eq(*r, rel))?;
        rec.parent(i)
    }
}

/// Calls `each` with the row of resource `id`; `false` when there is none.
pub fn get_with(tx: &mut dyn Tx, sel: &Selection, id: &str, mut each: impl FnMut(&RowFields<'_>)) -> Result<bool> {
    let n = for_each(tx, sel, &sel.by_id, &[Value::Text(id.to_owned())], |f| each(f))?;
    Ok(n > 0)
}

/// The resource `id`, or `None`.
/// Locks row `id` of `rt` until the transaction ends, where the engine has row locks (one
/// writer at a time is all there is on SQLite).
pub fn lock_row(tx: &mut dyn Tx, rt: &ResourceType, id: &str) -> Result<()> {
    if let Some(sql) = tx.dialect().lock_row(rt.table) {
        tx.query(&sql, &[Value::Text(id.to_owned())], &mut |_| {})?;
    }
    Ok(())
}

pub fn get(tx: &mut dyn Tx, sel: &Selection, id: &str) -> Result<Option<Record>> {
    let mut rec = None;
    get_with(tx, sel, id, |f| rec = Some(Record::of(f, sel)))?;
    Ok(rec)
}

/// Reads the resources of `sql` (a statement selecting [`Selection::columns`]).
pub fn read_all(tx: &mut dyn Tx, sel: &Selection, sql: &str, params: &[Value]) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    for_each(tx, sel, sql, params, |f| out.push(Record::of(f, sel)))?;
    Ok(out)
}

/// Calls `each` with every row of `sql` (a statement selecting [`Selection::columns`]).
pub fn for_each(
    tx: &mut dyn Tx,
    sel: &Selection,
    sql: &str,
    params: &[Value],
    mut each: impl FnMut(&RowFields<'_>),
) -> Result<u64> {
    Ok(tx.query(sql, params, &mut |row| each(&sel.fields(row)))?)
}

/// The SQL expression of the generation of the to-many linkage of a row of `rt` (see
/// [`Selection::tagged`]); the same on both engines.
fn links_generation(rt: &ResourceType) -> String {
    // Each to-many relationship's counters are named after the children's key column.
    let counters: Vec<String> = rt
        .relationships
        .iter()
        .filter(|r| !r.is_to_one())
        .map(|r| format!("'{}.{}'", r.fk.child.table, r.fk.column))
        .collect();
    format!(
        "(SELECT CAST(coalesce(sum(gen), 0) AS BIGINT) FROM row_counts WHERE parent = {t}.id AND tbl IN ({})) AS links",
        counters.join(", "),
        t = rt.table
    )
}

pub fn exists(tx: &mut dyn Tx, rt: &ResourceType, id: &str) -> Result<bool> {
    let sql = format!("SELECT 1 FROM {} WHERE id = ?", rt.table);
    Ok(tx.exists(&sql, &[Value::Text(id.to_owned())])?)
}

/// 404 unless resource `id` of `rt` exists.
pub fn must_exist(tx: &mut dyn Tx, rt: &ResourceType, id: &str) -> Result<()> {
    if exists(tx, rt, id)? {
        Ok(())
    } else {
        Err(not_found(rt, id))
    }
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
