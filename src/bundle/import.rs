//! `coursed import`: a bundle read line by line into one transaction on the target, each line
//! checked by the rules the API applies to a create ([`crate::jsonapi::body`]).

use std::io::{BufRead, BufReader, Read};

use serde_json::Value as Json;

use super::apply::{Apply, Line};
use super::{DELTA, FORMAT, PLAIN, VERSION};
use crate::error::Source;
use crate::jsonapi::body::{self, Mode};
use crate::jsonapi::query::normalize_id;
use crate::resources::{Kind, ResourceType, TYPES};
use crate::store::bulk::{Counts, Existing, Target};
use crate::store::history::{self, Carrier, Revision};
use crate::store::{display_name, Selection, Value};

/// The longest line read: a resource's texts at their limits, escaped, fit well within it.
const MAX_LINE: u64 = 16 << 20;

/// How to import.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Keep what the target holds: insert new ids, update existing ones, delete nothing.
    pub merge: bool,
    /// Check everything and count what would change, then roll back.
    pub dry_run: bool,
    /// Leave out the history a bundle carries: its catalogue is imported as from a bundle
    /// without one (and may then be merged).
    pub no_history: bool,
    /// Begin to follow the feed the bundle (with history) was exported from, at its cursor.
    pub follow: bool,
}

/// What an import changed (or, in a dry run, would have).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Imported {
    pub inserted: Counts,
    pub updated: Counts,
    /// The revisions of the bundle's history written, when it carries one.
    pub revisions: Option<u64>,
    /// A delta's revisions applied, and the follower's cursor after.
    pub applied: Option<(u64, i64)>,
    /// The database follows the feed the bundle was exported from, from this cursor on.
    pub follows: Option<i64>,
}

impl std::fmt::Display for Imported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some((n, cursor)) = self.applied {
            return match n {
                0 => {
                    write!(f, "nothing to apply: it has every revision of this delta already (its cursor is {cursor})")
                }
                n => write!(f, "applied {n} revisions of the delta; its cursor is {cursor}"),
            };
        }
        write!(f, "inserted {}; updated {}", self.inserted, self.updated)?;
        if let Some(n) = self.revisions {
            write!(f, "; their history: {n} revisions")?;
        }
        match self.follows {
            Some(cursor) => write!(f, "; it follows the feed exported from, from cursor {cursor} on"),
            None => Ok(()),
        }
    }
}

