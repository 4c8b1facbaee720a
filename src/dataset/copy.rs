//! `coursed copy`: every module, subject and chapter, with ids and timestamps, and the history
//! of their changes, from one database to another of either engine, in one transaction on the
//! target.

use crate::resources::TYPES;
use crate::store::bulk::{self, Counts, Loader};
use crate::store::{display_name, Db, Durability, Options};

/// What a copy wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    pub resources: Counts,
    /// The revisions of the source's history carried with them.
    pub revisions: u64,
}

impl std::fmt::Display for Copied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} and {} revisions", self.resources, self.revisions)
    }
}

/// Copies the catalogue of `from` and its history into `to`, which must be empty unless
/// `replace`. Shows a progress bar when stderr is a terminal.
pub fn copy(from: &str, to: &str, replace: bool) -> Result<Copied, String> {
    copy_with(from, to, replace, false)
}

/// [`copy`], with the access tokens too when `tokens` (for a backup, which a server may be
/// restored from).
pub fn copy_with(from: &str, to: &str, replace: bool, tokens: bool) -> Result<Copied, String> {
    if from == to {
        return Err("--from and --to name the same database".into());
    }
    // Opening a SQLite path creates the file: a mistyped source would copy nothing, silently.
    crate::store::require_existing(from, "--from")?;
    let mut opts = Options::new(from, Durability::Full);
    opts.wait = crate::store::COMMAND_WAIT;
    let opened = Db::open_source(&opts).map_err(|e| format!("source: {e}"))?;
    let source = &opened.db;
    let (src, dst) = (display_name(from), display_name(to));
    let copied = source.read_blocking(|stx| {
        // One snapshot of the source, however long the copy takes.
        bulk::begin_whole_read(stx).map_err(|e| format!("cannot read {src}: {e}"))?;
        let total = bulk::counts(stx).map_err(|e| format!("cannot read {src}: {e}"))?.total();
        let bar = super::progress_bar(total, "{bar:40} {pos}/{len} resources, {per_sec}, {eta} left");
        let copied = crate::store::bulk(to, replace, crate::store::COMMAND_WAIT, |dtx| {
            let mut loader = Loader::new(dtx);
            let shown = bar.clone();
            loader.progress = Some(Box::new(move |n| shown.set_position(n)));
            for rt in TYPES {
                bulk::read_all(stx, rt, &mut |row| loader.push(rt, row))
                    .map_err(|e| format!("copying {} from {src} to {dst} failed: {e}", rt.name))?;
            }
            let counts = loader.finish().map_err(|e| format!("copying into {dst} failed: {e}"))?;
            let revisions = crate::store::history::carry(stx, dtx)
                .map_err(|e| format!("copying the history from {src} to {dst} failed: {e}"))?;
            if tokens {
                crate::tokens::store::copy_all(stx, dtx).map_err(|e| format!("copying the tokens failed: {e}"))?;
            }
            Ok(Copied { resources: counts, revisions })
        });
        bar.finish_and_clear();
        let _ = stx.end_snapshot();
        copied
    });
    copied.map_err(|e| format!("cannot read {src}: {e}"))?
}
