//! Best match first: a search's results read tier by tier, each in id order (the rows whose
//! title holds every term, then the others; see
//! [`Dialect::search_tiers`](super::dialect::Dialect::search_tiers)). A page is read
//! from the tiers it overlaps, each with `LIMIT` and `OFFSET` within that tier, once the size
//! of the first tier is known: a page costs about what the same search sorted by id costs,
//! whichever page it is, and never a query of the index per row.

use super::dialect::Tier;
use super::list::{count_of, table_rows, where_clause};
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
    // The first tier's size: from the index when it can tell, else counted up to the page's
    // end (past it, only the first tier is read).
    let (firsts, exact) = match dialect.search_title_count(rt, q).filter(|_| wheres.is_empty()) {
        Some((sql, values)) => (count_of(tx, &sql, &values)?, true),
        None => {
            let mut w = wheres.to_vec();
            w.push(first.set.clone());
            let sql = format!("SELECT count(*) FROM (SELECT 1 FROM {}{} LIMIT ?) AS t", rt.table, where_clause(&w));
            let mut p = params.to_vec();
            p.extend(first.values.iter().cloned());
            p.push(int(end));
            let n = count_of(tx, &sql, &p)?;
            (n, n < end)
        }
    };
    let mut read = 0;
    if offset < firsts {
        let need = size.min(firsts - offset);
        let walk = !exact || walks(firsts, offset, need, rows);
        read = tier(tx, sel, &first, walk, wheres, params, (offset, need), &mut each)?;
    }
    if exact && read < size && end.min(total) > offset + read {
        let (skip, need) = (offset.saturating_sub(firsts), size - read);
        let walk = walks(total.saturating_sub(firsts), skip, need, rows);
        tier(tx, sel, &rest, walk, wheres, params, (skip, need), &mut each)?;
    }
    Ok(())
}

/// Whether rows `skip..skip + need` of a tier of `n` rows of a table of `rows` are cheaper to
/// find by walking in id order (about `rows / n` steps for each row of the tier reached) than
/// by reading the whole tier from the search index and sorting it.
fn walks(n: u64, skip: u64, need: u64, rows: u64) -> bool {
    skip.saturating_add(need).saturating_mul(rows) < SET_COST.saturating_mul(n).saturating_mul(n)
}

/// Reads rows `skip..skip + need` of `tier` (walked or read as a set, see [`Tier`]) in id
/// order; returns how many there were. The tier is ordered by id alone, and only the page's
/// rows are read whole: sorting whole rows (texts of kilobytes) would cost more than the rest.
#[allow(clippy::too_many_arguments)]
fn tier(
    tx: &mut dyn Tx,
    sel: &Selection,
    tier: &Tier,
    walk: bool,
    wheres: &[String],
    params: &[Value],
    (skip, need): (u64, u64),
    each: impl FnMut(&RowFields<'_>),
) -> Result<u64> {
    let (condition, order) = if walk { (&tier.walk, "id") } else { (&tier.set, tx.dialect().set_order()) };
    let mut w = wheres.to_vec();
    w.push(condition.clone());
    let t = sel.rt.table;
    let sql = format!(
        "SELECT {} FROM {t} WHERE id IN (SELECT id FROM {t}{} ORDER BY {order} LIMIT ? OFFSET ?) ORDER BY id",
        sel.columns(),
        where_clause(&w)
    );
    let mut p = params.to_vec();
    p.extend(tier.values.iter().cloned());
    p.push(int(need));
    p.push(int(skip));
    for_each(tx, sel, &sql, &p, each)
}

fn int(n: u64) -> Value {
    Value::Int(n.min(i64::MAX as u64) as i64)
}
