//! Search on PostgreSQL: a `tsquery` over the `search` column (a GIN-indexed tsvector of the
//! words, see migrations/postgres/0003-search.sql), and phrases checked on the words columns.

use crate::error::Result;
use crate::resources::ResourceType;
use crate::search::SearchQuery;
use crate::store::dialect::{Dialect, Tier};
use crate::store::list::count_of;
use crate::store::Tx;
use crate::store::Value;

/// The rows of `rt` that match `q`. The tsvector holds each word of the row once, without
/// positions: every word of every term is required of it (the last of a prefix term as a
/// prefix, `:*`), and a term of several words must also be found, in that order, in the words
/// of one attribute: what [`crate::search::Term`] defines.
pub fn matching(rt: &ResourceType, q: &SearchQuery) -> (String, Vec<Value>) {
    let mut sql = "search @@ CAST(CAST(? AS text) AS tsquery)".to_owned();
    if let Some(phrases) = crate::store::search::phrases(Dialect::Postgres, rt, q) {
        sql = format!("{sql} AND {phrases}");
    }
    (sql, vec![Value::Text(tsquery(q))])
}

/// The tsquery text of `q`: its words quoted as lexemes (taken as they are, no parser), all
/// required. Words hold only letters and digits, never a quote or a backslash.
pub fn tsquery(q: &SearchQuery) -> String {
    let words: Vec<String> = q.words().map(|(w, prefix)| format!("'{w}'{}", if prefix { ":*" } else { "" })).collect();
    words.join(" & ")
}

/// A search matching fewer than 1 in this many rows of the table is read from the GIN index
/// and sorted; a larger one by walking the id index and testing each row.
const WALK_SHARE: u64 = 50;

/// The tiers of a search (see [`crate::store::search::page`]): the condition and every term
/// in the title, then the condition and not. A search that matches few rows of the table
/// (`known`, when nothing else filters) is ordered by an expression of the id's order that
/// the id index cannot serve, so that PostgreSQL reads the matches from the GIN index and sorts
/// them rather than walk the id index in the hope of finding a page soon (its estimate of a
/// word it has no statistics for is far too high).
pub fn tiers(tx: &mut dyn Tx, rt: &ResourceType, q: &SearchQuery, known: Option<u64>) -> Result<Vec<Tier>> {
    let (condition, values) = matching(rt, q);
    let title = crate::store::search::in_title(Dialect::Postgres, rt, q);
    let order = match known {
        Some(n) => {
            let sql = "SELECT CAST(sum(n) AS BIGINT) FROM row_counts WHERE tbl = ? AND parent = ''";
            let rows = count_of(tx, sql, &[Value::Text(rt.table.to_owned())])?;
            if n.saturating_mul(WALK_SHARE) < rows {
                "id || ''"
            } else {
                "id"
            }
        }
        None => "id",
    };
    Ok(vec![
        Tier { condition: format!("{condition} AND {title}"), values: values.clone(), order },
        Tier { condition: format!("{condition} AND NOT {title}"), values, order },
    ])
}
