//! History carried from one database to another: `coursed copy`, a backup of PostgreSQL, and
//! bundles written with `coursed export --history` and read by `coursed import`.
//!
//! The revisions are read from the source in feed order ([`read_every`]) and written to the
//! target in that order ([`Carrier`]) with their resource, number, action, time, author and
//! changes as they were. Their ids and places in the feed are the target's own: a revision id
//! or cursor of the source means nothing to the target.

use serde_json::{Map, Value as Json};

use super::{revision, Revision, COLUMNS};
use crate::resources::{self, Kind};
use crate::store::tx::{DbError, Tx, Value};

/// Revisions read, or written, by one statement.
const PAGE: i64 = 1000;
const ROWS_PER_INSERT: usize = 100;

/// Calls `each` with every revision kept, in feed order, then those PostgreSQL has not placed
/// in the feed yet (committed since its sequencer's last round), in the order recorded.
/// Pages by place (then by key), so a caller in one snapshot reads each once.
pub fn read_every(tx: &mut dyn Tx, each: &mut dyn FnMut(Revision) -> Result<(), String>) -> Result<u64, String> {
    let placed = format!("SELECT {COLUMNS} FROM revision_log WHERE seq > ? ORDER BY seq LIMIT {PAGE}");
    let unplaced =
        format!("SELECT {COLUMNS} FROM revision_log WHERE seq IS NULL AND key > ? ORDER BY key LIMIT {PAGE}");
    let by_place = |r: &Revision| r.seq.unwrap_or_default();
    let by_key = |r: &Revision| r.key;
    let mut n = 0;
    for (sql, order) in [(&placed, &by_place as &dyn Fn(&Revision) -> i64), (&unplaced, &by_key)] {
        let mut after = 0;
        loop {
            let mut page = Vec::new();
            tx.query(sql, &[Value::Int(after)], &mut |r| page.push(revision(r))).map_err(|e| e.to_string())?;
            let last = page.len() < PAGE as usize;
            for r in page {
                after = order(&r);
                n += 1;
                each(r)?;
            }
            if last {
                break;
            }
        }
    }
    Ok(n)
}

/// How many revisions a database keeps.
pub fn count(tx: &mut dyn Tx) -> Result<u64, DbError> {
    Ok(tx.first("SELECT count(*) FROM revisions", &[])?.and_then(|v| v.cell().as_i64()).unwrap_or(0) as u64)
}

/// Forgets every revision and raises the floor of the feed to its head, so that a client
/// reading with a cursor from before is told its revisions are gone (a 410) rather than shown
/// another database's history: what replacing a catalogue with its history does first.
pub fn forget_all(tx: &mut dyn Tx) -> Result<(), DbError> {
    for sql in tx.dialect().forgetting_history() {
        tx.execute(sql, &[])?;
    }
    Ok(())
}

/// Writes carried revisions in the order pushed, a multi-row statement at a time, each after
/// every revision the target holds in its feed.
pub struct Carrier {
    rows: Vec<Value>,
    pending: usize,
    /// The next place in the feed, where the engine gives places on insert (SQLite).
    next_place: Option<i64>,
    /// Revisions written.
    pub written: u64,
}

impl Carrier {
    pub fn new(tx: &mut dyn Tx) -> Result<Carrier, DbError> {
        let next_place = if tx.dialect().places_revisions_on_insert() {
            // After the head and the floor alike: a floor raised by `forget_all` stays below.
            let (head, floor) = (super::head(tx)?, super::floor(tx)?);
            Some(head.max(floor) + 1)
        } else {
            None
        };
        Ok(Carrier { rows: Vec::new(), pending: 0, next_place, written: 0 })
    }

    pub fn push(&mut self, tx: &mut dyn Tx, r: Revision) -> Result<(), DbError> {
        if let Some(place) = &mut self.next_place {
            self.rows.push(Value::Int(*place));
            *place += 1;
        }
        self.rows.extend([
            Value::Text(r.resource_type),
            Value::Text(r.resource_id),
            Value::Int(r.number),
            Value::Text(r.action),
            Value::Text(r.at),
            Value::Text(r.by),
            Value::Text(r.changes),
        ]);
        self.pending += 1;
        if self.pending == ROWS_PER_INSERT {
            self.flush(tx)?;
        }
        Ok(())
    }

    fn flush(&mut self, tx: &mut dyn Tx) -> Result<(), DbError> {
        if self.pending == 0 {
            return Ok(());
        }
        let d = tx.dialect();
        let (place, placeholder) = if self.next_place.is_some() { ("seq, ", "?, ") } else { ("", "") };
        let row = format!("({placeholder}?, ?, ?, ?, ?, ?, {})", d.json_param());
        let insert = format!(
            "INSERT INTO revisions ({place}resource_type, resource_id, number, action, at, actor, changes) VALUES {}",
            vec![row; self.pending].join(", ")
        );
        tx.execute(&d.noted_for_feed(&insert), &self.rows)?;
        self.written += self.pending as u64;
        self.rows.clear();
        self.pending = 0;
        Ok(())
    }

