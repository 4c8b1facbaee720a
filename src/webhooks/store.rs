//! The table `coursed_webhooks`, the same SQL on both engines: what `coursed webhook` writes and
//! what the servers' deliveries read and move on (migrations/*/webhooks.sql says what each
//! column holds).

use crate::store::{DbError, Tx, Value};

/// A webhook's row (its `Debug` leaves the secret out).
#[derive(Clone, PartialEq, Eq)]
pub struct Webhook {
    pub id: String,
    pub url: String,
    /// Comma-separated type names; empty: every type.
    pub types: String,
    /// Comma-separated actions; empty: every action.
    pub actions: String,
    pub secret: String,
    /// The feed's place up to which revisions were delivered (or left out by the filter).
    pub cursor: i64,
    pub failing: bool,
    pub created_at: i64,
    pub failures: i64,
    pub failing_since: Option<i64>,
    pub next_at: i64,
    pub last_attempt_at: Option<i64>,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub delivered: i64,
    pub last_delivered_at: Option<i64>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook").field("id", &self.id).field("url", &self.url).field("cursor", &self.cursor).finish()
    }
}

const COLUMNS: &str = "id, url, types, actions, secret, feed_cursor, state, created_at, failures, failing_since, \
    next_at, last_attempt_at, last_status, last_error, delivered, last_delivered_at";

fn rows(tx: &mut dyn Tx, sql: &str, params: &[Value]) -> Result<Vec<Webhook>, DbError> {
    let mut out = Vec::new();
    tx.query(sql, params, &mut |r| {
        let text = |i| r.cell(i).as_str().unwrap_or_default().to_owned();
        out.push(Webhook {
            id: text(0),
            url: text(1),
            types: text(2),
            actions: text(3),
            secret: text(4),
            cursor: r.cell(5).as_i64().unwrap_or(0),
            failing: text(6) == "failing",
            created_at: r.cell(7).as_i64().unwrap_or(0),
            failures: r.cell(8).as_i64().unwrap_or(0),
            failing_since: r.cell(9).as_i64(),
            next_at: r.cell(10).as_i64().unwrap_or(0),
            last_attempt_at: r.cell(11).as_i64(),
            last_status: r.cell(12).as_i64(),
            last_error: r.cell(13).as_str().map(str::to_owned),
            delivered: r.cell(14).as_i64().unwrap_or(0),
            last_delivered_at: r.cell(15).as_i64(),
        });
    })?;
    Ok(out)
}

/// Every webhook, oldest first.
pub fn list(tx: &mut dyn Tx) -> Result<Vec<Webhook>, DbError> {
    rows(tx, &format!("SELECT {COLUMNS} FROM coursed_webhooks ORDER BY created_at, id"), &[])
}

/// The webhook `id`, if it exists.
pub fn get(tx: &mut dyn Tx, id: &str) -> Result<Option<Webhook>, DbError> {
    Ok(rows(tx, &format!("SELECT {COLUMNS} FROM coursed_webhooks WHERE id = ?"), &[Value::Text(id.to_owned())])?.pop())
}

/// The active webhooks due for a delivery at `now` whose lease is free (or `owner`'s) and
/// whose cursor is behind the feed's newest place: an idle webhook costs this read alone.
pub fn due(tx: &mut dyn Tx, now: i64, owner: &str) -> Result<Vec<Webhook>, DbError> {
    rows(
        tx,
        &format!(
            "SELECT {COLUMNS} FROM coursed_webhooks WHERE state = 'active' AND next_at <= ? \
             AND (lease_until < ? OR lease_owner = ?) \
             AND feed_cursor < (SELECT head FROM history_bounds) ORDER BY next_at, id"
        ),
        &[Value::Int(now), Value::Int(now), Value::Text(owner.to_owned())],
    )
}

/// Adds a webhook that delivers what the feed holds after `cursor`.
pub fn insert(tx: &mut dyn Tx, w: &Webhook) -> Result<(), DbError> {
    tx.execute(
        "INSERT INTO coursed_webhooks (id, url, types, actions, secret, feed_cursor, state, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, 'active', ?)",
        &[
            Value::Text(w.id.clone()),
            Value::Text(w.url.clone()),
            Value::Text(w.types.clone()),
            Value::Text(w.actions.clone()),
            Value::Text(w.secret.clone()),
            Value::Int(w.cursor),
            Value::Int(w.created_at),
        ],
    )
    .map(drop)
}

/// Removes the webhook `id`; false when there is none.
pub fn remove(tx: &mut dyn Tx, id: &str) -> Result<bool, DbError> {
    Ok(tx.execute("DELETE FROM coursed_webhooks WHERE id = ?", &[Value::Text(id.to_owned())])? > 0)
}

/// Makes a webhook active again and due now, its failures forgotten; false when there is none.
pub fn resume(tx: &mut dyn Tx, id: &str) -> Result<bool, DbError> {
    Ok(tx.execute(
        "UPDATE coursed_webhooks SET state = 'active', failures = 0, failing_since = NULL, next_at = 0 WHERE id = ?",
        &[Value::Text(id.to_owned())],
    )? > 0)
}