/// Imports the bundle `input` (a file, or `-` for stdin) into `database`: an empty database,
/// or any with `merge`. One transaction: any bad line leaves the target as it was.
pub fn import(database: &str, input: &str, opts: Options) -> Result<Imported, String> {
    if opts.dry_run {
        crate::store::require_existing(database, crate::store::DATABASE_FLAG)?;
    }
    let (reader, size): (Box<dyn Read>, u64) = if input == "-" {
        (Box::new(std::io::stdin().lock()), 0)
    } else {
        let file = std::fs::File::open(input).map_err(|e| format!("cannot read {input}: {e}"))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        (Box::new(file), size)
    };
    let mut lines = Lines { reader: BufReader::with_capacity(1 << 20, reader), number: 0, read: 0, buf: Vec::new() };
    // The header is checked before the database is touched.
    let Some((number, first)) = lines.next()? else {
        return Err("the bundle is empty: it has no header line".into());
    };
    let (has_history, origin) = match check_header(number, first)? {
        Header::Plain(origin) => (false, origin),
        Header::History(origin) => (true, origin),
        Header::Delta(delta) => {
            if opts.merge || opts.no_history {
                return Err("a delta is applied as it is: --merge and --no-history are for other bundles".into());
            }
            return import_delta(database, lines, delta, opts.dry_run);
        }
    };
    let follows = match (opts.follow, origin, has_history) {
        (false, ..) => None,
        (true, Some(origin), true) => Some(origin),
        (true, None, _) => {
            return Err("this bundle does not name the feed it was exported from: export it with this coursed".into())
        }
        (true, Some(_), false) => {
            return Err("a follower keeps its district's history: export the district with --history".into())
        }
    };
    let carry = has_history && !opts.no_history;
    if carry && opts.merge {
        return Err("the bundle carries a history, which cannot be merged into another: import it into a \
                    database without one, or pass --no-history to merge its catalogue alone"
            .into());
    }
    let existing = if opts.merge { Existing::Keep } else { Existing::Refuse };
    let target = Target { existing, commit: !opts.dry_run, hint: "or --merge", by: "import", carries_history: carry };
    let name = display_name(database);
    let new_file = !crate::store::is_postgres_url(database) && !std::path::Path::new(database).exists();
    let imported = crate::store::bulk_into(database, target, crate::store::COMMAND_WAIT, |tx| {
        if let Some(f) = crate::follow::get(tx).map_err(|e| format!("cannot read {name}: {e}"))? {
            return Err(format!(
                "{name} follows {}: its catalogue changes only as that one does (import a delta of it, or stop \
                 following with coursed follow --forget)",
                f.upstream
            ));
        }
        let bar = crate::dataset::progress_bar(size, "{bar:40} {bytes}/{total_bytes}, {bytes_per_sec}, {eta} left");
        let mut apply = Apply::new(tx, opts.merge).map_err(|e| format!("cannot import into {name}: {e}"))?;
        let mut trailer: Option<(u64, Counts, Option<u64>)> = None;
        // The history, once its first revision was read: what writes it, and how many were read.
        let mut history: Option<(Option<Carrier>, u64)> = None;
        while let Some((number, bytes)) = lines.next()? {
            if let Some((at, ..)) = trailer {
                return Err(format!("line {number}: nothing may follow the trailer (line {at})"));
            }
            match parse(number, bytes, has_history)? {
                Item::Resource(_) if history.is_some() => {
                    return Err(format!("line {number}: the resources come before the revisions"));
                }
                Item::Resource(line) => apply.push(line)?,
                Item::Revision(revision) => {
                    let (carrier, read) = match &mut history {
                        Some(h) => h,
                        None => {
                            let tx = apply.written()?;
                            let carrier = carry.then(|| Carrier::new(tx)).transpose().map_err(|e| e.to_string())?;
                            history.insert((carrier, 0))
                        }
                    };
                    *read += 1;
                    if let Some(carrier) = carrier {
                        let tx = apply.written()?;
                        carrier.push(tx, revision).map_err(|e| format!("line {number}: {e}"))?;
                    }
                }
                Item::Trailer(counts, revisions) => trailer = Some((number, counts, revisions)),
            }
            bar.set_position(lines.read);
        }
        let read = history.as_ref().map_or(0, |(_, n)| *n);
        let written = match history.and_then(|(carrier, _)| carrier) {
            Some(carrier) => {
                Some(carrier.finish(apply.written()?).map_err(|e| format!("writing the history failed: {e}"))?)
            }
            None => carry.then_some(0),
        };
        if let Some((feed, cursor)) = &follows {
            let tx = apply.written()?;
            crate::follow::begin(tx, crate::follow::BUNDLES, feed, *cursor).map_err(|e| e.to_string())?;
        }
        let (mut imported, seen) = apply.finish()?;
        imported.revisions = written;
        imported.follows = follows.as_ref().map(|(_, cursor)| *cursor);
        bar.finish_and_clear();
        if let Some((at, counts, revisions)) = trailer {
            if counts != seen {
                return Err(format!("line {at}: the trailer counts {counts}, but the bundle holds {seen}"));
            }
            if revisions.is_some_and(|n| n != read) {
                let n = revisions.unwrap_or_default();
                return Err(format!("line {at}: the trailer counts {n} revisions, but the bundle holds {read}"));
            }
        }
        Ok(imported)
    });
    if imported.is_err() && new_file {
        // A failed import into a file it created leaves no empty database behind.
        crate::store::remove_sqlite_file(std::path::Path::new(database));
    }
    imported
}

/// The lines of a bundle, numbered from 1; blank lines are skipped.
struct Lines<R> {
    reader: BufReader<R>,
    number: u64,
    read: u64,
    buf: Vec<u8>,
}

impl<R: Read> Lines<R> {
    /// The next line that is not blank, with its number.
    fn next(&mut self) -> Result<Option<(u64, &[u8])>, String> {
        loop {
            self.buf.clear();
            self.number += 1;
            let n = (&mut self.reader)
                .take(MAX_LINE + 1)
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| format!("line {}: cannot read the bundle: {e}", self.number))?;
            self.read += n as u64;
            if n == 0 {
                return Ok(None);
            }
            if n as u64 > MAX_LINE {
                return Err(format!("line {}: longer than {} MiB", self.number, MAX_LINE >> 20));
            }
            if !self.buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some((self.number, &self.buf)));
            }
        }
    }
}

