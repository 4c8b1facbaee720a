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

mod carry;

use serde_json::{json, Map, Value as Json};

pub use self::carry::{carry, count, forget_all, from_object, read_every, Carrier};

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

/// The id of the revision of `key`: UUID-shaped, as every id of the API (version 8: custom),
/// holding the key itself.
pub fn revision_id(key: i64) -> String {
    let k = key as u64;
    format!("{:08x}-0000-8000-8000-{:012x}", k >> 48, k & 0xffff_ffff_ffff)
}

/// The key a revision id holds; `None` for anything [`revision_id`] does not write.
pub fn revision_key(id: &str) -> Option<i64> {
    let (high, low) = id.split_once("-0000-8000-8000-")?;
    let hex = |s: &str, n: usize| {
        (s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
    };
    // The high part holds the key's top 15 bits (keys are positive i64).
    let high = hex(high, 8).filter(|h| *h <= 0x7fff)?;
    let key = (high << 48) | hex(low, 12)?;
    i64::try_from(key).ok().filter(|k| *k > 0)
}

impl Revision {
    /// Its `changes` as the API shows them: `{"member": {"before": ..., "after": ...}}`, a
    /// to-one relationship's values as resource identifiers.
    pub fn changes_object(&self) -> Map<String, Json> {
        let rt = crate::resources::by_name(&self.resource_type);
        let mut changes = Map::new();
        if let Ok(Json::Object(members)) = serde_json::from_str::<Json>(&self.changes) {
            for (name, pair) in members {
                let (before, after) = match pair {
                    Json::Array(mut both) if both.len() == 2 => {
                        let after = both.pop().unwrap_or(Json::Null);
                        (both.pop().unwrap_or(Json::Null), after)
                    }
                    other => (Json::Null, other),
                };
                // A to-one relationship's value is the id of the resource it names.
                let parent =
                    rt.and_then(|rt| rt.relationship(&name)).filter(|r| r.is_to_one()).map(|r| r.fk.parent.name);
                let value = |v: Json| match (parent, v) {
                    (Some(ty), Json::String(id)) => json!({"type": ty, "id": id}),
                    (_, v) => v,
                };
                changes.insert(name, json!({"before": value(before), "after": value(after)}));
            }
        }
        changes
    }

    /// The revision as a resource object of type `revisions`, without links: what the API
    /// shows of it and what a bundle carries.
    pub fn resource_object(&self) -> Json {
        json!({
            "type": "revisions",
            "id": revision_id(self.key),
            "attributes": {
                "action": self.action,
                "number": self.number,
                "at": self.at,
                "by": self.by,
                "changes": self.changes_object(),
            },
            "relationships": {"resource": {"data": {"type": self.resource_type, "id": self.resource_id}}},
        })
    }
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
/// (`i64::MAX` for the newest); `None` when their changes come to more than `budget` bytes
/// (rows past it are read but not kept).
pub fn of_resource(
    tx: &mut dyn Tx,
    rt: &ResourceType,
    id: &str,
    below: i64,
    size: usize,
    budget: usize,
) -> Result<Option<Vec<Revision>>, DbError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM revision_log WHERE resource_type = ? AND resource_id = ? AND number <= ? \
         ORDER BY number DESC LIMIT ?"
    );
    let params = [Value::Text(rt.name.into()), Value::Text(id.into()), Value::Int(below), Value::Int(size as i64)];
    let (mut out, mut bytes) = (Vec::new(), 0);
    tx.query(&sql, &params, &mut |r| {
        if bytes <= budget {
            let r = revision(r);
            bytes += r.changes.len();
            out.push(r);
        }
    })?;
    Ok((bytes <= budget).then_some(out))
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
    /// The place asked for is below the floor: what came after it was pruned (no revisions).
    pub pruned: bool,
}