    /// Writes what is buffered; returns how many revisions were written.
    pub fn finish(mut self, tx: &mut dyn Tx) -> Result<u64, DbError> {
        self.flush(tx)?;
        Ok(self.written)
    }
}

/// Copies every revision `from` keeps into `to`, in feed order (see [`read_every`]).
pub fn carry(from: &mut dyn Tx, to: &mut dyn Tx) -> Result<u64, String> {
    let mut carrier = Carrier::new(to).map_err(|e| e.to_string())?;
    read_every(from, &mut |r| carrier.push(to, r).map_err(|e| e.to_string()))?;
    carrier.finish(to).map_err(|e| e.to_string())
}

/// A revision from its resource object as [`Revision::resource_object`] writes it (a line of
/// a bundle), checked: a resource type and id, a known action, a number from 1, a time, an
/// author, and changes of the type's own members, each `{"before": ..., "after": ...}`.
pub fn from_object(json: &Json) -> Result<Revision, String> {
    let attrs = json.get("attributes").and_then(Json::as_object).ok_or("a revision needs `attributes`")?;
    let data = &json["relationships"]["resource"]["data"];
    let type_name = data["type"].as_str().ok_or("relationships.resource.data.type: must name a resource type")?;
    let rt = resources::by_name(type_name)
        .ok_or_else(|| format!("relationships.resource.data.type: unknown type `{type_name}`"))?;
    let id = data["id"]
        .as_str()
        .and_then(crate::jsonapi::query::normalize_id)
        .ok_or("relationships.resource.data.id: must be a UUID string")?;
    let action = attrs.get("action").and_then(Json::as_str).unwrap_or_default();
    if !["create", "update", "delete", "restore"].contains(&action) {
        return Err("attributes.action: must be create, update, delete or restore".into());
    }
    let number = attrs.get("number").and_then(Json::as_i64).filter(|n| *n > 0);
    let number = number.ok_or("attributes.number: must be a whole number from 1")?;
    let at = attrs.get("at").and_then(Json::as_str).and_then(crate::time::parse_ms);
    let at = crate::time::format_ms(at.ok_or("attributes.at: must be a time like 2026-11-23T06:15:00.000Z")?);
    let by = attrs.get("by").and_then(Json::as_str).filter(|b| !b.is_empty() && b.len() <= 256);
    let by = by.ok_or("attributes.by: must be a name of 1 to 256 bytes")?.to_owned();
    let given = attrs.get("changes").and_then(Json::as_object).ok_or("attributes.changes: must be an object")?;
    let mut changes = Map::new();
    for (name, pair) in given {
        let at = |detail: &str| format!("attributes.changes.{name}: {detail}");
        let member = super::members(rt).find(|(n, _, _)| n == name);
        let Some((_, _, kind)) = member else {
            return Err(at(&format!("{} have no such member", rt.name)));
        };
        let to_one = rt.relationship(name).is_some_and(|r| r.is_to_one());
        let Some(pair) = pair.as_object().filter(|p| p.len() == 2) else {
            return Err(at("must be {\"before\": ..., \"after\": ...}"));
        };
        let mut both = Vec::with_capacity(2);
        for side in ["before", "after"] {
            let v = pair.get(side).ok_or_else(|| at("must be {\"before\": ..., \"after\": ...}"))?;
            let stored = match v {
                Json::Null => Json::Null,
                Json::Object(o) if to_one => match o.get("id").and_then(Json::as_str) {
                    Some(id) => Json::String(id.to_owned()),
                    None => return Err(at(&format!("{side}: must be a resource identifier or null"))),
                },
                Json::String(_) if matches!(kind, Kind::Text | Kind::NullableText | Kind::Timestamp) && !to_one => {
                    v.clone()
                }
                Json::Bool(_) if kind == Kind::Bool => v.clone(),
                Json::Number(n) if kind == Kind::Integer && n.is_i64() => v.clone(),
                _ => return Err(at(&format!("{side}: not a value {name} can hold"))),
            };
            both.push(stored);
        }
        changes.insert(name.clone(), Json::Array(both));
    }
    Ok(Revision {
        seq: None,
        key: 0,
        resource_type: rt.name.to_owned(),
        resource_id: id,
        number,
        action: action.to_owned(),
        at,
        by,
        changes: Json::Object(changes).to_string(),
    })
}