/// What a header says the bundle holds.
enum Header {
    /// A catalogue, with the feed it was exported from and the cursor of its snapshot when the
    /// header names them.
    Plain(Option<(String, i64)>),
    History(Option<(String, i64)>),
    Delta(Delta),
}

/// A delta's header: the feed, and the cursors its revisions go from (excluded) and to.
struct Delta {
    feed: String,
    since: i64,
    until: i64,
}

/// Checks the header; says what the bundle holds.
fn check_header(number: u64, bytes: &[u8]) -> Result<Header, String> {
    let expected = format!(r#"the first line must be the header {{"format":"{FORMAT}","version":{PLAIN}}}"#);
    let header: Json =
        serde_json::from_slice(bytes).map_err(|e| format!("line {number}: not a coursed bundle ({e}); {expected}"))?;
    if header.get("format").and_then(Json::as_str) != Some(FORMAT) {
        return Err(format!("line {number}: not a coursed bundle: {expected}"));
    }
    let history = header.get("history").and_then(Json::as_bool).unwrap_or(false);
    let cursor =
        |name: &str| header.get(name).and_then(Json::as_str).and_then(|c| c.parse::<i64>().ok()).filter(|c| *c >= 0);
    let feed = header.get("feed").and_then(Json::as_str).filter(|f| !f.is_empty());
    let origin = feed.map(str::to_owned).zip(cursor("cursor"));
    match header.get("version").and_then(Json::as_u64) {
        Some(PLAIN) if history => Err(format!("line {number}: a bundle with history is of version {VERSION}")),
        Some(PLAIN) => Ok(Header::Plain(origin)),
        Some(VERSION) if history => Ok(Header::History(origin)),
        Some(VERSION) => Ok(Header::Plain(origin)),
        Some(DELTA) => match (feed, cursor("since"), cursor("until")) {
            (Some(feed), Some(since), Some(until)) if since <= until => {
                Ok(Header::Delta(Delta { feed: feed.to_owned(), since, until }))
            }
            _ => Err(format!(
                "line {number}: a delta's header needs \"feed\", and \"since\" and \"until\" cursors (since <= until)"
            )),
        },
        Some(v) if v > DELTA => Err(format!(
            "line {number}: the bundle is of version {v}, newer than this coursed reads ({DELTA}); use a newer coursed"
        )),
        _ => Err(format!("line {number}: `version` must be {PLAIN}, {VERSION} or {DELTA}; {expected}")),
    }
}

/// Revisions of a delta applied in one go.
const DELTA_BATCH: usize = 1000;

/// Applies a delta to a follower in one transaction (see `crate::follow`): the revisions after
/// the follower's cursor, in order; a delta it has already is a no-op, one that begins past
/// its cursor is refused.
fn import_delta<R: Read>(database: &str, mut lines: Lines<R>, delta: Delta, dry_run: bool) -> Result<Imported, String> {
    use crate::follow::{apply_batch, Applied, BUNDLES};
    let name = display_name(database);
    let target = Target { existing: Existing::Keep, commit: !dry_run, hint: "", by: "follow", carries_history: false };
    let new_file = !crate::store::is_postgres_url(database) && !std::path::Path::new(database).exists();
    let applied = crate::store::bulk_into(database, target, crate::store::COMMAND_WAIT, |tx| {
        let following = crate::follow::get(tx).map_err(|e| format!("cannot read {name}: {e}"))?;
        let cursor = following.as_ref().map_or(0, |f| f.cursor);
        if let Some(f) = following.as_ref().filter(|f| f.feed != delta.feed) {
            return Err(format!(
                "this delta is of the feed {}, but {name} follows the feed {} (of {}): it cannot apply here",
                delta.feed, f.feed, f.upstream
            ));
        }
        if following.is_some() && delta.until <= cursor {
            return Ok(Imported { applied: Some((0, cursor)), ..Imported::default() });
        }
        if delta.since > cursor {
            return Err(format!(
                "this delta holds the revisions after cursor {}, but {name} has applied only up to {cursor}: \
                 import a delta since {cursor} first (coursed export --since {cursor})",
                delta.since
            ));
        }
        let (mut batch, mut read, mut applied, mut at) = (Vec::with_capacity(DELTA_BATCH), 0u64, 0u64, cursor);
        let mut trailer = None;
        let mut flush = |tx: &mut dyn crate::store::Tx, batch: &mut Vec<Revision>| -> Result<(), String> {
            match apply_batch(tx, BUNDLES, &delta.feed, batch)? {
                Applied::Moved { cursor, applied: n } => (at, applied) = (cursor, applied + n),
                Applied::Had { cursor } => at = cursor,
                Applied::Gap { cursor, first } => {
                    return Err(format!("the delta skips from cursor {cursor} to {first}: it is not whole"))
                }
            }
            batch.clear();
            Ok(())
        };
        while let Some((number, bytes)) = lines.next()? {
            if let Some(t) = trailer {
                return Err(format!("line {number}: nothing may follow the trailer (line {t})"));
            }
            let json: Json = serde_json::from_slice(bytes).map_err(|e| format!("line {number}: not JSON: {e}"))?;
            if json.get("counts").is_some() && json.get("type").is_none() {
                let n = json["counts"]["revisions"].as_u64();
                if n != Some(read) {
                    return Err(format!(
                        "line {number}: the trailer counts {n:?} revisions, but the delta holds {read}"
                    ));
                }
                trailer = Some(number);
                continue;
            }
            if json.get("type").and_then(Json::as_str) != Some("revisions") {
                return Err(format!("line {number}: a delta holds revisions only"));
            }
            let mut r = history::from_object(&json).map_err(|e| format!("line {number}: revisions: {e}"))?;
            let seq = json["meta"]["cursor"].as_str().and_then(|c| c.parse::<i64>().ok());
            let seq = seq.filter(|s| *s > delta.since && *s <= delta.until);
            r.seq = Some(seq.ok_or_else(|| {
                format!("line {number}: a revision of a delta needs meta.cursor, after since and up to until")
            })?);
            read += 1;
            batch.push(r);
            if batch.len() == DELTA_BATCH {
                flush(tx, &mut batch).map_err(|e| format!("line {number}: {e}"))?;
            }
        }
        flush(tx, &mut batch)?;
        if trailer.is_none() {
            return Err("the delta ends without its trailer: it was cut short".into());
        }
        if at != delta.until {
            return Err(format!("the delta ends at cursor {at}, not at its until ({})", delta.until));
        }
        Ok(Imported { applied: Some((applied, at)), ..Imported::default() })
    });
    if applied.is_err() && new_file {
        crate::store::remove_sqlite_file(std::path::Path::new(database));
    }
    applied
}

enum Item {
    Resource(Line),
    Revision(Revision),
    /// The resources of each type, and the revisions when counted.
    Trailer(Counts, Option<u64>),
}

/// Parses and checks one line after the header (of a bundle with a history when `history`).
fn parse(number: u64, bytes: &[u8], history: bool) -> Result<Item, String> {
    let json: Json = serde_json::from_slice(bytes).map_err(|e| format!("line {number}: not JSON: {e}"))?;
    let Some(obj) = json.as_object() else {
        return Err(format!("line {number}: must be a JSON object (a resource, or the trailer)"));
    };
    if obj.contains_key("counts") && !obj.contains_key("type") {
        let (counts, revisions) = trailer_counts(&json["counts"]).map_err(|e| format!("line {number}: {e}"))?;
        return Ok(Item::Trailer(counts, revisions));
    }
    let Some(type_name) = obj.get("type").and_then(Json::as_str) else {
        return Err(format!("line {number}: a resource needs `type` (a string)"));
    };
    if type_name == "revisions" {
        if !history {
            return Err(format!("line {number}: a revision, in a bundle whose header does not say \"history\":true"));
        }
        return history::from_object(&json).map(Item::Revision).map_err(|e| format!("line {number}: revisions: {e}"));
    }
    let Some(rt) = crate::resources::by_name(type_name) else {
        let known: Vec<&str> = TYPES.iter().map(|t| t.name).collect();
        return Err(format!("line {number}: unknown type `{type_name}` (a bundle holds {})", known.join(", ")));
    };
    let Some(id) = obj.get("id").and_then(Json::as_str).and_then(normalize_id) else {
        return Err(format!("line {number}: {type_name}: `id` must be a UUID string"));
    };
    resource(number, &json, rt, id).map(Item::Resource)
}

/// The row of the resource object `json` of type `rt` and id `id`, checked by the rules of a
/// create (line `number` names it in a fault): what a bundle's line, or a revision that a
/// follower applies, writes.
pub(crate) fn resource(number: u64, json: &Json, rt: &'static ResourceType, id: String) -> Result<Line, String> {
    let type_name = rt.name;
    let at = |member: &str, detail: &str| format!("line {number}: {type_name} {id}: {member}: {detail}");
    if let Some(rels) = json.get("relationships").and_then(Json::as_object) {
        for name in rels.keys() {
            if rt.relationship(name).is_some_and(|r| !r.is_to_one()) {
                let detail = "a bundle carries to-one linkage only (a child names its parent)";
                return Err(at(&format!("relationships.{name}"), detail));
            }
        }
    }
    let changes = body::resource_data(rt, json, Mode::Whole(&id)).map_err(|e| {
        let problems: Vec<String> = e.problems.iter().map(|p| at(&member(&p.source), &p.detail)).collect();
        problems.join("; ")
    })?;
    let sel = Selection::whole(rt);
    let mut row = Vec::with_capacity(1 + sel.attrs.len() + sel.to_one.len());
    row.push(Value::Text(id.clone()));
    let now = crate::time::now_ms();
    for a in &sel.attrs {
        let given = changes.attributes.iter().find(|(set, _)| std::ptr::eq(*set, *a)).map(|(_, v)| v.clone());
        row.push(match (a.kind, given) {
            (Kind::Timestamp, _) => timestamp(&json["attributes"][a.name])
                .ok_or_else(|| at(&format!("attributes.{}", a.name), "must be a time like 2026-11-23T06:15:00.000Z"))?
                .map_or(Value::Time(now), Value::Time),
            (_, Some(v)) => v,
            (Kind::Text, None) => Value::Text(String::new()),
            (Kind::Bool, None) => Value::Bool(false),
            (Kind::Integer, None) => Value::Int(0),
            (Kind::NullableText, None) => Value::Null,
        });
    }
    for rel in &sel.to_one {
        let parent = changes.relationships.iter().find(|l| std::ptr::eq(l.rel, *rel)).and_then(|l| l.ids.first());
        if parent.is_none() && !rel.fk.nullable {
            let detail = format!(
                "every {} belongs to one of the {}; `data` must not be null",
                body::singular(rt),
                rel.target().name
            );
            return Err(at(&format!("relationships.{}", rel.name), &detail));
        }
        row.push(Value::text_or_null(parent.map(String::as_str)));
    }
    // The words the check above computed, not computed again.
    let row = crate::store::bulk::with_known_words(rt, row, &changes.words);
    Ok(Line { number, rt, row })
}

/// A timestamp attribute: `Some(None)` when absent (the import's time is used).
fn timestamp(json: &Json) -> Option<Option<i64>> {
    match json {
        Json::Null => Some(None),
        Json::String(s) => crate::time::parse_ms(s).map(Some),
        _ => None,
    }
}

/// `attributes.title` for the pointer `/data/attributes/title`.
fn member(source: &Source) -> String {
    match source {
        Source::Pointer(p) => {
            let p = p.strip_prefix("/data").unwrap_or(p).trim_start_matches('/');
            if p.is_empty() {
                "the resource".into()
            } else {
                p.replace('/', ".")
            }
        }
        Source::Parameter(p) => p.clone(),
        Source::None => "the resource".into(),
    }
}

/// The trailer's counts of resources of each type, and of revisions when it has one.
fn trailer_counts(json: &Json) -> Result<(Counts, Option<u64>), String> {
    let bad = || {
        let example: Vec<String> = TYPES.iter().map(|t| format!("\"{}\":N", t.name)).collect();
        format!("the trailer must be {{\"counts\":{{{}}}}} (and \"revisions\":N with a history)", example.join(","))
    };
    let obj = json.as_object().ok_or_else(bad)?;
    let (mut counts, mut revisions) = (Counts::default(), None);
    for (name, n) in obj {
        let n = n.as_u64().ok_or_else(bad)?;
        if name == "revisions" {
            revisions = Some(n);
            continue;
        }
        let i = TYPES.iter().position(|t: &&ResourceType| t.name == name).ok_or_else(bad)?;
        counts.0[i] = n;
    }
    Ok((counts, revisions))
}
