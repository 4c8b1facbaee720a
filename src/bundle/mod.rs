//! Portable bundles: a catalogue as JSON Lines, to carry between schools, engines and versions.
//!
//! ```text
//! {"format":"coursed-bundle","version":1,"exported_at":"2026-11-23T06:15:00.000Z","generator":"coursed 0.1.0"}
//! {"type":"modules","id":"0190…","attributes":{"title":"Physics",…,"created_at":"…","updated_at":"…"}}
//! {"type":"subjects","id":"0190…","attributes":{…},"relationships":{"module":{"data":{"type":"modules","id":"0190…"}}}}
//! {"counts":{"modules":1,"subjects":1,"chapters":0}}
//! ```
//!
//! The first line is the header, then one JSON:API resource object per line (parents before
//! their children), then an optional trailer with the number of resources of each type. Export
//! and import both stream: memory stays bounded whatever the size of the catalogue.
//!
//! A bundle written with `--history` is of version 2 and says `"history":true` in its header:
//! after the resources come the revisions, one `revisions` resource object per line in the
//! order of the change feed (as `GET /v1/revisions/{id}` shows them, without links), and the
//! trailer counts them too. A version 1 bundle is the same without them: this coursed writes
//! version 1 unless asked for the history, so that older ones read what it writes.

mod apply;
mod import;

use std::io::Write;
use std::path::Path;

pub(crate) use self::apply::{upsert, Line};
pub(crate) use self::import::resource as resource_row;
pub use self::import::{import, Imported, Options};
use crate::render::Doc;
use crate::resources::TYPES;
use crate::store::bulk::{self, Counts};
use crate::store::{display_name, history, Db, DbError, Durability, Record, Selection, Value};

/// The `format` of a header.
pub const FORMAT: &str = "coursed-bundle";
/// The version of a bundle with history.
pub const VERSION: u64 = 2;
/// The version of a bundle without history.
pub const PLAIN: u64 = 1;

/// The version of a delta: the revisions after a cursor, for a follower.
pub const DELTA: u64 = 3;

/// What an export writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// The catalogue (version 1).
    Catalogue,
    /// The catalogue and every revision kept (version 2).
    WithHistory,
    /// The revisions of the change feed after the cursor `since` (version 3): a delta.
    Delta { since: i64 },
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exported {
    pub resources: Counts,
    /// Revisions written (with `--history`, or in a delta).
    pub revisions: Option<u64>,
    /// A delta's cursors: from (excluded) and to.
    pub delta: Option<(i64, i64)>,
}

impl std::fmt::Display for Exported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some((since, until)) = self.delta {
            let n = self.revisions.unwrap_or(0);
            return write!(f, "a delta of {n} revisions (after cursor {since}, up to {until})");
        }
        write!(f, "{}", self.resources)?;
        match self.revisions {
            Some(n) => write!(f, " and {n} revisions"),
            None => Ok(()),
        }
    }
}

