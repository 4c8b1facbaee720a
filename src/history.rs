//! Keeping the history of changes bounded: `coursed history prune --before DATE` once, or
//! `coursed serve --history-keep 400d` every hour (see `store/history.rs` for what a prune
//! keeps).

use std::time::Duration;

use crate::store::history::{self, PRUNE_BATCH};
use crate::store::{display_name, Db, WriteContext};

/// How often a server prunes with `--history-keep`.
const EVERY: Duration = Duration::from_secs(3600);

/// Prunes what was recorded before `before` (ms): batch after batch, each its own write.
/// Returns the revisions deleted and the feed's new floor.
pub async fn prune(db: &Db, before: i64) -> crate::error::Result<(u64, i64)> {
    let ctx = WriteContext::system("prune");
    // What committed before is placed in the feed first, so that the cut can reach it.
    db.sync_feed().await?;
    // The floor first, committed: a reader is told of the prune before anything goes.
    let cut = db
        .write(&ctx, move |tx| {
            let cut = history::prune_cut(tx, before)?;
            history::raise_floor(tx, cut)?;
            Ok(cut)
        })
        .await?;
    let (mut total, mut after) = (0, 0);
    loop {
        match db.write(&ctx, move |tx| Ok(history::prune(tx, cut, after)?)).await? {
            Some((n, last)) if n as usize == PRUNE_BATCH => (total, after) = (total + n, last),
            Some((n, _)) => return Ok((total + n, cut)),
            None => {
                // Another server (a replica) prunes now, as far as this one would or further.
                log::info!("another server is pruning the history; this one leaves it to it");
                return Ok((total, cut));
            }
        }
    }
}

/// `coursed history prune`: `before` is a date (`2026-01-01`, midnight UTC) or a time as the
/// API writes them.
pub fn prune_command(database: &str, before: &str) -> Result<String, String> {
    let at = if before.len() == 10 { format!("{before}T00:00:00Z") } else { before.to_owned() };
    let before_ms = crate::time::parse_ms(&at).ok_or_else(|| {
        format!("--before {before:?} must be a date like 2026-01-31 or a time like 2026-01-31T12:00:00Z")
    })?;
    let (n, cut) = crate::store::on_command_database(database, false, async |db: &Db| prune(db, before_ms).await)?;
    Ok(format!(
        "pruned {n} revisions recorded before {at} from {}; the change feed now starts after cursor {cut}",
        display_name(database)
    ))
}

/// Prunes what is older than `keep` every hour, for as long as the server runs.
pub fn keep(db: Db, keep: Duration) {
    tokio::spawn(async move {
        loop {
            let before = crate::time::now_ms() - keep.as_millis() as i64;
            match prune(&db, before).await {
                Ok((0, _)) => {}
                Ok((n, cut)) => {
                    log::info!("pruned {n} revisions older than {} s (the feed starts after {cut})", keep.as_secs())
                }
                Err(e) => log::warn!("cannot prune the history now: {e}"),
            }
            tokio::time::sleep(EVERY).await;
        }
    });
}
