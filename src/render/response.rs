//! Whole response documents: a resource, a page of a collection, a linkage.

use super::{Base, Doc};
use crate::error::Result;
use crate::jsonapi::query::Query;
use crate::resources::Relationship;
use crate::store::{Fields, Record, Selection};

/// Resources included with the primary data, grouped by the selection they were read with.
pub type Included = Vec<(Selection, Vec<Record>)>;

/// The URL of a document's `links.self`: the request's absolute path (paging links are built
/// on it) and its query as received.
#[derive(Debug, Clone)]
pub struct RequestUrl {
    pub path_url: String,
    pub query: Option<String>,
}

impl RequestUrl {
    /// The URL of the request to `path` (which starts with `/v1`).
    pub fn new(base: &Base, path: &str, query: Option<String>) -> RequestUrl {
        RequestUrl { path_url: format!("{}{path}", base.origin()), query }
    }

    /// The URL of resource `id` of type `type_name`.
    pub fn resource(base: &Base, type_name: &str, id: &str) -> RequestUrl {
        let base = base.as_str();
        let mut path_url = String::with_capacity(base.len() + type_name.len() + id.len() + 2);
        for part in [base, "/", type_name, "/", id] {
            path_url.push_str(part);
        }
        RequestUrl { path_url, query: None }
    }

    /// The URL of the resources related to resource `id` of type `type_name` through `rel`,
    /// with `query`.
    pub fn related(base: &Base, type_name: &str, id: &str, rel: &str, query: Option<String>) -> RequestUrl {
        let mut url = RequestUrl::resource(base, type_name, id);
        url.path_url.push('/');
        url.path_url.push_str(rel);
        RequestUrl { query, ..url }
    }

    fn write_self(&self, doc: &mut Doc) {
        match self.query.as_deref().filter(|q| !q.is_empty()) {
            Some(q) => doc.string(&format!("{}?{q}", self.path_url)),
            None => doc.string(&self.path_url),
        }
    }
}

