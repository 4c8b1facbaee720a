//! The tables `coursed_feed` and `coursed_follow`, the same SQL on both engines
//! (migrations/*/follow.sql says what each column holds).

use crate::store::{DbError, Tx, Value};

/// What a database follows: the row of `coursed_follow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Following {
    /// The URL of the coursed followed, or [`BUNDLES`].
    pub upstream: String,
    /// The id of the feed followed.
    pub feed: String,
    /// The place in that feed up to which every revision is applied here.
    pub cursor: i64,
    /// When revisions were last applied (ms).
    pub applied_at: Option<i64>,
}

/// The upstream of a database that follows by deltas imported by hand.
pub const BUNDLES: &str = "bundles";

/// The id of this database's own feed.
pub fn feed_id(tx: &mut dyn Tx) -> Result<String, DbError> {
    Ok(tx.strings("SELECT id FROM coursed_feed", &[])?.pop().unwrap_or_default())
}

/// What the database follows, if anything.
pub fn get(tx: &mut dyn Tx) -> Result<Option<Following>, DbError> {
    let mut out = None;
    tx.query("SELECT upstream, feed, feed_cursor, applied_at FROM coursed_follow WHERE id = 1", &[], &mut |r| {
        out = Some(Following {
            upstream: r.cell(0).as_str().unwrap_or_default().to_owned(),
            feed: r.cell(1).as_str().unwrap_or_default().to_owned(),
            cursor: r.cell(2).as_i64().unwrap_or(0),
            applied_at: r.cell(3).as_i64(),
        })
    })?;
    Ok(out)
}

/// Makes the database a follower of `feed` at `upstream`, from `cursor` on; false when it
/// began to follow meanwhile (another transaction made the row first).
pub fn begin(tx: &mut dyn Tx, upstream: &str, feed: &str, cursor: i64) -> Result<bool, DbError> {
    let n = tx.execute(
        "INSERT INTO coursed_follow (id, upstream, feed, feed_cursor, applied_at) VALUES (1, ?, ?, ?, NULL) \
         ON CONFLICT (id) DO NOTHING",
        &[Value::Text(upstream.into()), Value::Text(feed.into()), Value::Int(cursor)],
    )?;
    Ok(n == 1)
}

/// Names another upstream of the same feed (the district moved, or a delta's follower is now
/// followed over the network).
pub fn set_upstream(tx: &mut dyn Tx, upstream: &str) -> Result<(), DbError> {
    tx.execute("UPDATE coursed_follow SET upstream = ? WHERE id = 1", &[Value::Text(upstream.into())]).map(drop)
}

/// Moves the cursor from `from` to `to`, if it is still at `from` (another process following
/// the same feed into the same database may have moved it): whether it moved.
pub fn advance(tx: &mut dyn Tx, feed: &str, from: i64, to: i64) -> Result<bool, DbError> {
    let n = tx.execute(
        "UPDATE coursed_follow SET feed_cursor = ?, applied_at = ? WHERE id = 1 AND feed = ? AND feed_cursor = ?",
        &[Value::Int(to), Value::Int(crate::time::now_ms()), Value::Text(feed.into()), Value::Int(from)],
    )?;
    Ok(n == 1)
}

/// Stops following: the catalogue is the database's own again.
pub fn forget(tx: &mut dyn Tx) -> Result<bool, DbError> {
    Ok(tx.execute("DELETE FROM coursed_follow WHERE id = 1", &[])? > 0)
}

/// Whether the database keeps the revision `r` of its upstream as it was recorded there (the
/// same resource, number and time): how a follower knows that the upstream's feed up to its
/// cursor is still the one it applied.
pub fn keeps(tx: &mut dyn Tx, r: &crate::store::history::Revision) -> Result<bool, DbError> {
    let sql = "SELECT at FROM revision_log WHERE resource_type = ? AND resource_id = ? AND number = ?";
    let params = [Value::Text(r.resource_type.clone()), Value::Text(r.resource_id.clone()), Value::Int(r.number)];
    Ok(tx.strings(sql, &params)?.first().is_some_and(|at| *at == r.at))
}
