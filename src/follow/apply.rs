//! Applying another feed's revisions to this database, in order: each brings one resource to
//! the state its `after` values describe, as the upstream's change did. A create (or a restore
//! that brought a resource back) holds every member; an update only those that changed, laid
//! over the row as it is here; a delete removes the row (what its foreign keys take along
//! follows, as upstream, and the revisions of those rows find nothing left to do).
//!
//! Rows are checked by the rules of a create ([`crate::bundle`]'s, as an imported line) and
//! written with their times as they were, so that the follower's catalogue is the upstream's
//! to the byte. Creates of one type in a row are written many to a statement.

use serde_json::{json, Map, Value as Json};

use crate::bundle::{resource_row, upsert, Line};
use crate::resources::ResourceType;
use crate::store::history::{self, Revision};
use crate::store::{Tx, Value};

/// Rows written by one statement.
const ROWS: usize = 100;

/// Applies revisions to one transaction, in the order given.
pub struct Applier {
    pending: Vec<Line>,
    /// Revisions applied.
    pub applied: u64,
}

impl Default for Applier {
    fn default() -> Applier {
        Applier { pending: Vec::with_capacity(ROWS), applied: 0 }
    }
}

impl Applier {
    /// Applies `r` (or buffers its row: [`Applier::finish`] writes what is left).
    pub fn apply(&mut self, tx: &mut dyn Tx, r: &Revision) -> Result<(), String> {
        let rt = crate::resources::by_name(&r.resource_type)
            .ok_or_else(|| format!("a revision of an unknown type {}", r.resource_type))?;
        let what = || format!("revision {} of {} {}", r.number, rt.name, r.resource_id);
        let Ok(Json::Object(changes)) = serde_json::from_str::<Json>(&r.changes) else {
            return Err(format!("{}: its changes are not an object", what()));
        };
        let after = |pair: &Json| pair.get(1).cloned().unwrap_or(Json::Null);
        if r.action == "delete" {
            self.flush(tx)?;
            let sql = format!("DELETE FROM {} WHERE id = ?", rt.table);
            tx.execute(&sql, &[Value::Text(r.resource_id.clone())]).map_err(|e| format!("{}: {e}", what()))?;
            self.applied += 1;
            return Ok(());
        }
        // A revision that made the row holds every member; any other is laid over the row.
        let makes_row = changes.get("created_at").is_some_and(|c| c.get(0).is_some_and(Json::is_null));
        let state = if makes_row {
            changes.iter().map(|(k, v)| (k.clone(), after(v))).collect::<Map<String, Json>>()
        } else {
            self.flush(tx)?;
            let mut state =
                history::current(tx, rt, &r.resource_id).map_err(|e| format!("{}: {e}", what()))?.ok_or_else(|| {
                    format!("{}: changes {} {}, which this database does not hold", what(), rt.name, r.resource_id)
                })?;
            for (k, v) in &changes {
                state.insert(k.clone(), after(v));
            }
            state
        };
        let line = resource_row(0, &object(rt, &r.resource_id, &state), rt, r.resource_id.clone())
            .map_err(|e| format!("{}: {}", what(), e.trim_start_matches("line 0: ")))?;
        let other_type = self.pending.first().is_some_and(|l| !std::ptr::eq(l.rt, rt));
        if other_type || self.pending.iter().any(|l| l.id() == r.resource_id) {
            self.flush(tx)?;
        }
        self.pending.push(line);
        if self.pending.len() == ROWS || !makes_row {
            self.flush(tx)?;
        }
        self.applied += 1;
        Ok(())
    }

    /// Writes the rows buffered.
    pub fn flush(&mut self, tx: &mut dyn Tx) -> Result<(), String> {
        let Some(rt) = self.pending.first().map(|l| l.rt) else { return Ok(()) };
        let lines = std::mem::take(&mut self.pending);
        upsert(tx, rt, lines).map_err(|e| format!("writing {} failed: {e}", rt.name))
    }

    /// Writes what is left; returns how many revisions were applied.
    pub fn finish(mut self, tx: &mut dyn Tx) -> Result<u64, String> {
        self.flush(tx)?;
        Ok(self.applied)
    }
}

/// The resource object of `rt` and `id` with the members of `state` (a revision's form: a
/// to-one relationship's value is the parent's id).
fn object(rt: &'static ResourceType, id: &str, state: &Map<String, Json>) -> Json {
    let mut attributes = Map::new();
    for a in rt.attributes {
        attributes.insert(a.name.into(), state.get(a.name).cloned().unwrap_or(Json::Null));
    }
    let mut relationships = Map::new();
    for rel in rt.to_one() {
        let data = match state.get(rel.name) {
            Some(Json::String(parent)) => json!({"type": rel.target().name, "id": parent}),
            _ => Json::Null,
        };
        relationships.insert(rel.name.into(), json!({ "data": data }));
    }
    json!({"type": rt.name, "id": id, "attributes": attributes, "relationships": relationships})
}
