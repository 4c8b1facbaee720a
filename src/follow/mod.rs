//! Following another coursed's catalogue (a district's, say): this database applies the
//! revisions of the upstream's change feed in feed order, each batch in one transaction that
//! also moves the cursor (`coursed_follow`), so that it resumes exactly where it stopped after
//! a lost network, a restart or a kill. The revisions arrive over HTTP (`serve --follow`,
//! `coursed follow`: [`run`]) or in a delta bundle carried by hand (`coursed export --since`,
//! `coursed import`: [`apply_batch`] from `crate::bundle`).
//!
//! A feed is named by an id of its own (`coursed_feed`), kept beside the cursor: a cursor is
//! never taken to another feed. While a database follows, the API refuses writes to its
//! catalogue (403 `followed_catalogue`), and `GET /v1/revisions` and `/readyz` say how far
//! behind it is (`meta.follow`, from [`Status`]).

mod apply;
mod run;
mod store;
mod upstream;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

pub use self::apply::Applier;
pub use self::run::{catch_up_once, spawn, Follower};
pub use self::store::{begin, feed_id, forget, get, Following, BUNDLES};
use crate::error::{Error, Problem};
use crate::store::history::{Carrier, Revision};
use crate::store::{Db, Tx, Value};

/// What applying a batch of revisions did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The cursor moved to `cursor`; `applied` revisions were applied.
    Moved { cursor: i64, applied: u64 },
    /// The database had every revision of the batch already; its cursor is `cursor`.
    Had { cursor: i64 },
    /// The batch begins after `first`, but the database has only up to `cursor`: the revisions
    /// between are missing.
    Gap { cursor: i64, first: i64 },
}

/// Applies `revisions` (of the feed `feed` of `upstream`, in feed order, each with its place)
/// in the caller's transaction, and moves the cursor past them: those the database has
/// already are passed over. A database that follows nothing begins to follow `feed` here, if
/// it holds no catalogue of its own.
pub fn apply_batch(tx: &mut dyn Tx, upstream: &str, feed: &str, revisions: &[Revision]) -> Result<Applied, String> {
    let db = |e: crate::store::DbError| e.to_string();
    // The row first, locked: another follower of the same feed into this database waits.
    tx.execute("UPDATE coursed_follow SET applied_at = applied_at WHERE id = 1", &[]).map_err(db)?;
    // A follower begun from an export (`import --follow`) may hold, in the history it took, a
    // revision that PostgreSQL placed in the feed only after the export's snapshot: its first
    // batch passes over those it holds (looked up one by one, once).
    let mut seeded = false;
    let cursor = match store::get(tx).map_err(db)? {
        Some(f) if f.feed != feed => {
            return Err(format!(
                "this database follows the feed {} (of {}), not {feed}: a cursor of one means nothing in the other",
                f.feed, f.upstream
            ))
        }
        Some(f) => {
            if f.upstream != upstream && upstream != BUNDLES {
                store::set_upstream(tx, upstream).map_err(db)?;
            }
            seeded = f.applied_at.is_none() && crate::store::history::count(tx).map_err(db)? > 0;
            f.cursor
        }
        None => {
            let held = crate::store::bulk::counts(tx).map_err(db)?;
            let kept = crate::store::history::count(tx).map_err(db)?;
            if held.total() > 0 || kept > 0 {
                return Err(format!(
                    "this database holds a catalogue of its own ({held}; {kept} revisions kept); a follower starts \
                     empty, so that it becomes the upstream's to the byte and keeps its history: use a new database"
                ));
            }
            if !store::begin(tx, upstream, feed, 0).map_err(db)? {
                // Another follower (a replica) began meanwhile: the next round reads its row.
                return Ok(Applied::Gap { cursor: 0, first: revisions.first().and_then(|r| r.seq).unwrap_or(0) });
            }
            0
        }
    };
    let mut todo = revisions.iter().skip_while(|r| r.seq.unwrap_or(0) <= cursor).peekable();
    match todo.peek().and_then(|r| r.seq) {
        None => return Ok(Applied::Had { cursor }),
        Some(first) if first != cursor + 1 => return Ok(Applied::Gap { cursor, first }),
        Some(_) => {}
    }
    // The upstream's revisions are kept as they were recorded there, beside the rows: the
    // triggers record nothing meanwhile (what a deletion takes along here, the upstream's
    // later revisions say, as they said it there).
    let recording = |tx: &mut dyn Tx, on: bool| {
        let sql = tx.dialect().history_recording(on);
        tx.query(sql, &[], &mut |_| {}).map(drop).map_err(db)
    };
    recording(tx, false)?;
    let mut carrier = Carrier::new(tx).map_err(db)?;
    let mut applier = Applier::default();
    let mut last = cursor;
    for r in todo {
        let seq = r.seq.unwrap_or(0);
        if seq != last + 1 {
            return Err(format!("the revisions skip from place {last} to {seq}: the feed must be read whole"));
        }
        applier.apply(tx, r)?;
        let held = seeded && {
            let sql = "SELECT 1 FROM revisions WHERE resource_type = ? AND resource_id = ? AND number = ?";
            let params =
                [Value::Text(r.resource_type.clone()), Value::Text(r.resource_id.clone()), Value::Int(r.number)];
            tx.exists(sql, &params).map_err(db)?
        };
        if !held {
            carrier.push(tx, Revision { seq: None, ..r.clone() }).map_err(db)?;
        }
        last = seq;
    }
    let applied = applier.finish(tx)?;
    carrier.finish(tx).map_err(db)?;
    recording(tx, true)?;
    if !store::advance(tx, feed, cursor, last).map_err(db)? {
        return Err("the cursor moved meanwhile".into());
    }
    Ok(Applied::Moved { cursor: last, applied })
}

