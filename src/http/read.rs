//! What the resource and relationship handlers share: reading a collection page or one
//! resource into its document.

use warp::reply::Response;

use super::conditional::{names, tagged};
use super::large;
use super::reply::check_accept;
use super::Req;
use crate::app::App;
use crate::error::Result;
use crate::jsonapi::query::{normalize_id, Filter};
use crate::jsonapi::{Accepts, Query};
use crate::render::response::{self, Included, RequestUrl};
use crate::render::{etag, Base};
use crate::resources::{Relationship, ResourceType};
use crate::store::budget::Left;
use crate::store::list::list;
use crate::store::paging::STRIDE;
use crate::store::relations;
use crate::store::select::{self, get, get_with, lock_row, must_exist, ReadOnce, Selection};
use crate::store::{self, snapshot, Tx};

/// `GET` of a collection, or of one parent's children when `scope` is set.
pub async fn collection(
    app: &App,
    rt: &'static ResourceType,
    req: Req,
    scope: Option<(&'static Relationship, String)>,
) -> Result<Response> {
    check_accept(&req.headers)?;
    let q = Query::parse(req.query.as_deref(), rt, Accepts::Collection)?;
    let base = app.base(&req.headers)?;
    // A related collection is named by its own URL (its owner's id as stored), whichever
    // spelling of the id the request used.
    let url = match &scope {
        Some((rel, id)) => RequestUrl::related(&base, rel.fk.parent.name, id, rel.name, req.query),
        None => RequestUrl::new(&base, req.path.as_str(), req.query),
    };
    let (body, permit) = large::read(app, is_bounded(&q, scope.is_none()), &q, |q| {
        let (base, url, scope) = (base.clone(), url.clone(), scope.clone());
        move |tx: &mut dyn Tx| page(tx, &base, &url, rt, &q, scope.as_ref())
    })
    .await?;
    Ok(tagged(&req.headers, app.web.compression, large::body(body, permit)))
}

/// The document of one page of `rt` (of one parent's children with `scope`), read in one
/// snapshot within `q`'s budget.
fn page(
    tx: &mut dyn Tx,
    base: &Base,
    url: &RequestUrl,
    rt: &'static ResourceType,
    q: &Query,
    scope: Option<&(&'static Relationship, String)>,
) -> Result<Vec<u8>> {
    snapshot(tx, |tx| {
        let scope = scope.map(|(rel, parent)| (*rel, parent.as_str()));
        if let Some((rel, parent)) = scope {
            must_exist(tx, rel.fk.parent, parent)?;
        }
        let sel = Selection::new(rt, q.fieldset(rt), &q.include);
        if q.include.is_empty() && q.search.is_none() {
            // Rendered straight from the rows as they are stepped.
            return response::collection(base, url, q, &Included::new(), |items| {
                list(tx, &sel, q, scope, |row| items.push(&sel, row))
            });
        }
        let mut page = Vec::new();
        let mut left = Left::new(q.budget.bytes, usize::MAX);
        let total = list(tx, &sel, q, scope, |row| left.keep(row, &sel, &mut page))?;
        if left.over() {
            return Err(q.budget.exceeded());
        }
        left.resources = q.budget.included;
        let included = relations::include(tx, q, &sel, &mut page, &mut left)?;
        let meta = match &q.search {
            Some(search) => store::search::page_meta(tx, &sel, search, &page)?,
            None => Default::default(),
        };
        response::collection(base, url, q, &included, |items| {
            page.iter().for_each(|rec| items.push_with_meta(&sel, rec, meta.get(&rec.id).map(String::as_str)));
            Ok(total)
        })
    })
}

/// Whether a page is read by walking one index (so it may run inline): at most one sort key,
/// no filter that must look at rows beyond the page (or count them), nothing to include, and no offset to walk
/// over (a deep page steps over its offset, unless it is a page of a whole table in id order,
/// which starts from a kept key: `whole`, no parent, and no filter).
fn is_bounded(q: &Query, whole: bool) -> bool {
    let shallow = q.page.offset() < STRIDE || (whole && q.filters.is_empty() && q.in_id_order());
    shallow
        && q.search.is_none()
        && q.include.is_empty()
        && q.sort.len() <= 1
        && q.filters.iter().all(|f| !matches!(f, Filter::Equals(a, _) if !a.unique))
        // The resources without a parent are counted, not read from a kept count.
        && q.filters.iter().all(|f| !matches!(f, Filter::NoParent(_)))
}

/// The document of resource `id` with what `q` includes; 404 when it does not exist.
pub fn render_one(
    tx: &mut dyn Tx,
    base: &Base,
    url: &RequestUrl,
    rt: &'static ResourceType,
    q: &Query,
    id: &str,
) -> Result<Vec<u8>> {
    Ok(render_tagged(tx, base, url, rt, q, id, None)?.1.unwrap_or_default())
}

/// The tag of the document `render_one` writes, and the document unless `if_none_match` names
/// that tag. Without `include` the tag is computed from the row, and a matching request costs
/// no rendering.
pub fn render_tagged(
    tx: &mut dyn Tx,
    base: &Base,
    url: &RequestUrl,
    rt: &'static ResourceType,
    q: &Query,
    id: &str,
    if_none_match: Option<&str>,
) -> Result<(String, Option<Vec<u8>>)> {
    let sel = match (q.include.is_empty(), q.fieldset(rt)) {
        // The plain document: its tag is the one writes compare `If-Match` with.
        (true, None) => std::borrow::Cow::Borrowed(Selection::tagged(rt)),
        _ => Selection::new(rt, q.fieldset(rt), &q.include),
    };
    if !q.include.is_empty() {
        let rec = get(tx, &sel, id)?.ok_or_else(|| select::not_found(rt, id))?;
        let mut left = Left::new(q.budget.bytes.saturating_sub(rec.size()), q.budget.included);
        let mut recs = [rec];
        let included = relations::include(tx, q, &sel, &mut recs, &mut left)?;
        let body = response::resource_within(base, url, &sel, Some(&recs[0]), &included, q.budget.bytes)
            .ok_or_else(|| q.budget.exceeded())?;
        let tag = etag::bytes(&body);
        return Ok((tag.clone(), (!names(if_none_match, &tag)).then_some(body)));
    }
    if if_none_match.is_some() && tx.has_marks() {
        // A revalidation: answered from the tag remembered for this document when nothing was
        // committed since (one read of the snapshot's mark instead of the row).
        return snapshot(tx, |tx| {
            let Some(mark) = tx.mark()? else { return read_tagged(tx, base, url, &sel, q, id, if_none_match) };
            let key = format!("{}\u{0}{}\u{0}{id}\u{0}{}", base.as_str(), rt.name, url.query.as_deref().unwrap_or(""));
            if let Some(tag) = tx.tags().get(&key, mark).filter(|tag| names(if_none_match, tag)) {
                return Ok((tag, None));
            }
            let shown = read_tagged(tx, base, url, &sel, q, id, if_none_match)?;
            tx.tags().put(key, shown.0.clone(), mark);
            Ok(shown)
        });
    }
    read_tagged(tx, base, url, &sel, q, id, if_none_match)
}

/// The tag of resource `id` read with `sel` (no `include`), and its document unless
/// `if_none_match` names that tag.
fn read_tagged(
    tx: &mut dyn Tx,
    base: &Base,
    url: &RequestUrl,
    sel: &Selection,
    q: &Query,
    id: &str,
    if_none_match: Option<&str>,
) -> Result<(String, Option<Vec<u8>>)> {
    let rt = sel.rt;
    let mut shown = None;
    get_with(tx, sel, id, |row| {
        let row = ReadOnce::of(row, sel);
        let tag = etag::resource(base, url.query.as_deref(), sel, &row);
        let budget = q.budget.bytes;
        let body = (!names(if_none_match, &tag))
            .then(|| response::resource_within(base, url, sel, Some(&row), &Included::new(), budget));
        shown = Some((tag, body));
    })?;
    match shown {
        None => Err(select::not_found(rt, id)),
        Some((_, Some(None))) => Err(q.budget.exceeded()),
        Some((tag, body)) => Ok((tag, body.flatten())),
    }
}

/// The current tag of resource `id` (of its plain document), its row locked for the rest of the
/// transaction; `None` when it does not exist.
pub fn current_tag(tx: &mut dyn Tx, base: &Base, rt: &'static ResourceType, id: &str) -> Result<Option<String>> {
    lock_row(tx, rt, id)?;
    let sel = Selection::tagged(rt);
    Ok(get(tx, sel, id)?.map(|rec| etag::resource(base, None, sel, &rec)))
}

/// The normalized id of a path segment; a segment that is not a UUID names nothing (404).
pub fn parse_id(rt: &ResourceType, raw: &str) -> Result<String> {
    normalize_id(raw).ok_or_else(|| select::not_found(rt, raw))
}
