//! What the resource and relationship handlers share: reading a collection page or one
//! resource into its document.

use warp::http::StatusCode;
use warp::reply::Response;

use super::reply::{check_accept, document};
use super::Req;
use crate::app::App;
use crate::error::Result;
use crate::jsonapi::query::{normalize_id, Filter};
use crate::jsonapi::response::{self, Included, RequestUrl};
use crate::jsonapi::{Accepts, Base, Query};
use crate::resources::{Relationship, ResourceType};
use crate::store::list::list;
use crate::store::relations;
use crate::store::select::{self, get, get_with, must_exist, Record, Selection};
use crate::store::{snapshot, Tx};

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
    let url = RequestUrl::new(&base, req.path.as_str(), req.query);
    let bounded = is_bounded(&q);
    let work = move |tx: &mut dyn Tx| {
        snapshot(tx, |tx| {
            let scope = scope.as_ref().map(|(rel, parent)| (*rel, parent.as_str()));
            if let Some((rel, parent)) = scope {
                must_exist(tx, rel.fk.parent, parent)?;
            }
            let sel = Selection::new(rt, q.fieldset(rt), &q.include);
            if q.include.is_empty() {
                // Rendered straight from the rows as they are stepped.
                return response::collection(&base, &url, &q, &Included::new(), |items| {
                    list(tx, &sel, &q, scope, |row| items.push(&sel, row))
                });
            }
            let mut page = Vec::new();
            let total = list(tx, &sel, &q, scope, |row| page.push(Record::of(row, &sel)))?;
            let included = relations::include(tx, &q, &sel, &mut page)?;
            response::collection(&base, &url, &q, &included, |items| {
                page.iter().for_each(|rec| items.push(&sel, rec));
                Ok(total)
            })
        })
    };
    let body = if bounded { app.db.read(work).await? } else { app.db.scan(work).await? };
    Ok(document(StatusCode::OK, body))
}

/// Whether a page is read by walking one index (so it may run inline): at most one sort key,
/// and no filter that must look at rows beyond the page.
fn is_bounded(q: &Query) -> bool {
    q.sort.len() <= 1 && q.filters.iter().all(|f| !matches!(f, Filter::Equals(a, _) if !a.unique))
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
    let sel = Selection::new(rt, q.fieldset(rt), &q.include);
    if q.include.is_empty() {
        let mut body = None;
        get_with(tx, &sel, id, |row| body = Some(response::resource(base, url, &sel, Some(row), &Included::new())))?;
        return body.ok_or_else(|| select::not_found(rt, id));
    }
    let rec = get(tx, &sel, id)?.ok_or_else(|| select::not_found(rt, id))?;
    let mut recs = [rec];
    let included = relations::include(tx, q, &sel, &mut recs)?;
    Ok(response::resource(base, url, &sel, Some(&recs[0]), &included))
}

/// The normalized id of a path segment; a segment that is not a UUID names nothing (404).
pub fn parse_id(rt: &ResourceType, raw: &str) -> Result<String> {
    normalize_id(raw).ok_or_else(|| select::not_found(rt, raw))
}
