//! Search on SQLite: an FTS5 query over a table's index (`{table}_search`, see
//! migrations/sqlite/0003-search.sql and 0004-search-rows.sql).

use crate::resources::ResourceType;
use crate::search::SearchQuery;
use crate::store::dialect::{Dialect, Tier};
use crate::store::search::{has_phrase, in_title, phrases};
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

/// How many rows of `rt` match `q` with every term in the title, when nothing else filters
/// them, from the titles' own index (holding every word there is every term there); `None` for
/// a phrase, which only the words columns can tell.
pub fn title_count(rt: &ResourceType, q: &SearchQuery) -> Option<(String, Vec<Value>)> {
    let t = rt.table;
    match q.terms.as_slice() {
        _ if has_phrase(q) => None,
        [one] if !one.prefix => {
            Some((format!("SELECT doc FROM {t}_titles_vocab WHERE term = ?"), vec![Value::Text(one.words[0].clone())]))
        }
        _ => Some((
            format!("SELECT count(*) FROM {t}_titles WHERE {t}_titles MATCH ?"),
            vec![Value::Text(fts5_query(q))],
        )),
    }
}

/// The tiers of a search (see [`crate::store::relevance`]): the rows matching `q` whose title
/// holds every term, then the others, as sets of rowids that SQLite computes once per
/// statement: the titles' own index for the first (the same as the words check), the index of
/// all texts minus the titles' for the second; a phrase is checked on the words, the title's
/// too. `+rowid` is the same rowid, but one the planner cannot look up in a set: it then walks
/// an index in id order and tests each row's rowid against the set (a look-up in a temporary
/// b-tree, not a query of the index per row).
pub fn tiers(rt: &ResourceType, q: &SearchQuery) -> [Tier; 2] {
    let t = rt.table;
    let all = Value::Text(fts5_query(q));
    let set = |index: &str| format!("IN (SELECT rowid FROM {index} WHERE {index} MATCH ?)");
    let (search, titles) = (set(&format!("{t}_search")), set(&format!("{t}_titles")));
    if let Some(phrases) = phrases(Dialect::Sqlite, rt, q) {
        // A title holding every term holds every word and each phrase: the titles' index
        // narrows the first tier, the words tell.
        let title = in_title(Dialect::Sqlite, rt, q);
        let first = |rowid: &str| format!("{rowid} {titles} AND {title}");
        let rest = |rowid: &str| format!("{rowid} {search} AND {phrases} AND NOT {title}");
        return [
            Tier {
                walk: (first("+rowid"), vec![all.clone()]),
                set: (first("rowid"), vec![all.clone()]),
                planned: None,
            },
            Tier { walk: (rest("+rowid"), vec![all.clone()]), set: (rest("rowid"), vec![all]), planned: None },
        ];
    }
    let first = |rowid: &str| format!("{rowid} {titles}");
    let rest = |rowid: &str| format!("{rowid} {search} AND rowid NOT {titles}");
    let (one, two) = (vec![all.clone()], vec![all.clone(), all]);
    [
        Tier { walk: (first("+rowid"), one.clone()), set: (first("rowid"), one), planned: None },
        Tier { walk: (rest("+rowid"), two.clone()), set: (rest("rowid"), two), planned: None },
    ]
}