/// Takes the lease of webhook `id` for `owner` until `until`, when it is active, due at `now`
/// and no other server holds it; returns the webhook as it is now (read in the same
/// transaction: its cursor and failures are those its deliveries go on from), or `None`.
pub fn lease(tx: &mut dyn Tx, id: &str, owner: &str, now: i64, until: i64) -> Result<Option<Webhook>, DbError> {
    let taken = tx.execute(
        "UPDATE coursed_webhooks SET lease_owner = ?, lease_until = ? \
         WHERE id = ? AND state = 'active' AND next_at <= ? AND (lease_until < ? OR lease_owner = ?)",
        &[
            Value::Text(owner.to_owned()),
            Value::Int(until),
            Value::Text(id.to_owned()),
            Value::Int(now),
            Value::Int(now),
            Value::Text(owner.to_owned()),
        ],
    )? > 0;
    if taken {
        get(tx, id)
    } else {
        Ok(None)
    }
}

/// Gives the lease up (the next due server may take it at once).
pub fn release(tx: &mut dyn Tx, id: &str, owner: &str) -> Result<(), DbError> {
    tx.execute(
        "UPDATE coursed_webhooks SET lease_owner = NULL, lease_until = 0 WHERE id = ? AND lease_owner = ?",
        &[Value::Text(id.to_owned()), Value::Text(owner.to_owned())],
    )
    .map(drop)
}

/// What one delivery attempt ended in.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// `count` revisions answered with a 2xx (the last with `status`): the cursor moves to the
    /// place of the last (or past left-out revisions after it).
    Delivered { cursor: i64, status: u16, count: i64 },
    /// Revisions the filter leaves out (or that were pruned before they were delivered, which
    /// `note` says): the cursor moves past them, nothing was sent.
    Skipped { cursor: i64, note: Option<String> },
    /// Anything else: tried again from `next_at` on; `failing` once failures lasted too long.
    Failed { status: Option<u16>, error: String, next_at: i64, failing_after: i64 },
}

/// Records `outcome` of the delivery by `owner` at `now`, renewing its lease until `until`;
/// false when `owner` no longer holds the lease (another server took it: nothing recorded).
pub fn record(
    tx: &mut dyn Tx,
    id: &str,
    owner: &str,
    now: i64,
    until: i64,
    outcome: &Outcome,
) -> Result<bool, DbError> {
    // Only the holder of the lease records, and a cursor never moves backwards (a holder that
    // started from an older cursor than the row's has lost a race: nothing is recorded).
    let held = |tx: &mut dyn Tx, sql: &str, mut params: Vec<Value>, cursor: Option<i64>| -> Result<bool, DbError> {
        params.extend([Value::Text(id.to_owned()), Value::Text(owner.to_owned())]);
        let mut sql = format!("{sql} WHERE id = ? AND lease_owner = ?");
        if let Some(cursor) = cursor {
            sql.push_str(" AND feed_cursor <= ?");
            params.push(Value::Int(cursor));
        }
        Ok(tx.execute(&sql, &params)? > 0)
    };
    match outcome {
        Outcome::Delivered { cursor, status, count } => held(
            tx,
            "UPDATE coursed_webhooks SET feed_cursor = ?, failures = 0, failing_since = NULL, next_at = 0, \
             last_attempt_at = ?, last_status = ?, last_error = NULL, delivered = delivered + ?, \
             last_delivered_at = ?, lease_until = ?",
            vec![
                Value::Int(*cursor),
                Value::Int(now),
                Value::Int(i64::from(*status)),
                Value::Int(*count),
                Value::Int(now),
                Value::Int(until),
            ],
            Some(*cursor),
        ),
        Outcome::Skipped { cursor, note } => held(
            tx,
            "UPDATE coursed_webhooks SET feed_cursor = ?, lease_until = ?, last_error = coalesce(?, last_error)",
            vec![Value::Int(*cursor), Value::Int(until), note.clone().map_or(Value::Null, Value::Text)],
            Some(*cursor),
        ),
        Outcome::Failed { status, error, next_at, failing_after } => held(
            tx,
            "UPDATE coursed_webhooks SET failures = failures + 1, failing_since = coalesce(failing_since, ?), \
             next_at = ?, last_attempt_at = ?, last_status = ?, last_error = ?, \
             state = CASE WHEN coalesce(failing_since, ?) <= ? THEN 'failing' ELSE state END, \
             lease_owner = NULL, lease_until = 0",
            vec![
                Value::Int(now),
                Value::Int(*next_at),
                Value::Int(now),
                status.map_or(Value::Null, |s| Value::Int(i64::from(s))),
                Value::Text(error.clone()),
                Value::Int(now),
                Value::Int(now - failing_after),
            ],
            None,
        ),
    }
}
