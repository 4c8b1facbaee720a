//! Best match first: a search's results read tier by tier, each in id order (the rows whose
//! title holds every term, then the others; see
//! [`Dialect::search_tiers`](super::dialect::Dialect::search_tiers)). A page is read from the
//! tiers it overlaps, each with `LIMIT` and `OFFSET` of its own, which needs the size of the
//! first tier: from the index when it can tell, else from what a first read found, else counted
//! up to a bound. Each tier is walked in id order or read from the index and sorted, whichever
//! its size makes cheaper. A page then costs about what the same search sorted by id costs,
//! whichever page it is, and never a query of the index per row.

use super::clauses::{count_of, table_rows, where_clause};
use super::dialect::{Dialect, Tier};
use super::select::{for_each, RowFields, Selection};
use super::tx::{Tx, Value};
use crate::error::Result;
use crate::search::SearchQuery;

/// About how many steps of a walk in id order (one index entry, tested against the tier's
/// sets) cost as much as reading one row of a tier from the search index and sorting it
/// (measured on both engines with a word most rows hold, see bench/search-relevance.sh).
const SET_COST: u64 = 4;

/// Reads rows `offset..offset + size` of the best-first order of the rows of `sel.rt` that
/// `wheres` (with `params`) and the search `q` select, of which there are `total`, calling
/// `each` for each in order.
#[allow(clippy::too_many_arguments)]
pub fn page(
    tx: &mut dyn Tx,
    sel: &Selection,
    q: &SearchQuery,
    wheres: &[String],
    params: &[Value],
    (offset, size): (u64, u64),
    total: u64,
    mut each: impl FnMut(&RowFields<'_>),
) -> Result<()> {
    let rt = sel.rt;
    let dialect = tx.dialect();
    let [first, rest] = dialect.search_tiers(rt, q);
    let rows = table_rows(tx, rt)?;
    let end = offset.saturating_add(size);
    let count = |tx: &mut dyn Tx, limit: Option<u64>| {
        let (mut w, mut p) = (wheres.to_vec(), params.to_vec());
        w.push(first.set.0.clone());
        p.extend(first.set.1.iter().cloned());
        let mut sql = format!("SELECT 1 FROM {}{}", rt.table, where_clause(&w));
        if let Some(limit) = limit {
            sql.push_str(" LIMIT ?");
            p.push(int(limit));
        }
        count_of(tx, &format!("SELECT count(*) FROM ({sql}) AS t"), &p)
    };
    let mut read = 0;
    // The size of the first tier, once known (None: at least the page's end).
    let firsts = match (dialect.search_title_count(rt, q).filter(|_| wheres.is_empty()), &first.planned) {
        (Some((sql, values)), _) => Some(count_of(tx, &sql, &values)?),
        // Read first, the planner choosing how from its statistics of the titles' index; the
        // size follows from what it found, unless it found nothing past the first page.
        (None, Some(planned)) => {
            read = tier(tx, sel, planned, "id", wheres, params, (offset, size), &mut each)?;
            match read {
                _ if read == size => None,
                0 if offset > 0 => Some(count(tx, None)?),
                _ => Some(offset + read),
            }
        }
        // Counted up to where the tier is known to be large enough that walking it reaches
        // the page's end cheaper than reading it whole (see `walks`).
        (None, None) => {
            let cap = (end.saturating_mul(rows) / SET_COST).isqrt().saturating_add(1).max(end);
            let n = count(tx, Some(cap))?;
            if n < cap {
                Some(n)
            } else {
                read = tier(tx, sel, &first.walk, "id", wheres, params, (offset, size), &mut each)?;
                None
            }
        }
    };
    let Some(firsts) = firsts else { return Ok(()) };
    if read == 0 && offset < firsts {
        let need = size.min(firsts - offset);
        let (condition, order) = form(dialect, &first, walks(firsts, offset, need, rows));
        read = tier(tx, sel, condition, order, wheres, params, (offset, need), &mut each)?;
    }
    if read < size && end.min(total) > offset + read {
        let (skip, need) = (offset.saturating_sub(firsts), size - read);
        let (condition, order) = form(dialect, &rest, walks(total.saturating_sub(firsts), skip, need, rows));
        tier(tx, sel, condition, order, wheres, params, (skip, need), &mut each)?;
    }
    Ok(())
}

/// The condition of `tier` to walk it or to read it as a set, and its order.
fn form(dialect: Dialect, tier: &Tier, walk: bool) -> (&(String, Vec<Value>), &'static str) {
    if walk {
        (&tier.walk, "id")
    } else {
        (&tier.set, dialect.set_order())
    }
}

/// Whether rows `skip..skip + need` of a tier of `n` rows of a table of `rows` are cheaper to
/// find by walking in id order (about `rows / n` steps for each row of the tier reached) than
/// by reading the whole tier from the search index and sorting it.
fn walks(n: u64, skip: u64, need: u64, rows: u64) -> bool {
    skip.saturating_add(need).saturating_mul(rows) < SET_COST.saturating_mul(n).saturating_mul(n)
}

/// Reads rows `skip..skip + need` of a tier (`condition`, with its parameters) in `order`,
/// an order of the id; returns how many there were. Only ids are ordered, and only the page's
/// rows are read whole: sorting whole rows (texts of kilobytes) would cost more than the rest.
#[allow(clippy::too_many_arguments)]
fn tier(
    tx: &mut dyn Tx,
    sel: &Selection,
    (condition, values): &(String, Vec<Value>),
    order: &str,
    wheres: &[String],
    params: &[Value],
    (skip, need): (u64, u64),
    each: impl FnMut(&RowFields<'_>),
) -> Result<u64> {
    let mut w = wheres.to_vec();
    w.push(condition.clone());
    let t = sel.rt.table;
    let sql = format!(
        "SELECT {} FROM {t} WHERE id IN (SELECT id FROM {t}{} ORDER BY {order} LIMIT ? OFFSET ?) ORDER BY id",
        sel.columns(),
        where_clause(&w)
    );
    let mut p = params.to_vec();
    p.extend(values.iter().cloned());
    p.push(int(need));
    p.push(int(skip));
    for_each(tx, sel, &sql, &p, each)
}

fn int(n: u64) -> Value {
    Value::Int(n.min(i64::MAX as u64) as i64)
}
