//! Search on PostgreSQL: a `tsquery` over the `search` column (a GIN-indexed tsvector of the
//! words, see migrations/postgres/0003-search.sql), and phrases checked on the words columns.

use crate::resources::ResourceType;
use crate::search::SearchQuery;
use crate::store::dialect::Dialect;
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

/// The tiers of a search (see [`crate::store::search::page`]): the condition and every term
/// in the title, then the condition and not. PostgreSQL's planner chooses, from its
/// statistics of the words, between walking the id index and testing each row, and reading
/// the matches from the GIN index and sorting them.
pub fn tiers(rt: &ResourceType, q: &SearchQuery) -> Vec<(String, Vec<Value>)> {
    let (condition, values) = matching(rt, q);
    let title = crate::store::search::in_title(Dialect::Postgres, rt, q);
    vec![(format!("{condition} AND {title}"), values.clone()), (format!("{condition} AND NOT {title}"), values)]
}
