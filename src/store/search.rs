//! Search in the store: the words columns written with the text, the rows a search matches
//! (each engine builds its own index query, see [`Dialect::search_match`]), relevance, and the
//! words of rows written before the index existed.

use super::dialect::Dialect;
use super::tx::{DbError, Tx, Value};
use crate::resources::{Attribute, ResourceType, TYPES};
use crate::search::{self, SearchQuery};

/// Adds the words columns of the searchable attributes among `attrs` (set to `values`) to an
/// insert's or update's `columns` and `values`.
pub fn add_words<'a>(
    attrs: impl IntoIterator<Item = (&'a Attribute, &'a Value)>,
    columns: &mut Vec<&'static str>,
    values: &mut Vec<Value>,
) {
    for (attr, value) in attrs {
        if let Some((column, words)) = search::derived(attr, value) {
            columns.push(column);
            values.push(words);
        }
    }
}

/// An expression of the relevance of a row of `rt` for `q`, higher first: how many of the
/// terms match in the title's words. Computed on the words columns, the same on every engine;
/// the needles are written into the SQL (words hold only letters and digits).
pub fn relevance(dialect: Dialect, rt: &ResourceType, q: &SearchQuery) -> String {
    let Some((_, how)) = search::columns(rt).find(|(a, _)| a.name == "title") else {
        return "0".into();
    };
    let parts: Vec<String> = q
        .terms
        .iter()
        .map(|t| {
            let needle = format!("'{}'", t.needle().replace('\'', "''"));
            format!("(CASE WHEN {} THEN 1 ELSE 0 END)", dialect.contains(&padded(how.column), &needle))
        })
        .collect();
    format!("({})", parts.join(" + "))
}

/// The words column `column` with a space at either end (see [`search::Term::needle`]).
pub fn padded(column: &str) -> String {
    format!("(' ' || {column} || ' ')")
}

/// Computes the words columns of every row of `rt` from its text: for a database made before
/// search existed. Rows are read and written a few hundred at a time, in id order.
pub fn backfill(tx: &mut dyn Tx, rt: &'static ResourceType) -> Result<u64, DbError> {
    let attrs: Vec<&Attribute> = search::columns(rt).map(|(a, _)| a).collect();
    if attrs.is_empty() {
        return Ok(0);
    }
    let names: Vec<&str> = attrs.iter().map(|a| a.name).collect();
    let select = format!("SELECT id, {} FROM {}", names.join(", "), rt.table);
    let sets: Vec<String> = attrs.iter().filter_map(|a| a.search.map(|s| format!("{} = ?", s.column))).collect();
    let update = format!("UPDATE {} SET {} WHERE id = ?", rt.table, sets.join(", "));
    let mut after: Option<String> = None;
    let mut done = 0;
    loop {
        let mut rows: Vec<Vec<Value>> = Vec::new();
        let mut collect = |r: &dyn super::Row| rows.push((0..=attrs.len()).map(|i| r.cell(i).to_value()).collect());
        match &after {
            None => tx.query(&format!("{select} ORDER BY id LIMIT 500"), &[], &mut collect)?,
            Some(id) => tx.query(
                &format!("{select} WHERE id > ? ORDER BY id LIMIT 500"),
                &[Value::Text(id.clone())],
                &mut collect,
            )?,
        };
        let Some(last) = rows.last() else { return Ok(done) };
        after = match &last[0] {
            Value::Text(id) => Some(id.clone()),
            _ => return Err(DbError::Other(format!("a row of {} has no text id", rt.table))),
        };
        for row in &rows {
            let mut values: Vec<Value> =
                attrs.iter().zip(&row[1..]).filter_map(|(a, v)| search::derived(a, v).map(|(_, w)| w)).collect();
            values.push(row[0].clone());
            tx.execute(&update, &values)?;
            done += 1;
        }
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
/// [`crate::search::excerpt`]). Reads the texts of the page's resources (one statement).
pub fn page_meta(
    tx: &mut dyn Tx,
    rt: &'static ResourceType,
    q: &SearchQuery,
    ids: &[String],
) -> Result<std::collections::HashMap<String, String>, DbError> {
    let attrs: Vec<(&'static Attribute, &'static search::Searchable)> = search::columns(rt).collect();
    let mut out = std::collections::HashMap::with_capacity(ids.len());
    if ids.is_empty() || attrs.is_empty() {
        return Ok(out);
    }
    let names: Vec<&str> = attrs.iter().map(|(a, _)| a.name).collect();
    let sql = format!("SELECT id, {} FROM {} WHERE {}", names.join(", "), rt.table, tx.dialect().in_ids("id"));
    tx.query(&sql, &[Value::Ids(ids.to_vec())], &mut |r| {
        let texts: Vec<(&'static str, &search::Searchable, &str)> = attrs
            .iter()
            .enumerate()
            .map(|(i, (a, how))| (a.name, *how, r.cell(1 + i).as_str().unwrap_or("")))
            .collect();
        if let Some(e) = search::excerpt::excerpt(q, &texts) {
            let meta = serde_json::json!({"search": {"attribute": e.attribute, "excerpt": e.html}});
            out.insert(r.cell(0).as_str().unwrap_or("").to_owned(), meta.to_string());
        }
    })?;
    Ok(out)
}