/// `coursed follow --forget`: the catalogue becomes the database's own.
pub fn forget_command(database: &str) -> Result<String, String> {
    let name = crate::store::display_name(database);
    let forgot = crate::store::on_command_tx(database, "what it follows", true, false, |tx| store::forget(tx))?;
    Ok(match forgot {
        true => format!("{name} follows nothing now: its catalogue is its own, and the API writes to it"),
        false => format!("{name} followed nothing"),
    })
}

/// How long what the database follows is taken as known without reading it again.
const RECHECK: Duration = Duration::from_secs(1);
/// A live follower that heard nothing from its upstream for this long counts the time as lag.
const STALE: Duration = Duration::from_secs(45);

/// What a server knows of the catalogue's following: what `meta.follow` shows, and whether
/// writes are refused.
#[derive(Default)]
pub struct Status {
    inner: Mutex<Known>,
    /// This database's own feed id, once read (it never changes).
    feed: std::sync::OnceLock<String>,
}

#[derive(Default, Clone)]
struct Known {
    /// This process runs a follower, which keeps what follows up to date itself.
    live: bool,
    /// The upstream the follower running here reads.
    upstream: Option<String>,
    /// When the database was last read (when no follower runs here).
    checked: Option<Instant>,
    following: Option<Following>,
    /// The upstream's newest place, as last heard.
    head: i64,
    /// Since when (ms) the follower knows of revisions it has not applied.
    behind_since: Option<i64>,
    /// When the upstream was last heard from (ms).
    heard_at: Option<i64>,
    state: &'static str,
    error: Option<String>,
}

impl Status {
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the database follows, read again when it was read more than a second ago (a
    /// follower running here keeps it current itself).
    async fn known(&self, db: &Db) -> Known {
        let known = self.lock().clone();
        if known.live || known.checked.is_some_and(|at| at.elapsed() < RECHECK) {
            return known;
        }
        match db.read(|tx| Ok(store::get(tx)?)).await {
            Ok(following) => {
                let mut k = self.lock();
                k.following = following;
                k.checked = Some(Instant::now());
                k.clone()
            }
            // Unknown now: what was known stands (a write is refused by the database's own
            // failure anyway).
            Err(_) => known,
        }
    }

    /// This database's feed id, read once.
    pub async fn feed_id(&self, db: &Db) -> crate::error::Result<String> {
        if let Some(id) = self.feed.get() {
            return Ok(id.clone());
        }
        let id = db.read(|tx| Ok(store::feed_id(tx)?)).await?;
        Ok(self.feed.get_or_init(|| id).clone())
    }

    /// The 403 a write to the catalogue gets while the database follows another's.
    pub async fn refuse_write(&self, db: &Db) -> Option<Error> {
        // A follower runs here: refused from the start, before it has applied anything.
        let known = self.known(db).await;
        let upstream = known.following.map(|f| f.upstream).or(known.upstream)?;
        let from = if upstream == BUNDLES { "delta bundles (coursed import)".to_owned() } else { upstream };
        let detail = format!(
            "This catalogue is followed from {from}: it changes only as that one does. Make the change there \
             (or stop following with coursed follow --forget)."
        );
        Some(Problem::new(warp::http::StatusCode::FORBIDDEN, "followed_catalogue", detail).into())
    }

    /// `meta.follow`: what the database follows and how far behind it is; `None` when it
    /// follows nothing.
    pub async fn meta(&self, db: &Db) -> Option<Json> {
        let k = self.known(db).await;
        // A follower that has applied nothing yet follows nothing in the database yet.
        let starting =
            k.upstream.clone().map(|upstream| Following { upstream, feed: String::new(), cursor: 0, applied_at: None });
        let f = k.following.as_ref().or(starting.as_ref())?;
        let now = crate::time::now_ms();
        let mut meta = json!({
            "upstream": f.upstream,
            "cursor": f.cursor.to_string(),
            "applied_at": f.applied_at.map(crate::time::format_ms),
        });
        if k.live {
            let lag = match k.behind_since {
                Some(since) if f.cursor < k.head => now - since,
                _ => match k.heard_at {
                    Some(at) if now - at > STALE.as_millis() as i64 => now - at,
                    Some(_) => 0,
                    None => now - f.applied_at.unwrap_or(now),
                },
            };
            meta["head"] = json!(k.head.to_string());
            meta["lag"] = json!(lag.max(0) as f64 / 1000.0);
            meta["state"] = json!(k.state);
            if let Some(e) = &k.error {
                meta["error"] = json!(e);
            }
        }
        Some(meta)
    }

    /// The follower running here: what it follows now.
    fn follower_says(&self, f: impl FnOnce(&mut Known)) {
        let mut k = self.lock();
        k.live = true;
        f(&mut k);
    }
}
