//! Pieces of SQL every reader shares: `WHERE` and `ORDER BY` clauses, and counts (of a
//! statement, or kept in `row_counts`).

use super::tx::{Tx, Value};
use crate::error::Result;
use crate::jsonapi::query::{SortKey, RELEVANCE};
use crate::resources::{Kind, ResourceType};

/// ` WHERE` and the conditions, or nothing.
pub fn where_clause(wheres: &[String]) -> String {
    if wheres.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", wheres.join(" AND "))
    }
}

/// The count a statement selects (0 for none).
pub fn count_of(tx: &mut dyn Tx, sql: &str, params: &[Value]) -> Result<u64> {
    Ok(tx.first(sql, params)?.and_then(|v| v.cell().as_i64()).unwrap_or(0).max(0) as u64)
}

/// How many rows the table of `rt` holds (its count kept in `row_counts`).
pub fn table_rows(tx: &mut dyn Tx, rt: &ResourceType) -> Result<u64> {
    Ok(counted(tx, rt.table.to_owned(), String::new())?.0)
}

/// The total and generation kept in `row_counts` for (`tbl`, `parent`).
pub fn counted(tx: &mut dyn Tx, tbl: String, parent: String) -> Result<(u64, i64)> {
    // Sums, because an engine may spread a counter over several rows to spare concurrent
    // writers a hot row (see the PostgreSQL schema).
    let sql = "SELECT CAST(sum(n) AS BIGINT), CAST(sum(gen) AS BIGINT) FROM row_counts WHERE tbl = ? AND parent = ?";
    let mut out = (0, 0);
    tx.query(sql, &[Value::Text(tbl), Value::Text(parent)], &mut |r| {
        out = (r.cell(0).as_i64().unwrap_or(0).max(0) as u64, r.cell(1).as_i64().unwrap_or(0));
    })?;
    Ok(out)
}

/// The `ORDER BY` of `sort`, ending with `id`. Nulls come first in ascending order on every
/// engine (SQLite's rule; PostgreSQL's default is the opposite).
pub fn order_by(rt: &ResourceType, sort: &[SortKey], relevance: Option<&str>) -> String {
    let mut keys: Vec<String> = sort
        .iter()
        .map(|k| {
            if let (RELEVANCE, Some(score)) = (k.column, relevance) {
                return format!("{score} DESC");
            }
            let nullable = rt.attribute(k.column).is_some_and(|a| a.kind == Kind::NullableText);
            match (k.descending, nullable) {
                (false, false) => k.column.to_owned(),
                (true, false) => format!("{} DESC", k.column),
                (false, true) => format!("{} NULLS FIRST", k.column),
                (true, true) => format!("{} DESC NULLS LAST", k.column),
            }
        })
        .collect();
    if !sort.iter().any(|k| k.column == "id") {
        keys.push("id".into());
    }
    keys.join(", ")
}
