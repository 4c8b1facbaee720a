//! Search on SQLite: an FTS5 query over a table's index (`{table}_search`, see
//! migrations/sqlite/0003-search.sql and 0004-search-rows.sql).

use crate::error::Result;
use crate::resources::ResourceType;
use crate::search::SearchQuery;
use crate::store::dialect::{Dialect, Tier};
use crate::store::list::{count_of, table_rows};
use crate::store::search::{has_phrase, in_title, phrases};
use crate::store::Tx;
use crate::store::Value;

/// The rows of `rt` that match `q`: every word of every term in the FTS5 index (the last of a
/// prefix term as a prefix, `*`), all required; the index keeps which rows hold a word, not
/// where (`detail=none`, smaller and cheaper to write), so a term of several words is also
/// checked on the words columns, as on PostgreSQL: what [`crate::search::Term`] defines.
pub fn matching(rt: &ResourceType, q: &SearchQuery) -> (String, Vec<Value>) {
    let mut sql = format!("rowid IN (SELECT rowid FROM {t}_search WHERE {t}_search MATCH ?)", t = rt.table);
    if let Some(phrases) = phrases(Dialect::Sqlite, rt, q) {
        sql = format!("{sql} AND {phrases}");
    }
    (sql, vec![Value::Text(fts5_query(q))])
}

/// The FTS5 query string of `q`: each word quoted, all of them required. Words hold only
/// letters and digits, never a `"`.
pub fn fts5_query(q: &SearchQuery) -> String {
    let words: Vec<String> =
        q.words().map(|(w, prefix)| format!("\"{w}\"{}", if prefix { " *" } else { "" })).collect();
    words.join(" AND ")
}

/// How many rows of `rt` match `q` (when nothing else filters them), from the index alone: the
/// row count the vocabulary keeps for a single word, else the matches of the index, without
/// reading the table; a phrase is checked on the table.
pub fn count(rt: &ResourceType, q: &SearchQuery) -> (String, Vec<Value>) {
    let t = rt.table;
    match q.terms.as_slice() {
        [one] if one.words.len() == 1 && !one.prefix => {
            (format!("SELECT doc FROM {t}_search_vocab WHERE term = ?"), vec![Value::Text(one.words[0].clone())])
        }
        _ if has_phrase(q) => {
            let (condition, values) = matching(rt, q);
            (format!("SELECT count(*) FROM {t} WHERE {condition}"), values)
        }
        _ => (format!("SELECT count(*) FROM {t}_search WHERE {t}_search MATCH ?"), vec![Value::Text(fts5_query(q))]),
    }
}

/// A tier holding at least this share of the table (1 in N rows) is read by walking the table
/// in id order and asking the index about each row: a page of 20 then takes about 20 × N
/// lookups. A smaller tier is read from the index and sorted.
const WALK_SHARE: u64 = 50;

/// The tiers of a search (see [`crate::store::search::page`]): the rows matching `q` whose
/// title holds every term (the titles' own index: the same as the words check), then the
/// others. Each is either probed row by row in id order or read as a set from the index,
/// whichever its size (from the index's own counts) makes cheaper. `known`: how many rows
/// match, when known.
pub fn tiers(tx: &mut dyn Tx, rt: &ResourceType, q: &SearchQuery, known: Option<u64>) -> Result<Vec<Tier>> {
    let t = rt.table;
    let all = fts5_query(q);
    // The rows of an index (`{t}_search`, all texts; `{t}_titles`, the titles) that match `q`,
    // asked of it row by row (`probe`) or read from it as a set (`set`).
    let (search, titles) = (format!("{t}_search"), format!("{t}_titles"));
    let probe = |index: &str, q: &str| {
        (
            format!("EXISTS (SELECT 1 FROM {index} WHERE {index} MATCH ? AND rowid = {t}.rowid)"),
            Value::Text(q.to_owned()),
        )
    };
    let set = |index: &str, q: &str| {
        (format!("{t}.rowid IN (SELECT rowid FROM {index} WHERE {index} MATCH ?)"), Value::Text(q.to_owned()))
    };
    if has_phrase(q) {
        // Phrases are checked on the words: so is the title.
        let (condition, values) = matching(rt, q);
        let title = in_title(Dialect::Sqlite, rt, q);
        return Ok(tiers_of(
            format!("{condition} AND {title}"),
            values.clone(),
            format!("{condition} AND NOT {title}"),
            values,
        ));
    }
    if q.terms.iter().any(|t| t.prefix) {
        // A prefix stands for every word it begins, whose lists FTS5 merges at each look-up:
        // merge them once for each tier instead. The titles' own index tells which rows hold
        // every term in the title.
        let (in_title, title_value) = set(&titles, &all);
        let (matches, all_value) = set(&search, &all);
        let not_in_title = in_title.replace("rowid IN", "rowid NOT IN");
        return Ok(tiers_of(
            in_title,
            vec![title_value.clone()],
            format!("{matches} AND {not_in_title}"),
            vec![all_value, title_value],
        ));
    }
    let rows = table_rows(tx, rt)?;
    let matching = match known {
        Some(n) => n,
        None => {
            let (sql, values) = count(rt, q);
            count_of(tx, &sql, &values)?
        }
    };
    let in_title = match q.terms.as_slice() {
        [one] if one.words.len() == 1 => count_of(
            tx,
            &format!("SELECT doc FROM {t}_titles_vocab WHERE term = ?"),
            &[Value::Text(one.words[0].clone())],
        )?,
        _ => count_of(
            tx,
            &format!("SELECT count(*) FROM {t}_titles WHERE {t}_titles MATCH ?"),
            &[Value::Text(all.clone())],
        )?,
    };
    let walk = |n: u64| n.saturating_mul(WALK_SHARE) >= rows;
    // The titles' own index answers for the title (holding every word there is every term
    // there, phrases aside).
    let first = if walk(in_title) { probe(&titles, &all) } else { set(&titles, &all) };
    let (rest, rest_value) =
        if walk(matching.saturating_sub(in_title)) { probe(&search, &all) } else { set(&search, &all) };
    let (not_title, title_value) = probe(&titles, &all);
    Ok(tiers_of(first.0, vec![first.1], format!("{rest} AND NOT {not_title}"), vec![rest_value, title_value]))
}

/// The two tiers, each in id order (SQLite reads a tier given as a set of rowids by those and
/// sorts them, and walks the id index otherwise).
fn tiers_of(first: String, first_values: Vec<Value>, rest: String, rest_values: Vec<Value>) -> Vec<Tier> {
    vec![
        Tier { condition: first, values: first_values, order: "id" },
        Tier { condition: rest, values: rest_values, order: "id" },
    ]
}
