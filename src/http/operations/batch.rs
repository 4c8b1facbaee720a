//! Runs of resource adds (a course of hundreds of linked resources is one such run), inserted
//! with one statement per type, parents first: the same outcome as adding them one by one, in
//! a few round trips to the database instead of hundreds.
//!
//! The adds are prepared in order (each sees the `lid`s of those before it, and its id is drawn
//! in order), so that what is stored is what adding them one by one stores. When anything of
//! the run fails, nothing of it is kept and the operations are run one by one, which says
//! which one fails and why.

use serde_json::{Map, Value as Json};

use super::refs::Lids;
use super::{prepare_add, Op, Outcome};
use crate::error::Result;
use crate::jsonapi::body::Changes;
use crate::resources::{ResourceType, TYPES};
use crate::store::{write, Tx};

/// New resources of one type, with their ids.
type Items<'a> = Vec<(String, &'a Changes)>;

/// The most resources one statement inserts.
const MAX_ROWS: usize = 200;

/// How many operations from the first of `ops` form a run: `add`s of resources without `ref`,
/// `href` or `meta`.
pub fn run_len(ops: &[Op]) -> usize {
    let plain = |op: &Map<String, Json>| {
        op.get("op").and_then(Json::as_str) == Some("add")
            && ["ref", "href", "meta"].iter().all(|m| !op.contains_key(*m))
    };
    ops.iter().take_while(|op| plain(&op.json)).count()
}

/// Adds the run `ops` (see [`run_len`]); `None` when it cannot be added that way, with nothing
/// of it left in the database or in `lids`.
pub fn add_run(tx: &mut dyn Tx, ops: &[Op], lids: &mut Lids) -> Result<Option<Vec<Outcome>>> {
    let mut prepared: Vec<(&'static ResourceType, String, Changes)> = Vec::with_capacity(ops.len());
    let mut named = Vec::new();
    let undo = |lids: &mut Lids, named: &[String]| named.iter().for_each(|lid| drop(lids.0.remove(lid)));
    for op in ops {
        let Ok((rt, lid, changes)) = prepare_add(op, None, lids) else {
            undo(lids, &named);
            return Ok(None);
        };
        let id = uuid::Uuid::now_v7().hyphenated().to_string();
        if let Some(lid) = lid {
            lids.0.insert(lid.clone(), (rt, id.clone()));
            named.push(lid);
        }
        prepared.push((rt, id, changes));
    }
    let added = write::attempt(tx, |tx| {
        let mut stored = std::collections::HashMap::with_capacity(prepared.len());
        for rt in parents_first() {
            // One statement inserts rows that set the same members.
            let mut groups: Vec<(Vec<&str>, Items)> = Vec::new();
            for (_, id, changes) in prepared.iter().filter(|(t, _, _)| t.name == rt.name) {
                let members = signature(changes);
                match groups.iter_mut().find(|(m, _)| *m == members) {
                    Some((_, items)) => items.push((id.clone(), changes)),
                    None => groups.push((members, vec![(id.clone(), changes)])),
                }
            }
            for chunk in groups.iter().flat_map(|(_, items)| items.chunks(MAX_ROWS)) {
                let Some(recs) = write::create_batch(tx, rt, chunk)? else { return Ok(None) };
                stored.extend(recs.into_iter().map(|rec| (rec.id.clone(), rec)));
            }
        }
        Ok(prepared.iter().map(|(rt, id, _)| stored.remove(id).map(|rec| Some((*rt, rec)))).collect())
    })?;
    if added.is_none() {
        undo(lids, &named);
    }
    Ok(added)
}

/// The attributes and relationships an add sets.
fn signature(changes: &Changes) -> Vec<&'static str> {
    let attrs = changes.attributes.iter().map(|(a, _)| a.name);
    attrs.chain(changes.relationships.iter().map(|l| l.rel.name)).collect()
}

/// The resource types, each after the types its to-one relationships name (a subject after
/// modules, a chapter after subjects), so that parents are inserted before their children.
fn parents_first() -> Vec<&'static ResourceType> {
    fn depth(rt: &ResourceType) -> usize {
        rt.to_one().map(|r| if r.target().name == rt.name { 0 } else { 1 + depth(r.target()) }).max().unwrap_or(0)
    }
    let mut types: Vec<&'static ResourceType> = TYPES.to_vec();
    types.sort_by_key(|rt| depth(rt));
    types
}