/// Writes the catalogue of `database`, read in one snapshot, as a bundle to `output` (`-` for
/// stdout), with every revision it keeps, or as a delta, as `contents` says. A file is written
/// under a temporary name and renamed when complete; an existing one is refused unless `force`.
pub fn export(database: &str, output: &str, force: bool, contents: Contents) -> Result<Exported, String> {
    crate::store::require_existing(database, crate::store::DATABASE_FLAG)?;
    let mut opts = crate::store::Options::new(database, Durability::Full);
    opts.wait = crate::store::COMMAND_WAIT;
    let source = Db::open_source(&opts)?;
    let db = &source.db;
    {
        // PostgreSQL places revisions in the feed after they commit: every one committed is
        // (the header's cursor says how far the snapshot's catalogue goes).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime: {e}"))?;
        runtime.block_on(db.sync_feed()).map_err(|e| format!("cannot read {}: {e}", display_name(database)))?;
    }
    if output == "-" {
        let stdout = std::io::stdout();
        return export_to(db, database, &mut std::io::BufWriter::new(stdout.lock()), "stdout", contents);
    }
    let path = Path::new(output);
    if path.exists() && !force {
        return Err(format!("{output} exists; choose another name or pass --force to replace it"));
    }
    let partial = path.with_file_name(format!(
        ".{}.partial-{}",
        path.file_name().map_or_else(|| "bundle".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    // A stale one of this process id is ours; removing a link removes the link, not its target.
    let _ = std::fs::remove_file(&partial);
    let written = crate::private::create_new(&partial)
        .map_err(|e| format!("cannot write {}: {e}", partial.display()))
        .and_then(|file| {
            let mut out = std::io::BufWriter::new(file);
            let counts = export_to(db, database, &mut out, output, contents)?;
            let file = out.into_inner().map_err(|e| format!("cannot write {output}: {e}"))?;
            file.sync_all().map_err(|e| format!("cannot write {output}: {e}"))?;
            std::fs::rename(&partial, path).map_err(|e| format!("cannot rename to {output}: {e}"))?;
            Ok(counts)
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

fn export_to(db: &Db, database: &str, out: &mut dyn Write, name: &str, contents: Contents) -> Result<Exported, String> {
    let source = display_name(database);
    let read = db.read_blocking(|tx| {
        bulk::begin_whole_read(tx).map_err(|e| format!("cannot read {source}: {e}"))?;
        let written = (|| {
            let fail = |e: std::io::Error| format!("cannot write {name}: {e}");
            let reading = |e: DbError| format!("cannot read {source}: {e}");
            let feed = crate::follow::feed_id(tx).map_err(reading)?;
            let head = history::head(tx).map_err(reading)?;
            if let Contents::Delta { since } = contents {
                return export_delta(tx, out, &source, &feed, since, head).map_err(|e| e.either(fail));
            }
            let history = contents == Contents::WithHistory;
            let total = bulk::counts(tx).map_err(reading)?;
            let bar =
                crate::dataset::progress_bar(total.total(), "{bar:40} {pos}/{len} resources, {per_sec}, {eta} left");
            writeln!(out, "{}", header(history, &feed, head)).map_err(fail)?;
            let mut line = Doc::line();
            let mut counts = Counts::default();
            for (i, rt) in TYPES.iter().enumerate() {
                let sel = Selection::whole(rt);
                bulk::read_all(tx, rt, &mut |row| {
                    line.clear();
                    line.portable(sel, &record(sel, row));
                    line.raw("\n");
                    out.write_all(line.bytes()).map_err(|e| DbError::Other(fail(e)))?;
                    counts.0[i] += 1;
                    bar.inc(1);
                    Ok(())
                })
                .map_err(|e| format!("exporting {} from {source} failed: {e}", rt.name))?;
            }
            let revisions = if history {
                let n = history::read_every(tx, &mut |r| write_revision(out, &r, None).map_err(fail))
                    .map_err(|e| format!("exporting the history from {source} failed: {e}"))?;
                Some(n)
            } else {
                None
            };
            bar.finish_and_clear();
            let exported = Exported { resources: counts, revisions, delta: None };
            writeln!(out, "{}", trailer(&exported)).map_err(fail)?;
            out.flush().map_err(fail)?;
            Ok(exported)
        })();
        let _ = tx.end_snapshot();
        written
    });
    read.map_err(|e| format!("cannot read {source}: {e}"))?
}

/// Why a delta was not written: a fault of the output, or a message.
enum DeltaFault {
    Io(std::io::Error),
    Said(String),
}

impl DeltaFault {
    fn either(self, io: impl FnOnce(std::io::Error) -> String) -> String {
        match self {
            DeltaFault::Io(e) => io(e),
            DeltaFault::Said(s) => s,
        }
    }
}

/// The revisions after `since` in feed order, up to `head`, as a delta.
fn export_delta(
    tx: &mut dyn crate::store::Tx,
    out: &mut dyn Write,
    source: &str,
    feed: &str,
    since: i64,
    head: i64,
) -> Result<Exported, DeltaFault> {
    let said = |e: DbError| DeltaFault::Said(format!("cannot read {source}: {e}"));
    let floor = history::floor(tx).map_err(said)?;
    if since < floor {
        return Err(DeltaFault::Said(format!(
            "the revisions after cursor {since} were pruned from {source} (its feed starts after {floor}): the \
             follower must start again from an empty database and a delta since 0 taken before the prune"
        )));
    }
    if since > head {
        return Err(DeltaFault::Said(format!("{source}'s feed ends at cursor {head}; --since {since} is beyond it")));
    }
    let at = crate::time::format_ms(crate::time::now_ms());
    let generator = concat!("coursed ", env!("CARGO_PKG_VERSION"));
    writeln!(
        out,
        r#"{{"format":"{FORMAT}","version":{DELTA},"delta":true,"feed":"{feed}","since":"{since}","until":"{head}","exported_at":"{at}","generator":"{generator}"}}"#
    )
    .map_err(DeltaFault::Io)?;
    let mut n = 0u64;
    let mut io = None;
    history::read_after(tx, since, head, &mut |r| {
        n += 1;
        if io.is_none() {
            io = write_revision(out, &r, r.seq).err();
        }
    })
    .map_err(said)?;
    if let Some(e) = io {
        return Err(DeltaFault::Io(e));
    }
    writeln!(out, r#"{{"counts":{{"revisions":{n}}}}}"#).map_err(DeltaFault::Io)?;
    out.flush().map_err(DeltaFault::Io)?;
    Ok(Exported { resources: Counts::default(), revisions: Some(n), delta: Some((since, head)) })
}

/// One revision line: its resource object, members in the order of a resource line (for
/// people reading it), and its place in the feed in a delta.
fn write_revision(out: &mut dyn Write, r: &history::Revision, cursor: Option<i64>) -> std::io::Result<()> {
    let o = r.resource_object();
    let meta = cursor.map_or(String::new(), |c| format!(r#","meta":{{"cursor":"{c}"}}"#));
    let line = format!(
        r#"{{"type":"revisions","id":{},"attributes":{},"relationships":{}{meta}}}"#,
        o["id"], o["attributes"], o["relationships"]
    );
    out.write_all(line.as_bytes())?;
    out.write_all(b"\n")
}

/// A row in [`Selection::whole`] column order as a record of that selection.
fn record(sel: &Selection, row: Vec<Value>) -> Record {
    let mut cells = row.into_iter();
    let id = match cells.next() {
        Some(Value::Text(id)) => id,
        _ => String::new(),
    };
    let attrs: Vec<Value> = cells.by_ref().take(sel.attrs.len()).collect();
    let parents = cells.map(|v| if let Value::Text(p) = v { Some(p) } else { None }).collect();
    Record { id, attrs, parents, children: Vec::new(), links: None }
}

/// The header line; written by hand so that `format` comes first, for people reading it. The
/// feed's id and head say where in the source's feed the snapshot was taken (information).
fn header(history: bool, feed: &str, head: i64) -> String {
    let at = crate::time::format_ms(crate::time::now_ms());
    let generator = concat!("coursed ", env!("CARGO_PKG_VERSION"));
    let version = if history { format!(r#"{VERSION},"history":true"#) } else { PLAIN.to_string() };
    format!(
        r#"{{"format":"{FORMAT}","version":{version},"feed":"{feed}","cursor":"{head}","exported_at":"{at}","generator":"{generator}"}}"#
    )
}

/// The trailer line: the resources of each type, in [`TYPES`] order, and the revisions.
fn trailer(exported: &Exported) -> String {
    let mut counts: Vec<String> =
        TYPES.iter().zip(exported.resources.0).map(|(t, n)| format!(r#""{}":{n}"#, t.name)).collect();
    if let Some(n) = exported.revisions {
        counts.push(format!(r#""revisions":{n}"#));
    }
    format!(r#"{{"counts":{{{}}}}}"#, counts.join(","))
}
