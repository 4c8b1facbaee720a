//! Every change kept: the revisions the history triggers record (migrations `0006-history` on
//! SQLite, `0007-history` on PostgreSQL), read engine-neutrally through the `revision_log` view
//! each migration defines, and the bulk recording of loads that run with the triggers off.
//!
//! A revision is one change of one resource: its `action` (`create`, `update`, `delete`,
//! `restore`), its `number` among the resource's revisions (1, 2, ...), when (`at`), by whom
//! (`by`: the caller as the access log names it), and `changes`, a JSON object of each member
//! that changed, `[before, after]`, a to-one relationship under its own name holding the id.
//! The feed's order is `seq`: commit order (see `postgres/sequencer.rs` for PostgreSQL).
//! The design, with the reasons for it, is docs/design/history.md.

use super::tx::{DbError, Row, Tx, Value};
use crate::resources::{Kind, ResourceType, TYPES};

/// One revision as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// Its place in the feed; `None` until PostgreSQL's sequencer gave it one.
    pub seq: Option<i64>,
    /// The key its API id is made from.
    pub key: i64,
    pub resource_type: String,
    pub resource_id: String,
    pub number: i64,
    pub action: String,
    pub at: String,
    pub by: String,
    /// JSON: `{"member": [before, after], ...}`.
    pub changes: String,
}

const COLUMNS: &str = "seq, key, resource_type, resource_id, number, action, at, actor, changes";

fn revision(r: &dyn Row) -> Revision {
    let text = |i| r.cell(i).as_str().unwrap_or_default().to_owned();
    Revision {
        seq: r.cell(0).as_i64(),
        key: r.cell(1).as_i64().unwrap_or_default(),
        resource_type: text(2),
        resource_id: text(3),
        number: r.cell(4).as_i64().unwrap_or_default(),
        action: text(5),
        at: text(6),
        by: text(7),
        changes: text(8),
    }
}

fn revisions(tx: &mut dyn Tx, sql: &str, params: &[Value]) -> Result<Vec<Revision>, DbError> {
    let mut out = Vec::new();
    tx.query(sql, params, &mut |r| out.push(revision(r)))?;
    Ok(out)
}

/// The revision of `key`.
pub fn get(tx: &mut dyn Tx, key: i64) -> Result<Option<Revision>, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM revision_log WHERE key = ?");
    Ok(revisions(tx, &sql, &[Value::Int(key)])?.pop())
}

/// Up to `size` revisions of one resource, newest first, those numbered `below` or lower
/// (`i64::MAX` for the newest).
pub fn of_resource(
    tx: &mut dyn Tx,
    rt: &ResourceType,
    id: &str,
    below: i64,
    size: usize,
) -> Result<Vec<Revision>, DbError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM revision_log WHERE resource_type = ? AND resource_id = ? AND number <= ? \
         ORDER BY number DESC LIMIT ?"
    );
    let params = [Value::Text(rt.name.into()), Value::Text(id.into()), Value::Int(below), Value::Int(size as i64)];
    revisions(tx, &sql, &params)
}

/// The numbers of the oldest and newest revision kept of a resource; `None` when it has none.
pub fn numbers(tx: &mut dyn Tx, rt: &ResourceType, id: &str) -> Result<Option<(i64, i64)>, DbError> {
    let mut out = None;
    tx.query(
        "SELECT min(number), max(number) FROM revisions WHERE resource_type = ? AND resource_id = ?",
        &[Value::Text(rt.name.into()), Value::Text(id.into())],
        &mut |r| out = r.cell(0).as_i64().zip(r.cell(1).as_i64()),
    )?;
    Ok(out)
}

/// A page of the feed.
#[derive(Debug, Default)]
pub struct FeedPage {
    pub revisions: Vec<Revision>,
    /// Where the next page starts: the last revision given, or (when a type filter left
    /// revisions out) the last place examined; where it started when nothing is new.
    pub next: i64,
    /// The newest place in the feed.
    pub head: i64,
}

/// The most places of the feed one filtered page examines: a filter that matches little
/// answers in bounded time, its `next` the last place examined.
pub const FEED_SCAN: i64 = 10_000;
/// A page of the feed stops growing past this many bytes of changes (a revision of a long
/// text holds it twice): its `next` says where to go on.
const FEED_BYTES: usize = 4 << 20;
/// Rows read at a time while a page grows.
const FEED_CHUNK: i64 = 64;

/// Up to `size` revisions of the feed after the place `after`, in feed order, of the types
/// `types` (every type when empty), read in one snapshot.
pub fn feed(tx: &mut dyn Tx, after: i64, size: usize, types: &[&ResourceType]) -> crate::error::Result<FeedPage> {
    super::tx::snapshot(tx, |tx| {
        let head = head(tx)?;
        let window = if types.is_empty() { i64::MAX } else { after.saturating_add(FEED_SCAN).min(head) };
        let mut filter = String::new();
        if !types.is_empty() {
            filter = format!(" AND {}", tx.dialect().in_ids("resource_type"));
        }
        let sql = format!("SELECT {COLUMNS} FROM revision_log WHERE seq > ? AND seq <= ?{filter} ORDER BY seq LIMIT ?");
        let mut page = FeedPage { revisions: Vec::new(), next: after, head };
        let (mut from, mut bytes) = (after, 0);
        while page.revisions.len() < size && bytes < FEED_BYTES {
            let want = (size - page.revisions.len()).min(FEED_CHUNK as usize);
            let mut params = vec![Value::Int(from), Value::Int(window)];
            if !types.is_empty() {
                params.push(Value::Ids(types.iter().map(|t| t.name.to_owned()).collect()));
            }
            params.push(Value::Int(want as i64));
            let got = revisions(tx, &sql, &params)?;
            let n = got.len();
            for r in got {
                bytes += r.changes.len();
                from = r.seq.unwrap_or(from);
                page.revisions.push(r);
            }
            if n < want {
                // Everything up to the window was examined.
                if !types.is_empty() {
                    from = window.max(from);
                }
                break;
            }
        }
        page.next = from;
        Ok(page)
    })
}

