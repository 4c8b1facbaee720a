//! Search in the store: the words columns written with the text, the rows a search matches
//! (each engine builds its own index query, see [`Dialect::search_match`]), relevance, and the
//! words of rows written before the index existed.

use super::clauses::{count_of, order_by, where_clause};
use super::dialect::Dialect;
use super::select::{for_each, RowFields, Selection};
use super::tx::{DbError, Tx, Value};
use crate::jsonapi::query::{Query, RELEVANCE};
use crate::resources::{Attribute, ResourceType, TYPES};
use crate::search::{self, SearchQuery};

/// Adds the words columns of a write (see [`Changes::words`](crate::jsonapi::body::Changes))
/// to an insert's or update's `columns` and `values`.
pub fn add_words(words: &[(&'static str, Value)], columns: &mut Vec<&'static str>, values: &mut Vec<Value>) {
    for (column, words) in words {
        columns.push(column);
        values.push(words.clone());
    }
}

/// An expression of the relevance of a row of `rt` for `q`: 1 when every term matches in the
/// title's words, else 0 (higher first). Computed on the words columns, the same on every
/// engine; the needles are written into the SQL (words hold only letters and digits).
pub fn relevance(dialect: Dialect, rt: &ResourceType, q: &SearchQuery) -> String {
    format!("(CASE WHEN {} THEN 1 ELSE 0 END)", in_title(dialect, rt, q))
}

/// The condition that every term of `q` matches in the title's words of a row of `rt`.
pub fn in_title(dialect: Dialect, rt: &ResourceType, q: &SearchQuery) -> String {
    let Some((_, how)) = search::columns(rt).find(|(a, _)| a.name == "title") else {
        return "1 = 0".into();
    };
    let parts: Vec<String> =
        q.terms.iter().map(|t| dialect.contains(&padded(how.column), &literal(&t.needle()))).collect();
    format!("({})", parts.join(" AND "))
}

/// One page of the resources of `sel.rt` that `wheres` (with `params`) and the search `q`
/// select, in the order the query asks (best match first without a sort); returns the total.
/// Best match first is read tier by tier, each in id order (see [`super::relevance`]).
pub fn page(
    tx: &mut dyn Tx,
    sel: &Selection,
    query: &Query,
    q: &SearchQuery,
    mut wheres: Vec<String>,
    mut params: Vec<Value>,
    each: impl FnMut(&RowFields<'_>),
) -> crate::error::Result<u64> {
    let rt = sel.rt;
    let dialect = tx.dialect();
    let unfiltered = wheres.is_empty();
    if let Some(setting) = dialect.search_setting() {
        tx.execute(setting, &[])?;
    }
    let total = match dialect.search_count(rt, q).filter(|_| unfiltered) {
        Some((sql, values)) => count_of(tx, &sql, &values)?,
        None => {
            let (condition, values) = dialect.search_match(rt, q);
            let mut all = wheres.clone();
            all.push(condition);
            let mut p = params.clone();
            p.extend(values);
            count_of(tx, &format!("SELECT count(*) FROM {}{}", rt.table, where_clause(&all)), &p)?
        }
    };
    let offset = query.page.offset();
    if offset >= total {
        return Ok(total);
    }
    let best_first = query.sort.is_empty() || matches!(query.sort.as_slice(), [k] if k.column == RELEVANCE);
    if best_first {
        super::relevance::page(tx, sel, q, &wheres, &params, (offset, query.page.size), total, each)?;
        return Ok(total);
    }
    let (condition, values) = dialect.search_match(rt, q);
    wheres.push(condition);
    params.extend(values);
    let order = order_by(rt, &query.sort, Some(&relevance(dialect, rt, q)));
    let sql = format!(
        "SELECT {} FROM {}{} ORDER BY {order} LIMIT ? OFFSET ?",
        sel.columns(),
        rt.table,
        where_clause(&wheres)
    );
    params.push(Value::Int(query.page.size as i64));
    params.push(Value::Int(offset.min(i64::MAX as u64) as i64));
    for_each(tx, sel, &sql, &params, each)?;
    Ok(total)
}

/// Whether a term of `q` has several words (a phrase, checked on the words columns).
pub fn has_phrase(q: &SearchQuery) -> bool {
    q.terms.iter().any(|t| t.words.len() > 1)
}

/// The condition that each term of several words of `q` is found, in order, in the words of
/// one searchable attribute of a row of `rt`; `None` without such terms. The needles are
/// written into the SQL (words hold only letters and digits).
pub fn phrases(dialect: Dialect, rt: &ResourceType, q: &SearchQuery) -> Option<String> {
    let checks: Vec<String> = q
        .terms
        .iter()
        .filter(|t| t.words.len() > 1)
        .map(|t| {
            let needle = literal(&t.needle());
            let any: Vec<String> =
                search::columns(rt).map(|(_, how)| dialect.contains(&padded(how.column), &needle)).collect();
            format!("({})", any.join(" OR "))
        })
        .collect();
    (!checks.is_empty()).then(|| checks.join(" AND "))
}

/// `s` as an SQL string literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The words column `column` with a space at either end (see [`search::Term::needle`]).
pub fn padded(column: &str) -> String {
    format!("(' ' || {column} || ' ')")
}

/// Computes the words columns of every row of `rt` from its text: for a database made before
/// search existed. Rows are read a few hundred at a time, in id order, and each batch written
/// back by one statement (an `UPDATE ... FROM (VALUES ...)`, the same on both engines: one
/// round trip per batch on PostgreSQL instead of one per row).
pub fn backfill(tx: &mut dyn Tx, rt: &'static ResourceType) -> Result<u64, DbError> {
    const BATCH: usize = 500;
    let attrs: Vec<&Attribute> = search::columns(rt).map(|(a, _)| a).collect();
    if attrs.is_empty() {
        return Ok(0);
    }
    let names: Vec<&str> = attrs.iter().map(|a| a.name).collect();
    let select = format!("SELECT id, {} FROM {}", names.join(", "), rt.table);
    // VALUES columns are named column1 (the id), column2, ... on both engines.
    let sets: Vec<String> = attrs
        .iter()
        .filter_map(|a| a.search.map(|s| s.column))
        .enumerate()
        .map(|(i, column)| format!("{column} = v.column{}", i + 2))
        .collect();
    let update = |rows: usize| {
        let row = format!("({})", vec!["?"; attrs.len() + 1].join(", "));
        format!(
            "UPDATE {t} SET {} FROM (VALUES {}) AS v WHERE {t}.id = v.column1",
            sets.join(", "),
            vec![row; rows].join(", "),
            t = rt.table
        )
    };
    let full = update(BATCH);
    let mut after: Option<String> = None;
    let mut done = 0;
    loop {
        let mut rows: Vec<Vec<Value>> = Vec::new();
        let mut collect = |r: &dyn super::Row| rows.push((0..=attrs.len()).map(|i| r.cell(i).to_value()).collect());
        match &after {
            None => tx.query(&format!("{select} ORDER BY id LIMIT {BATCH}"), &[], &mut collect)?,
            Some(id) => tx.query(
                &format!("{select} WHERE id > ? ORDER BY id LIMIT {BATCH}"),
                &[Value::Text(id.clone())],
                &mut collect,
            )?,
        };
        let Some(last) = rows.last() else { return Ok(done) };
        after = match &last[0] {
            Value::Text(id) => Some(id.clone()),
            _ => return Err(DbError::Other(format!("a row of {} has no text id", rt.table))),
        };
        let mut values = Vec::with_capacity(rows.len() * (attrs.len() + 1));
        for row in &rows {
            values.push(row[0].clone());
            values.extend(attrs.iter().zip(&row[1..]).filter_map(|(a, v)| search::derived(a, v).map(|(_, w)| w)));
        }
        let partial;
        let sql = if rows.len() == BATCH {
            &full
        } else {
            partial = update(rows.len());
            &partial
        };
        tx.execute(sql, &values)?;
        done += rows.len() as u64;
    }
}

/// [`backfill`] of every type.
pub fn backfill_all(tx: &mut dyn Tx) -> Result<u64, DbError> {
    let mut n = 0;
    for rt in TYPES {
        n += backfill(tx, rt)?;
    }
    Ok(n)
}

/// The `meta` of each resource of a search's page, by id: `{"search":{"attribute":NAME,
/// "excerpt":HTML}}` with the excerpt of the first searchable attribute that matches (see
/// [`crate::search::excerpt`]). Made from the page's records (read with `sel`) when they hold
/// every searchable attribute, else from their texts read again (one statement).
pub fn page_meta(
    tx: &mut dyn Tx,
    sel: &Selection,
    q: &SearchQuery,
    page: &[super::Record],
) -> Result<std::collections::HashMap<String, String>, DbError> {
    use super::Fields;
    let rt = sel.rt;
    let attrs: Vec<(&'static Attribute, &'static search::Searchable)> = search::columns(rt).collect();
    let mut out = std::collections::HashMap::with_capacity(page.len());
    if page.is_empty() || attrs.is_empty() {
        return Ok(out);
    }
    let mut add = |id: &str, texts: &[(&'static str, &search::Searchable, &str)]| {
        if let Some(e) = search::excerpt::excerpt(q, texts) {
            let meta = serde_json::json!({"search": {"attribute": e.attribute, "excerpt": e.html}});
            out.insert(id.to_owned(), meta.to_string());
        }
    };
    let held: Option<Vec<usize>> =
        attrs.iter().map(|(a, _)| sel.attrs.iter().position(|x| std::ptr::eq(*x, *a))).collect();
    if let Some(held) = held {
        for rec in page {
            let texts: Vec<(&'static str, &search::Searchable, &str)> = attrs
                .iter()
                .zip(&held)
                .map(|((a, how), &i)| (a.name, *how, rec.attr(i).as_str().unwrap_or("")))
                .collect();
            add(rec.id(), &texts);
        }
        return Ok(out);
    }
    let ids: Vec<String> = page.iter().map(|r| r.id.clone()).collect();
    // Only the start of each text is looked at (see `excerpt::SCANNED`): only that is read.
    let names: Vec<String> =
        attrs.iter().map(|(a, _)| format!("substr({}, 1, {})", a.name, search::excerpt::SCANNED)).collect();
    let sql = format!("SELECT id, {} FROM {} WHERE {}", names.join(", "), rt.table, tx.dialect().in_ids("id"));
    tx.query(&sql, &[Value::Ids(ids)], &mut |r| {
        let texts: Vec<(&'static str, &search::Searchable, &str)> = attrs
            .iter()
            .enumerate()
            .map(|(i, (a, how))| (a.name, *how, r.cell(1 + i).as_str().unwrap_or("")))
            .collect();
        add(r.cell(0).as_str().unwrap_or(""), &texts);
    })?;
    Ok(out)
}
