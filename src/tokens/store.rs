//! The table `coursed_tokens`, the same SQL on both engines: what `coursed token` writes and
//! what authentication reads.

use std::sync::Arc;

use super::secret::Minted;
use super::Scope;
use crate::store::{DbError, Tx, Value};

/// A token's row as authentication needs it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub name: Arc<str>,
    pub scope: Scope,
    pub salt: String,
    pub hash: String,
    pub iterations: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

/// A token's row as `coursed token list` shows it (never its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub scope: Scope,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub last_used_at: Option<i64>,
}

/// The row of the token whose public id is `id`.
pub fn lookup(tx: &mut dyn Tx, id: &str) -> Result<Option<Stored>, DbError> {
    let mut found = None;
    tx.query(
        "SELECT name, scope, salt, hash, iterations, expires_at, last_used_at FROM coursed_tokens WHERE id = ?",
        &[Value::Text(id.to_owned())],
        &mut |r| {
            let text = |i| r.cell(i).as_str().unwrap_or_default().to_owned();
            found = Some(Stored {
                name: text(0).into(),
                // A scope the CHECK constraint let through but this build does not know reads
                // as the least it could be.
                scope: text(1).parse().unwrap_or(Scope::Read),
                salt: text(2),
                hash: text(3),
                iterations: r.cell(4).as_i64().unwrap_or(0),
                expires_at: r.cell(5).as_i64(),
                last_used_at: r.cell(6).as_i64(),
            });
        },
    )?;
    Ok(found)
}

/// Inserts a new token's row; a name already taken is [`DbError::Unique`].
pub fn insert(
    tx: &mut dyn Tx,
    name: &str,
    scope: Scope,
    minted: &Minted,
    now: i64,
    expires_at: Option<i64>,
) -> Result<(), DbError> {
    tx.execute(
        "INSERT INTO coursed_tokens (id, name, scope, salt, hash, iterations, created_at, expires_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            Value::Text(minted.id.clone()),
            Value::Text(name.to_owned()),
            Value::Text(scope.as_str().to_owned()),
            Value::Text(minted.salt.clone()),
            Value::Text(minted.hash.clone()),
            Value::Int(minted.iterations.into()),
            Value::Int(now),
            expires_at.map_or(Value::Null, Value::Int),
        ],
    )
    .map(drop)
}

/// Whether a token is named `name`.
pub fn name_taken(tx: &mut dyn Tx, name: &str) -> Result<bool, DbError> {
    tx.exists("SELECT 1 FROM coursed_tokens WHERE name = ?", &[Value::Text(name.to_owned())])
}

/// Deletes the token named `name`; whether there was one.
pub fn revoke(tx: &mut dyn Tx, name: &str) -> Result<bool, DbError> {
    Ok(tx.execute("DELETE FROM coursed_tokens WHERE name = ?", &[Value::Text(name.to_owned())])? > 0)
}

/// Every token, by name.
pub fn list(tx: &mut dyn Tx) -> Result<Vec<Listed>, DbError> {
    let mut out = Vec::new();
    tx.query(
        "SELECT name, scope, created_at, expires_at, last_used_at FROM coursed_tokens ORDER BY name",
        &[],
        &mut |r| {
            out.push(Listed {
                name: r.cell(0).as_str().unwrap_or_default().to_owned(),
                scope: r.cell(1).as_str().and_then(|s| s.parse().ok()).unwrap_or(Scope::Read),
                created_at: r.cell(2).as_i64().unwrap_or(0),
                expires_at: r.cell(3).as_i64(),
                last_used_at: r.cell(4).as_i64(),
            })
        },
    )?;
    Ok(out)
}

/// Records a use of token `id` at `now`, unless one at most `granularity_ms` old is recorded
/// already (by this process or another): at most one write per token and period.
pub fn touch(tx: &mut dyn Tx, id: &str, now: i64, granularity_ms: i64) -> Result<(), DbError> {
    tx.execute(
        "UPDATE coursed_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)",
        &[Value::Int(now), Value::Text(id.to_owned()), Value::Int(now - granularity_ms)],
    )
    .map(drop)
}

/// Copies every token row of `from` into `to` (whose table is empty): a backup of a PostgreSQL
/// database carries its tokens, as a SQLite file's copy does.
pub fn copy_all(from: &mut dyn Tx, to: &mut dyn Tx) -> Result<u64, DbError> {
    const COLUMNS: &str = "id, name, scope, salt, hash, iterations, created_at, expires_at, last_used_at";
    let mut rows = Vec::new();
    from.query(&format!("SELECT {COLUMNS} FROM coursed_tokens ORDER BY id"), &[], &mut |r| {
        rows.push((0..9).map(|i| r.cell(i).to_value()).collect::<Vec<_>>())
    })?;
    let insert = format!("INSERT INTO coursed_tokens ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for row in &rows {
        to.execute(&insert, row)?;
    }
    Ok(rows.len() as u64)
}
