//! Bulk data: load a dataset file, generate a catalogue of any size (demos, load tests), and
//! copy a catalogue between two databases of either engine.
//!
//! Each fills its target in one transaction ([`crate::store::bulk`]): an empty database unless
//! told to replace what it holds, all of it or nothing. They bypass the API's per-request
//! validation, not the schema's constraints.

mod copy;
mod file;
mod rng;

use std::io::{IsTerminal as _, Write as _};
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};

pub use self::copy::{copy, copy_with, Copied};
pub use self::file::load;
pub use self::rng::Rng;
use crate::resources::{CHAPTERS, MODULES, SUBJECTS};
use crate::store::bulk::{Counts, Loader, Target};
use crate::store::{DbError, Value};

/// What `generate` makes.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub modules: u64,
    pub subjects_per_module: u64,
    pub chapters_per_subject: u64,
    pub seed: u64,
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn stamps(at: &Value) -> [(&'static str, Value); 2] {
    [("created_at", at.clone()), ("updated_at", at.clone())]
}

/// Generates a deterministic catalogue (the same `shape` gives the same rows) into the new
/// database `database`. Ids are UUIDv7 one millisecond apart, so id order is creation order.
pub fn generate(database: &str, shape: Shape, ids_dir: Option<&Path>) -> Result<Counts, String> {
    let mut rng = Rng(shape.seed ^ 0x9E37_79B9_7F4A_7C15);
    let start_ms = 1_767_225_600_000i64; // 2026-01-01
    let mut tick = 0i64;
    let mut next_id = |rng: &mut Rng| {
        tick += 1;
        let ms = start_ms + tick;
        let random: [u8; 10] = std::array::from_fn(|_| rng.next() as u8);
        let id = uuid::Builder::from_unix_timestamp_millis(ms as u64, &random).into_uuid().hyphenated().to_string();
        (id, Value::Time(ms))
    };
    let mut modules = Vec::new();
    let mut subjects = Vec::new();
    let counts = crate::store::bulk_into(database, Target::empty().by("generate"), crate::store::COMMAND_WAIT, |tx| {
        let mut w = Loader::new(tx);
        let mut fill = || -> Result<(), DbError> {
            for m in 0..shape.modules {
                let (id, at) = next_id(&mut rng);
                let content = format!("<p>{}</p>", rng.text(1024, 5120));
                let fields = [
                    ("id", text(&id)),
                    ("title", text(&rng.title())),
                    ("introduction", text(&rng.text(200, 500))),
                    ("content", Value::Text(content)),
                    ("external_id", Value::Text(format!("MOD-{:05}", m + 1))),
                ];
                w.insert(&MODULES, &[&fields[..], &stamps(&at)].concat())?;
                for s in 0..shape.subjects_per_module {
                    let (sid, at) = next_id(&mut rng);
                    let content = if rng.below(5) == 0 { String::new() } else { rng.text(1024, 5120) };
                    let fields = [
                        ("id", text(&sid)),
                        ("title", text(&rng.title())),
                        ("introduction", text(&rng.text(200, 500))),
                        ("content", Value::Text(content)),
                        ("external_id", Value::Text(format!("SUBJ-{:07}", m * shape.subjects_per_module + s + 1))),
                        ("available_for_courses", Value::Bool(rng.below(5) != 0)),
                        ("module_id", text(&id)),
                    ];
                    w.insert(&SUBJECTS, &[&fields[..], &stamps(&at)].concat())?;
                    for c in 0..shape.chapters_per_subject {
                        let (cid, at) = next_id(&mut rng);
                        let fields = [
                            ("id", text(&cid)),
                            ("title", Value::Text(format!("{}. {}", c + 1, rng.title()))),
                            ("content", text("")),
                            ("position", Value::Int(c as i64)),
                            ("subject_id", text(&sid)),
                        ];
                        w.insert(&CHAPTERS, &[&fields[..], &stamps(&at)].concat())?;
                    }
                    subjects.push(sid);
                }
                modules.push(id);
            }
            Ok(())
        };
        fill().map_err(|e| format!("generating into {database} failed: {e}"))?;
        w.finish().map_err(|e| format!("generating into {database} failed: {e}"))
    })?;
    if let Some(dir) = ids_dir {
        write_ids(dir, "module_ids.txt", modules.iter().map(String::as_str))?;
        write_ids(dir, "subject_ids.txt", subjects.iter().map(String::as_str))?;
    }
    Ok(counts)
}

fn write_ids<'a>(dir: &Path, name: &str, ids: impl Iterator<Item = &'a str>) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(name);
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&path).map_err(|e| format!("cannot write {}: {e}", path.display()))?,
    );
    for id in ids {
        writeln!(out, "{id}").map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())
}

/// A progress bar on stderr when it is a terminal (hidden otherwise), drawn with `template`.
pub(crate) fn progress_bar(total: u64, template: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}