impl FeedPage {
    /// Whether the feed holds more after this page (unfiltered reads).
    pub fn more(&self) -> bool {
        self.next < self.head
    }
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
        let head = published(tx)?;
        if after < floor(tx)? {
            return Ok(FeedPage { revisions: Vec::new(), next: after, head, pruned: true });
        }
        let window = if types.is_empty() { head } else { after.saturating_add(FEED_SCAN).min(head) };
        let mut filter = String::new();
        if !types.is_empty() {
            filter = format!(" AND {}", tx.dialect().in_ids("resource_type"));
        }
        let sql = format!("SELECT {COLUMNS} FROM revision_log WHERE seq > ? AND seq <= ?{filter} ORDER BY seq LIMIT ?");
        let mut page = FeedPage { revisions: Vec::new(), next: after, head, pruned: false };
        let (mut from, mut bytes) = (after, 0);
        while page.revisions.len() < size && bytes < FEED_BYTES {
            let want = (size - page.revisions.len()).min(FEED_CHUNK as usize);
            let mut params = vec![Value::Int(from), Value::Int(window)];
            if !types.is_empty() {
                params.push(Value::Ids(types.iter().map(|t| t.name.to_owned()).collect()));
            }
            params.push(Value::Int(want as i64));
            // Rows past the budget are read but not kept (at most a chunk of them).
            let (mut n, mut full) = (0, false);
            tx.query(&sql, &params, &mut |row| {
                n += 1;
                if bytes >= FEED_BYTES {
                    full = true;
                    return;
                }
                let r = revision(row);
                bytes += r.changes.len();
                from = r.seq.unwrap_or(from);
                page.revisions.push(r);
            })?;
            if full {
                break;
            }
            let n = n as usize;
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

/// Calls `each` with every revision placed after `after` and up to `until`, in feed order, read
/// a thousand at a time; returns how many.
pub fn read_after(tx: &mut dyn Tx, after: i64, until: i64, each: &mut dyn FnMut(Revision)) -> Result<u64, DbError> {
    let sql = format!("SELECT {COLUMNS} FROM revision_log WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT 1000");
    let (mut from, mut n) = (after, 0);
    loop {
        let page = revisions(tx, &sql, &[Value::Int(from), Value::Int(until)])?;
        let last = page.len() < 1000;
        for r in page {
            from = r.seq.unwrap_or(from);
            n += 1;
            each(r);
        }
        if last {
            return Ok(n);
        }
    }
}

/// The place of the newest revision in the feed (0 when there is none).
pub fn head(tx: &mut dyn Tx) -> Result<i64, DbError> {
    Ok(tx.first("SELECT head FROM history_bounds", &[])?.and_then(|v| v.cell().as_i64()).unwrap_or(0))
}

/// The feed's head as its readers are served it: [`head`], or less while the newest revisions
/// are committed but not yet on the disk (see `tx::Unflushed`).
pub fn published(tx: &mut dyn Tx) -> Result<i64, DbError> {
    let head = head(tx)?;
    Ok(tx.unflushed_from().map_or(head, |before| head.min(before)))
}

/// The place before the oldest revision kept: the feed begins after it.
pub fn floor(tx: &mut dyn Tx) -> Result<i64, DbError> {
    Ok(tx.first("SELECT floor FROM history_bounds", &[])?.and_then(|v| v.cell().as_i64()).unwrap_or(0))
}

/// Every member of `rt` a revision records, as (name, column, kind): the attributes, then the
/// to-one relationships (their column holds the id).
fn members(rt: &ResourceType) -> impl Iterator<Item = (&'static str, &'static str, Kind)> + '_ {
    let attributes = rt.attributes.iter().map(|a| (a.name, a.name, a.kind));
    attributes.chain(rt.to_one().map(|r| (r.name, r.fk.column, Kind::NullableText)))
}

/// The resource `id` of `rt` as a revision shows it (every member, as JSON), if it exists.
pub(crate) fn current(tx: &mut dyn Tx, rt: &ResourceType, id: &str) -> Result<Option<Map<String, Json>>, DbError> {
    let d = tx.dialect();
    let (object, _) = d.json_builders();
    let pairs: Vec<String> = members(rt)
        .map(|(name, column, kind)| format!("'{name}', {}", d.json_value(&format!("r.{column}"), kind)))
        .collect();
    let sql = format!("SELECT CAST({object}({}) AS TEXT) FROM {} AS r WHERE r.id = ?", pairs.join(", "), rt.table);
    let text = tx.strings(&sql, &[Value::Text(id.to_owned())])?;
    Ok(text.first().and_then(|t| serde_json::from_str::<Json>(t).ok()).and_then(|j| match j {
        Json::Object(m) => Some(m),
        _ => None,
    }))
}

/// The most revisions a restore walks back over (newer than the one restored).
const RESTORE_DEPTH: usize = 10_000;

/// The resource as it was right after `rev` (`None`: it did not exist then), worked out
/// backwards from how it is now: each newer revision, newest first, gives its members their
/// `before` values. Needs no revision older than `rev`.
fn state_after(tx: &mut dyn Tx, rt: &ResourceType, rev: &Revision) -> crate::error::Result<Option<Map<String, Json>>> {
    let mut state = current(tx, rt, &rev.resource_id)?;
    let newest = numbers(tx, rt, &rev.resource_id)?.map_or(rev.number, |(_, max)| max);
    if newest - rev.number > RESTORE_DEPTH as i64 {
        return Err(conflict(format!(
            "Revision {} is more than {RESTORE_DEPTH} changes ago; restore a later revision first.",
            rev.number
        )));
    }
    // Newest first, a few at a time: a revision may hold a long text twice.
    let sql = format!(
        "SELECT {COLUMNS} FROM revision_log WHERE resource_type = ? AND resource_id = ? AND number > ? \
         AND number <= ? ORDER BY number DESC LIMIT 16"
    );
    let mut upper = newest;
    while upper > rev.number {
        let params = [
            Value::Text(rt.name.into()),
            Value::Text(rev.resource_id.clone()),
            Value::Int(rev.number),
            Value::Int(upper),
        ];
        let newer = revisions(tx, &sql, &params)?;
        let Some(oldest) = newer.last().map(|r| r.number) else { break };
        upper = oldest - 1;
        state = unwind(state, newer)?;
    }
    Ok(state)
}

/// `state` as it was before `newer` (newest first).
fn unwind(
    mut state: Option<Map<String, Json>>,
    newer: Vec<Revision>,
) -> crate::error::Result<Option<Map<String, Json>>> {
    for r in newer {
        let Ok(Json::Object(changes)) = serde_json::from_str::<Json>(&r.changes) else {
            return Err(crate::error::Error::internal(format!("revision {} holds no changes object", r.key)));
        };
        let before = |pair: &Json| pair.get(0).cloned().unwrap_or(Json::Null);
        // A revision that made the row (a create, or a restore that brought it back): before
        // it, there was none.
        if changes.get("created_at").is_some_and(|c| before(c).is_null()) {
            state = None;
            continue;
        }
        let s = state.get_or_insert_with(Map::new);
        for (name, pair) in &changes {
            s.insert(name.clone(), before(pair));
        }
    }
    Ok(state)
}

fn conflict(detail: String) -> crate::error::Error {
    crate::error::Problem::new(warp::http::StatusCode::CONFLICT, "restore_conflict", detail).into()
}

/// Brings the resource of revision `key` back to how it was right after that revision:
/// attributes and to-one relationships, re-created under its own id (and `created_at`) when
/// it was deleted since. `check` runs once the resource is locked, with its type and id (the
/// caller's `If-Match`). Records a revision (`restore`, when the caller's context says so), or
/// none when the resource is as it was then. A conflict (the revision is a deletion, a parent
/// is gone, the `external_id` is taken) is a 409 that changes nothing.
pub fn restore(
    tx: &mut dyn Tx,
    key: i64,
    check: &dyn Fn(&mut dyn Tx, &'static ResourceType, &str) -> crate::error::Result<()>,
) -> crate::error::Result<(&'static ResourceType, super::Record)> {
    use crate::jsonapi::body::{self, Mode};
    let rev = get(tx, key)?.ok_or_else(|| crate::error::Error::not_found(format!("No revision {key}.")))?;
    let rt = crate::resources::by_name(&rev.resource_type)
        .ok_or_else(|| crate::error::Error::internal(format!("a revision of an unknown type {}", rev.resource_type)))?;
    let id = rev.resource_id.clone();
    if let Some(lock) = tx.dialect().lock_row(rt.table) {
        tx.execute(&lock, &[Value::Text(id.clone())])?;
    }
    check(tx, rt, &id)?;
    let (t, n) = (rt.name, rev.number);
    if rev.action == "delete" {
        return Err(conflict(format!(
            "Revision {n} of {t} {id} records its deletion: there is nothing to bring back. Restore revision {} instead.",
            n - 1
        )));
    }
    let exists = current(tx, rt, &id)?.is_some();
    let Some(state) = state_after(tx, rt, &rev)? else {
        return Err(conflict(format!("{t} {id} did not exist right after revision {n}.")));
    };
    let mut relationships = Map::new();
    for rel in rt.to_one() {
        let target = rel.target();
        let data = match state.get(rel.name) {
            Some(Json::String(parent)) => {
                let sql = format!("SELECT 1 FROM {} WHERE id = ?", target.table);
                if !tx.exists(&sql, &[Value::Text(parent.clone())])? {
                    return Err(conflict(format!(
                        "Its {} {parent} no longer exists: restore that first, or link another.",
                        rel.name
                    )));
                }
                serde_json::json!({"type": target.name, "id": parent})
            }
            _ => Json::Null,
        };
        relationships.insert(rel.name.into(), serde_json::json!({ "data": data }));
    }
    for a in rt.attributes.iter().filter(|a| a.unique) {
        if let Some(Json::String(v)) = state.get(a.name) {
            let sql = format!("SELECT id FROM {} WHERE {} = ? AND id <> ?", rt.table, a.name);
            if let Some(holder) = tx.strings(&sql, &[Value::Text(v.clone()), Value::Text(id.clone())])?.pop() {
                return Err(conflict(format!("Its {} {v:?} is now held by {t} {holder}.", a.name)));
            }
        }
    }
    let attributes: Map<String, Json> = rt
        .attributes
        .iter()
        .filter(|a| a.kind != Kind::Timestamp)
        .map(|a| (a.name.to_owned(), state.get(a.name).cloned().unwrap_or(Json::Null)))
        .collect();
    let data = serde_json::json!({"type": t, "id": id, "attributes": attributes, "relationships": relationships});
    let mode = if exists { Mode::Update(&id) } else { Mode::Whole(&id) };
    let changes = body::resource_data(rt, &data, mode)?;
    let rec = if exists {
        super::write::update(tx, rt, &id, &changes)?
    } else {
        let created = state.get("created_at").and_then(Json::as_str).and_then(crate::time::parse_ms);
        super::write::create_as(tx, rt, id.clone(), created, &changes)?
    };
    Ok((rt, rec))
}

/// Revisions deleted in one transaction of [`prune`].
pub const PRUNE_BATCH: usize = 10_000;

/// The place in the feed where a prune of what was recorded before `before` (ms) cuts: the
/// last revision recorded before it, found by halving over places (times follow places, give
/// or take the length of a commit). 0 when there is none.
pub fn prune_cut(tx: &mut dyn Tx, before: i64) -> Result<i64, DbError> {
    let before = crate::time::format_ms(before);
    let (floor, head) = (floor(tx)?, head(tx)?);
    let (mut low, mut high) = (floor, head);
    // Invariant: every place up to `low` is before; `high` and beyond are not (unless it is the
    // head, checked last).
    while low < high {
        let mid = low + (high - low + 1) / 2;
        let mut at = None;
        tx.query(
            "SELECT seq, at FROM revision_log WHERE seq >= ? ORDER BY seq LIMIT 1",
            &[Value::Int(mid)],
            &mut |r| at = r.cell(1).as_str().map(str::to_owned),
        )?;
        match at {
            Some(at) if at < before => low = mid,
            _ => high = mid - 1,
        }
    }
    Ok(low)
}

/// Raises the floor of the feed to `cut`: from its commit on, a reader after an older place is
/// told its revisions are pruned, before any is deleted (see [`prune`]).
pub fn raise_floor(tx: &mut dyn Tx, cut: i64) -> Result<(), DbError> {
    let (_, _, raise) = tx.dialect().pruning();
    tx.execute(raise, &[Value::Int(cut), Value::Int(cut)]).map(drop)
}

/// Deletes the revisions up to the place `cut` (at most the floor, raised first by
/// [`raise_floor`] in a transaction of its own), at most [`PRUNE_BATCH`] of them (call it again
/// while it deletes that many), keeping the newest revision of each resource that exists (so
/// that its numbers go on and it keeps a history) and the newest of all (so that SQLite never
/// hands out a place again), from the place after `after` on (0 at first, then what the
/// previous batch returned: the revisions kept before it are not examined again). Returns how
/// many it deleted and the place of the last; `None` when another transaction (a replica's)
/// is pruning now, which leaves the work to it.
pub fn prune(tx: &mut dyn Tx, cut: i64, after: i64) -> Result<Option<(u64, i64)>, DbError> {
    if let Some(turn) = tx.dialect().prune_turn() {
        if tx.first(turn, &[])?.and_then(|v| v.cell().as_i64()) != Some(1) {
            return Ok(None);
        }
    }
    let live = TYPES
        .iter()
        .map(|rt| {
            format!("WHEN '{}' THEN EXISTS (SELECT 1 FROM {} AS t WHERE t.id = r.resource_id)", rt.name, rt.table)
        })
        .collect::<Vec<_>>()
        .join(" ");
    let sql = format!(
        "SELECT seq, CAST(key AS TEXT) FROM revision_log AS r \
         WHERE seq > ? AND seq <= ? AND seq < (SELECT head FROM history_bounds) \
           AND NOT (r.number = (SELECT max(x.number) FROM revisions AS x \
                                WHERE x.resource_type = r.resource_type AND x.resource_id = r.resource_id) \
                    AND CASE r.resource_type {live} ELSE FALSE END) \
         ORDER BY seq LIMIT ?"
    );
    // Nothing above the floor: a reader may still be reading there.
    let cut = cut.min(floor(tx)?);
    let (mut keys, mut last) = (Vec::new(), after);
    tx.query(&sql, &[Value::Int(after), Value::Int(cut), Value::Int(PRUNE_BATCH as i64)], &mut |r| {
        last = r.cell(0).as_i64().unwrap_or(last);
        keys.extend(r.cell(1).as_str().map(str::to_owned));
    })?;
    let (revisions, feed, _) = tx.dialect().pruning();
    let n = keys.len() as u64;
    if !keys.is_empty() {
        if let Some(feed) = feed {
            tx.execute(feed, &[Value::Ids(keys.clone())])?;
        }
        tx.execute(revisions, &[Value::Ids(keys)])?;
    }
    Ok(Some((n, last)))
}

/// Records one revision of `action` (`create` or `delete`) by `by` for every resource of `rt`,
/// in id order: what a bulk load, which runs with the history triggers off, does once instead.
/// A `create` holds every member as it is now; a `delete` every member as it was.
pub fn record_all(tx: &mut dyn Tx, rt: &ResourceType, action: &str, by: &str) -> Result<u64, DbError> {
    let d = tx.dialect();
    let (object, array) = d.json_builders();
    let pairs: Vec<String> = members(rt)
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
    use super::{revision_id, revision_key};
    use crate::resources::TYPES;

    #[test]
    fn revision_ids_hold_their_key_and_nothing_else_parses() {
        for key in [1, 2, 255, 1 << 40, (1 << 48) + 7, i64::MAX] {
            let id = revision_id(key);
            assert_eq!(id.len(), 36);
            assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
            assert_eq!(revision_key(&id), Some(key), "{id}");
        }
        for bad in [
            "",
            "00000000-0000-8000-8000-00000000000",
            "00000000-0000-8000-8000-000000000000",
            "00000000-0000-8000-8000-00000000000A",
            "0000000-0000-8000-8000-0000000000001",
            "00000000-0000-4000-8000-000000000001",
            "01a221d7-42c0-743b-b565-0ce8e4ddcc3e",
            "00010000-0000-8000-8000-000000000001",
            "00008000-0000-8000-8000-000000000001",
        ] {
            assert_eq!(revision_key(bad), None, "{bad}");
        }
    }

    /// The triggers are written out in the migrations (a released migration never changes):
    /// each must name every member of its type, so that no attribute added later is left out
    /// of the history without a migration that adds it.
    #[test]
    fn the_triggers_name_every_member_of_their_type() {
        let sqlite = include_str!("../../../migrations/sqlite/0006-history.sql");
        let postgres = include_str!("../../../migrations/postgres/0007-history.sql");
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
