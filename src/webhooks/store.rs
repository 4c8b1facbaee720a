//! The table `coursed_webhooks`, the same SQL on both engines: what `coursed webhook` writes and
//! what the servers' deliveries read and move on (migrations/*/webhooks.sql says what each
//! column holds).

use crate::store::{DbError, Tx, Value};

/// A webhook's row.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Takes (or renews) the lease of webhook `id` for `owner` until `until`, unless another server
/// holds it still; true when `owner` holds it now.
pub fn lease(tx: &mut dyn Tx, id: &str, owner: &str, now: i64, until: i64) -> Result<bool, DbError> {
    Ok(tx.execute(
        "UPDATE coursed_webhooks SET lease_owner = ?, lease_until = ? \
         WHERE id = ? AND state = 'active' AND (lease_until < ? OR lease_owner = ?)",
        &[
            Value::Text(owner.to_owned()),
            Value::Int(until),
            Value::Text(id.to_owned()),
            Value::Int(now),
            Value::Text(owner.to_owned()),
        ],
    )? > 0)
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
    /// A 2xx: the cursor moves to the revision's place.
    Delivered { cursor: i64, status: u16 },
    /// Revisions the filter leaves out: the cursor moves past them, nothing was sent.
    Skipped { cursor: i64 },
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
    let held = |tx: &mut dyn Tx, sql: &str, mut params: Vec<Value>| -> Result<bool, DbError> {
        params.extend([Value::Text(id.to_owned()), Value::Text(owner.to_owned())]);
        Ok(tx.execute(&format!("{sql} WHERE id = ? AND lease_owner = ?"), &params)? > 0)
    };
    match outcome {
        Outcome::Delivered { cursor, status } => held(
            tx,
            "UPDATE coursed_webhooks SET feed_cursor = ?, failures = 0, failing_since = NULL, next_at = 0, \
             last_attempt_at = ?, last_status = ?, last_error = NULL, delivered = delivered + 1, \
             last_delivered_at = ?, lease_until = ?",
            vec![
                Value::Int(*cursor),
                Value::Int(now),
                Value::Int(i64::from(*status)),
                Value::Int(now),
                Value::Int(until),
            ],
        ),
        Outcome::Skipped { cursor } => held(
            tx,
            "UPDATE coursed_webhooks SET feed_cursor = ?, lease_until = ?",
            vec![Value::Int(*cursor), Value::Int(until)],
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
        ),
    }
}
