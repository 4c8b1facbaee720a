//! Search on PostgreSQL: a `tsquery` over the `search` column (a GIN-indexed tsvector of the
//! words, see migrations/postgres/0003-search.sql), and phrases checked on the words columns.

use crate::resources::ResourceType;
use crate::search::SearchQuery;
use crate::store::dialect::{Dialect, Tier};
use crate::store::Value;

/// The rows of `rt` that match `q`. The tsvector holds each word of the row once, without
/// positions: every word of every term is required of it (the last of a prefix term as a
/// prefix, `:*`), and a term of several words must also be found, in that order, in the words
/// of one attribute: what [`crate::search::Term`] defines.
pub fn matching(rt: &ResourceType, q: &SearchQuery) -> (String, Vec<Value>) {
    matching_by(rt, q, "search @@ CAST(CAST(? AS text) AS tsquery)")
}

/// [`matching`] with `test` as the test of the tsvector.
fn matching_by(rt: &ResourceType, q: &SearchQuery, test: &str) -> (String, Vec<Value>) {
    let mut sql = test.to_owned();
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

/// How many rows of `rt` hold the one word that `q` searches (not a prefix), when nothing else
/// filters them: the count folded into `search_words` plus the changes not yet folded (see
/// migrations/postgres/0004-search-counts.sql), one snapshot for both. `None` for any other
/// search, whose rows are counted.
pub fn count(rt: &ResourceType, q: &SearchQuery) -> Option<(String, Vec<Value>)> {
    let [one] = q.terms.as_slice() else { return None };
    let [word] = one.words.as_slice() else { return None };
    if one.prefix {
        return None;
    }
    let sql = "SELECT CAST(coalesce((SELECT n FROM search_words WHERE tbl = ? AND word = ?), 0) \
               + coalesce((SELECT sum(sign) FROM search_changes WHERE tbl = ? \
               AND words @@ CAST(CAST(? AS text) AS tsquery)), 0) AS BIGINT)";
    let table = Value::Text(rt.table.to_owned());
    Some((sql.to_owned(), vec![table.clone(), Value::Text(word.clone()), table, Value::Text(tsquery(q))]))
}

/// Changes folded by one statement of [`fold`] (each holds a row's words: a few dozen usually,
/// up to a very long text's).
const FOLD_BATCH: i64 = 2_000;
/// The advisory lock held while folding ("crsf"): one replica folds at a time.
const FOLD_LOCK: i64 = 0x6372_7366;

/// Folds the oldest changes of `search_changes` into `search_words` (adding each change's sign
/// to the count of each of its words) and deletes them, in one transaction, up to `batches`
/// times [`FOLD_BATCH`] of them; returns how many it folded. Does nothing while another
/// connection folds.
pub fn fold(conn: &mut super::client::PgConn, batches: u32) -> Result<u64, tokio_postgres::Error> {
    const STEP: &str = "WITH folded AS (
            DELETE FROM search_changes WHERE id IN (SELECT id FROM search_changes ORDER BY id LIMIT $1)
            RETURNING tbl, sign, words
        ), added AS (
            INSERT INTO search_words AS s (tbl, word, n)
            SELECT tbl, w, sum(sign) FROM folded, unnest(tsvector_to_array(words)) AS w GROUP BY tbl, w
            ON CONFLICT (tbl, word) DO UPDATE SET n = s.n + EXCLUDED.n
            RETURNING tbl, word, n
        )
        SELECT (SELECT count(*) FROM folded), array_agg(tbl) FILTER (WHERE n = 0),
               array_agg(word) FILTER (WHERE n = 0)
        FROM added";
    // Words no row holds any more are dropped (ids and numbers in texts would pile up).
    const UNHELD: &str = "DELETE FROM search_words
        WHERE n = 0 AND (tbl, word) IN (SELECT * FROM unnest(CAST($1 AS text[]), CAST($2 AS text[])))";
    let mut done = 0;
    for _ in 0..batches {
        // Without a time limit: a batch of very long texts may take a while, and a fold that
        // always timed out would leave the log growing.
        let step = (|| {
            conn.batch("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL statement_timeout = 0")?;
            let locked = conn.rows("SELECT pg_try_advisory_xact_lock($1)", &[&FOLD_LOCK])?;
            if !locked.first().is_some_and(|r| r.get::<_, bool>(0)) {
                return Ok(0);
            }
            let Some(row) = conn.rows(STEP, &[&FOLD_BATCH])?.into_iter().next() else { return Ok(0) };
            let (n, tables, words): (i64, Option<Vec<String>>, Option<Vec<String>>) =
                (row.get(0), row.get(1), row.get(2));
            if let (Some(tables), Some(words)) = (tables, words) {
                conn.rows(UNHELD, &[&tables, &words])?;
            }
            Ok(n)
        })();
        match step {
            Ok(n) => {
                conn.batch("COMMIT")?;
                done += n as u64;
                if n < FOLD_BATCH {
                    break;
                }
            }
            Err(e) => {
                let _ = conn.batch("ROLLBACK");
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// The tiers of a search (see [`crate::store::relevance`]): the rows matching `q` whose title
/// holds every term, then the others. The first is read from the titles' own index (see
/// migrations/postgres/0006-search-titles.sql), whose statistics let the planner choose
/// between that and walking the id index, or found walking by the title's words alone (a
/// title holding every term holds every word and each phrase: the row matches). The second is
/// walked with `ts_match_vq`, which is `@@` as a function that GIN does not serve.
pub fn tiers(rt: &ResourceType, q: &SearchQuery) -> [Tier; 2] {
    let (set, values) = matching(rt, q);
    let (walk, _) = matching_by(rt, q, "ts_match_vq(search, CAST(CAST(? AS text) AS tsquery))");
    let title = crate::store::search::in_title(Dialect::Postgres, rt, q);
    let titles = (format!("{TITLE_WORDS} @@ CAST(CAST(? AS text) AS tsquery) AND {title}"), values.clone());
    let rest = |condition: &str| format!("{condition} AND NOT {title}");
    [
        Tier { walk: (title.clone(), vec![]), set: titles.clone(), planned: Some(titles) },
        Tier { walk: (rest(&walk), values.clone()), set: (rest(&set), values), planned: None },
    ]
}

/// The titles' words as the titles' index holds them.
const TITLE_WORDS: &str = "array_to_tsvector(string_to_array(title_words, ' '))";