/// The place of the newest revision in the feed (0 when there is none).
pub fn head(tx: &mut dyn Tx) -> Result<i64, DbError> {
    Ok(tx.first("SELECT head FROM history_bounds", &[])?.and_then(|v| v.cell().as_i64()).unwrap_or(0))
}

/// The place before the oldest revision kept: the feed begins after it.
pub fn floor(tx: &mut dyn Tx) -> Result<i64, DbError> {
    Ok(tx.first("SELECT floor FROM history_bounds", &[])?.and_then(|v| v.cell().as_i64()).unwrap_or(0))
}

/// Records one revision of `action` (`create` or `delete`) by `by` for every resource of `rt`,
/// in id order: what a bulk load, which runs with the history triggers off, does once instead.
/// A `create` holds every member as it is now; a `delete` every member as it was.
pub fn record_all(tx: &mut dyn Tx, rt: &ResourceType, action: &str, by: &str) -> Result<u64, DbError> {
    let d = tx.dialect();
    let (object, array) = d.json_builders();
    let members = rt
        .attributes
        .iter()
        .map(|a| (a.name, a.name, a.kind))
        .chain(rt.to_one().map(|r| (r.name, r.fk.column, Kind::NullableText)));
    let pairs: Vec<String> = members
        .map(|(name, column, kind)| {
            let value = d.json_value(&format!("r.{column}"), kind);
            let pair = if action == "delete" { format!("{value}, NULL") } else { format!("NULL, {value}") };
            format!("'{name}', {array}({pair})")
        })
        .collect();
    let (t, table) = (rt.name, rt.table);
    let insert = format!(
        "INSERT INTO revisions (resource_type, resource_id, number, action, at, actor, changes) \
         SELECT '{t}', r.id, \
                coalesce((SELECT max(number) FROM revisions WHERE resource_type = '{t}' AND resource_id = r.id), 0) + 1, \
                ?, {}, ?, {object}({}) \
         FROM {table} AS r ORDER BY r.id",
        d.revision_time(),
        pairs.join(", ")
    );
    tx.execute(&d.noted_for_feed(&insert), &[Value::Text(action.into()), Value::Text(by.into())])
}

/// [`record_all`] for every type: deletes children first, creates parents first (the order a
/// replay of the feed needs).
pub fn record_every(tx: &mut dyn Tx, action: &str, by: &str) -> Result<u64, DbError> {
    let mut n = 0;
    let mut types: Vec<&ResourceType> = TYPES.to_vec();
    if action == "delete" {
        types.reverse();
    }
    for rt in types {
        n += record_all(tx, rt, action, by)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use crate::resources::TYPES;

    /// The triggers are written out in the migrations (a released migration never changes):
    /// each must name every member of its type, so that no attribute added later is left out
    /// of the history without a migration that adds it.
    #[test]
    fn the_triggers_name_every_member_of_their_type() {
        let sqlite = include_str!("../../migrations/sqlite/0006-history.sql");
        let postgres = include_str!("../../migrations/postgres/0007-history.sql");
        for rt in TYPES {
            let columns =
                rt.attributes.iter().map(|a| (a.name, a.name)).chain(rt.to_one().map(|r| (r.name, r.fk.column)));
            for (name, column) in columns {
                for (engine, text) in [("sqlite", sqlite), ("postgres", postgres)] {
                    for (op, row) in [("insert", "NEW"), ("update", "OLD"), ("delete", "OLD")] {
                        let trigger = trigger_text(engine, text, rt.table, op);
                        assert!(
                            trigger.contains(&format!("'{name}'")) && trigger.contains(&format!("{row}.{column}")),
                            "the {engine} {op} trigger of {} leaves out {name}",
                            rt.name
                        );
                    }
                }
            }
        }
    }

    /// The text of one trigger (SQLite) or of the function behind a table's triggers, with the
    /// branch of `op` (PostgreSQL).
    fn trigger_text<'a>(engine: &str, text: &'a str, table: &str, op: &str) -> &'a str {
        let start = match engine {
            "sqlite" => format!("CREATE TRIGGER {table}_revision_{op} "),
            _ => format!("CREATE FUNCTION {table}_revision()"),
        };
        let from = text.find(&start).unwrap_or_else(|| panic!("no {start} in the {engine} migration"));
        let rest = &text[from..];
        let end = rest.find(if engine == "sqlite" { "END;" } else { "END $$" }).map_or(rest.len(), |i| i + 3);
        let whole = &rest[..end];
        if engine == "sqlite" {
            return whole;
        }
        let branch = match op {
            "insert" => "'INSERT'",
            "delete" => "'DELETE'",
            _ => "ELSE",
        };
        let b = whole.find(branch).unwrap_or_else(|| panic!("no {op} branch in {table}_revision()"));
        let tail = &whole[b..];
        let stop = tail[1..].find("ELS").map_or(tail.len(), |i| i + 1);
        &tail[..stop]
    }
}
