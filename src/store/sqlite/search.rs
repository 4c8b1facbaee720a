//! Search on SQLite: an FTS5 query over a table's index (`{table}_search`, see
//! migrations/sqlite/0003-search.sql).

use crate::error::Result;
use crate::resources::ResourceType;
use crate::search::SearchQuery;
use crate::store::list::count_of;
use crate::store::Tx;
use crate::store::Value;

/// The rows of `rt` that match `q`: every term is an FTS5 phrase (`"w1 w2"`, with `*` for a
/// prefix), all of them required. The tokenizer splits the words at spaces only, as they were
/// stored, and a phrase matches within one column: what [`crate::search::Term`] defines.
pub fn matching(rt: &ResourceType, q: &SearchQuery) -> (String, Vec<Value>) {
    let sql = format!("rowid IN (SELECT rowid FROM {t}_search WHERE {t}_search MATCH ?)", t = rt.table);
    (sql, vec![Value::Text(fts5_query(q))])
}

/// The FTS5 query string of `q`. Words hold only letters and digits, never a `"`.
pub fn fts5_query(q: &SearchQuery) -> String {
    let terms: Vec<String> =
        q.terms.iter().map(|t| format!("\"{}\"{}", t.words.join(" "), if t.prefix { " *" } else { "" })).collect();
    terms.join(" AND ")
}

/// How many rows of `rt` match `q` (when nothing else filters them), from the index alone: the
/// row count the vocabulary keeps for a single word, else the matches of the index, without
/// reading the table.
pub fn count(rt: &ResourceType, q: &SearchQuery) -> (String, Vec<Value>) {
    match q.terms.as_slice() {
        [t] if t.words.len() == 1 && !t.prefix => {
            (format!("SELECT doc FROM {}_search_vocab WHERE term = ?", rt.table), vec![Value::Text(t.words[0].clone())])
        }
        _ => (
            format!("SELECT count(*) FROM {t}_search WHERE {t}_search MATCH ?", t = rt.table),
            vec![Value::Text(fts5_query(q))],
        ),
    }
}

/// A tier holding at least this share of the table (1 in N rows) is read by walking the table
/// in id order and asking the index about each row: a page of 20 then takes about 20 × N
/// lookups. A smaller tier is read from the index and sorted.
const WALK_SHARE: u64 = 50;

/// The tiers of a search (see [`crate::store::search::page`]): the rows matching `q` whose
/// title holds every term (an FTS5 column filter: the same as the words check), then the
/// others. Each is either probed row by row in id order or read as a set from the index,
/// whichever its size (from the index's own counts) makes cheaper.
pub fn tiers(tx: &mut dyn Tx, rt: &ResourceType, q: &SearchQuery) -> Result<Vec<(String, Vec<Value>)>> {
    let t = rt.table;
    let all = fts5_query(q);
    let title = format!("{{title_words}} : ({all})");
    let rows = count_of(
        tx,
        "SELECT CAST(sum(n) AS BIGINT) FROM row_counts WHERE tbl = ? AND parent = ''",
        &[Value::Text(t.to_owned())],
    )?;
    let (sql, values) = count(rt, q);
    let matching = count_of(tx, &sql, &values)?;
    let in_title = match q.terms.as_slice() {
        [one] if one.words.len() == 1 && !one.prefix => count_of(
            tx,
            &format!("SELECT doc FROM {t}_search_vocab_col WHERE term = ? AND col = 'title_words'"),
            &[Value::Text(one.words[0].clone())],
        )?,
        _ => count_of(
            tx,
            &format!("SELECT count(*) FROM {t}_search WHERE {t}_search MATCH ?"),
            &[Value::Text(title.clone())],
        )?,
    };
    let walk = |n: u64| n.saturating_mul(WALK_SHARE) >= rows;
    let probe = |q: &str| {
        (
            format!("EXISTS (SELECT 1 FROM {t}_search WHERE {t}_search MATCH ? AND rowid = {t}.rowid)"),
            Value::Text(q.to_owned()),
        )
    };
    let set = |q: &str| {
        (format!("{t}.rowid IN (SELECT rowid FROM {t}_search WHERE {t}_search MATCH ?)"), Value::Text(q.to_owned()))
    };
    let first = if walk(in_title) { probe(&title) } else { set(&title) };
    let (rest, rest_value) = if walk(matching.saturating_sub(in_title)) { probe(&all) } else { set(&all) };
    let (not_title, title_value) = probe(&title);
    Ok(vec![(first.0, vec![first.1]), (format!("{rest} AND NOT {not_title}"), vec![rest_value, title_value])])
}