/// The answer to atomic operations: `atomic:results`, one entry per operation in order, with
/// the resource an operation created or updated as its `data`, or empty.
pub fn atomic_results(base: &Base, results: &[Option<(&'static crate::resources::ResourceType, &Record)>]) -> Vec<u8> {
    let size: usize = results.iter().flatten().map(|(rt, rec)| approximate_size(*rec, rt.attributes.len()) + 16).sum();
    let mut doc = Doc::new(size + 64);
    doc.member("atomic:results");
    doc.byte(b'[');
    for (i, result) in results.iter().enumerate() {
        if i > 0 {
            doc.byte(b',');
        }
        match result {
            Some((rt, rec)) => {
                doc.raw(r#"{"data":"#);
                doc.resource(base, Selection::whole(rt), *rec);
                doc.byte(b'}');
            }
            None => doc.raw("{}"),
        }
    }
    doc.byte(b']');
    doc.finish()
}

/// A single resource (or `null`), with `included` and `links.self`.
pub fn resource(
    base: &Base,
    url: &RequestUrl,
    sel: &Selection,
    rec: Option<&impl Fields>,
    included: &Included,
) -> Vec<u8> {
    // One resource, and what was read for it within its budget.
    resource_within(base, url, sel, rec, included, usize::MAX).unwrap_or_default()
}

/// [`resource`], refused (`None`) when the document grows past `budget` bytes.
pub fn resource_within(
    base: &Base,
    url: &RequestUrl,
    sel: &Selection,
    rec: Option<&impl Fields>,
    included: &Included,
    budget: usize,
) -> Option<Vec<u8>> {
    let size = rec.map_or(0, |r| approximate_size(r, sel.attrs.len()));
    let included_size: usize =
        included.iter().flat_map(|(s, recs)| recs.iter().map(|r| approximate_size(r, s.attrs.len()))).sum();
    let mut doc = Doc::new((size + included_size + 512).min(budget));
    doc.member("data");
    match rec {
        Some(rec) => doc.resource(base, sel, rec),
        None => doc.raw("null"),
    }
    if !write_included(&mut doc, base, included, budget) {
        return None;
    }
    doc.member("links");
    doc.raw(r#"{"self":"#);
    url.write_self(&mut doc);
    doc.byte(b'}');
    Some(doc.finish())
}

/// One page of a collection with `meta.page` and the paging links. `fill` writes the
/// resources (comma-separated, see [`Items`]) and returns the total count of the collection.
pub fn collection(
    base: &Base,
    url: &RequestUrl,
    q: &Query,
    included: &Included,
    fill: impl FnOnce(&mut Items<'_>) -> Result<u64>,
) -> Result<Vec<u8>> {
    let included_size: usize =
        included.iter().flat_map(|(s, recs)| recs.iter().map(|r| approximate_size(r, s.attrs.len()))).sum();
    let budget = q.budget.bytes;
    let mut doc = Doc::new((q.page.size as usize * 4096 + included_size).min(budget));
    doc.member("data");
    doc.byte(b'[');
    let mut items = Items { doc: &mut doc, base, count: 0, budget, over: false };
    let total = fill(&mut items)?;
    let (count, over) = (items.count, items.over);
    doc.byte(b']');
    if over || !write_included(&mut doc, base, included, budget) {
        return Err(q.budget.exceeded());
    }

    let (number, per_page) = (q.page.number, q.page.size);
    let last = total.div_ceil(per_page).max(1);
    let from = if count == 0 { 0 } else { q.page.offset() + 1 };
    let to = if count == 0 { 0 } else { q.page.offset() + count };
    doc.member("meta");
    doc.raw(&format!(
        r#"{{"page":{{"currentPage":{number},"perPage":{per_page},"from":{from},"to":{to},"total":{total},"lastPage":{last}}}}}"#
    ));
    doc.member("links");
    doc.raw(r#"{"self":"#);
    url.write_self(&mut doc);
    let link = |doc: &mut Doc, name: &str, n: u64| {
        doc.member(name);
        doc.string(&format!("{}?{}", url.path_url, q.with_page(n)));
    };
    link(&mut doc, "first", 1);
    link(&mut doc, "last", last);
    if number > 1 {
        link(&mut doc, "prev", (number - 1).min(last));
    }
    if number < last {
        link(&mut doc, "next", number + 1);
    }
    doc.byte(b'}');
    Ok(doc.finish())
}

/// The `data` array of a collection being written.
pub struct Items<'d> {
    doc: &'d mut Doc,
    base: &'d Base,
    count: u64,
    /// The most bytes the document may take; past them the rest of the rows are not written.
    budget: usize,
    over: bool,
}

impl Items<'_> {
    pub fn push(&mut self, sel: &Selection, rec: &impl Fields) {
        self.push_with_meta(sel, rec, None);
    }

    /// Adds a resource with its `meta` object (JSON), when given.
    pub fn push_with_meta(&mut self, sel: &Selection, rec: &impl Fields, meta: Option<&str>) {
        if self.over {
            return;
        }
        if self.doc.written() > self.budget {
            self.over = true;
            return;
        }
        if self.count > 0 {
            self.doc.byte(b',');
        }
        self.doc.resource_with_meta(self.base, sel, rec, meta);
        self.count += 1;
    }
}

/// The linkage of `owner`'s relationship `rel`, with `links.self` and `links.related`.
pub fn linkage(base: &Base, owner_type: &str, owner: &str, rel: &Relationship, ids: &[String]) -> Vec<u8> {
    let mut doc = Doc::new(128 + ids.len() * 64);
    let target = rel.target().name;
    doc.member("data");
    if rel.is_to_one() {
        match ids.first() {
            Some(id) => doc.identifier(target, id),
            None => doc.raw("null"),
        }
    } else {
        doc.byte(b'[');
        for (i, id) in ids.iter().enumerate() {
            if i > 0 {
                doc.byte(b',');
            }
            doc.identifier(target, id);
        }
        doc.byte(b']');
    }
    doc.member("links");
    doc.raw(r#"{"self":"#);
    doc.url(base, &[owner_type, owner, "relationships", rel.name]);
    doc.raw(r#","related":"#);
    doc.url(base, &[owner_type, owner, rel.name]);
    doc.byte(b'}');
    doc.finish()
}

/// Writes `included`; false when the document grew past `budget` bytes on the way.
fn write_included(doc: &mut Doc, base: &Base, included: &Included, budget: usize) -> bool {
    if included.iter().all(|(_, recs)| recs.is_empty()) {
        return doc.written() <= budget;
    }
    doc.member("included");
    doc.byte(b'[');
    let mut first = true;
    for (sel, recs) in included {
        for rec in recs {
            if doc.written() > budget {
                return false;
            }
            if !first {
                doc.byte(b',');
            }
            first = false;
            doc.resource(base, sel, rec);
        }
    }
    doc.byte(b']');
    doc.written() <= budget
}

/// Roughly the bytes `rec` renders to, to size the buffer once.
fn approximate_size(rec: &impl Fields, attrs: usize) -> usize {
    let text: usize = (0..attrs)
        .map(|i| match rec.attr(i) {
            crate::store::Cell::Text(s) => s.len() + 16,
            _ => 16,
        })
        .sum();
    text + 640
}
