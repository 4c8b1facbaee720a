//! Search on SQLite: an FTS5 query over a table's index (`{table}_search`, see
//! migrations/sqlite/0003-search.sql).

use crate::resources::ResourceType;
use crate::search::SearchQuery;
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
