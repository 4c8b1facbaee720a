//! Bulk data: load a dataset file, generate a catalogue of any size (demos, load tests), and
//! copy a catalogue between two databases of either engine.
//!
//! Each fills its target in one transaction ([`crate::store::bulk`]): an empty database unless
//! told to replace what it holds, all of it or nothing. They bypass the API's per-request
//! validation, not the schema's constraints.

mod copy;
mod rng;

use std::io::{IsTerminal as _, Write as _};
use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;

pub use self::copy::{copy, copy_with};
use self::rng::Rng;
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

/// The dataset file: `{"modules": [...], "subjects": [...], "chapters": [...]}` with the ids kept.
#[derive(Deserialize)]
struct Dataset {
    modules: Vec<ModuleRow>,
    subjects: Vec<SubjectRow>,
    chapters: Vec<ChapterRow>,
}

#[derive(Deserialize)]
struct ModuleRow {
    id: String,
    title: String,
    #[serde(default)]
    introduction: String,
    #[serde(default)]
    content: String,
    external_id: Option<String>,
}

#[derive(Deserialize)]
struct SubjectRow {
    id: String,
    title: String,
    #[serde(default)]
    introduction: String,
    #[serde(default)]
    content: String,
    external_id: Option<String>,
    #[serde(default)]
    available_for_courses: bool,
    module: Option<String>,
}

#[derive(Deserialize)]
struct ChapterRow {
    id: String,
    title: String,
    #[serde(default)]
    content: String,
    position: Option<i64>,
    subject: String,
}

impl Dataset {
    /// Every id and every reference written as the API writes ids (lower-case, hyphenated), or
    /// an error naming the first that is not a UUID (the API could never reach such a row).
    fn normalize_ids(&mut self) -> Result<(), String> {
        fn uuid(at: String, id: &mut String) -> Result<(), String> {
            *id = crate::jsonapi::query::normalize_id(id).ok_or_else(|| format!("{at} is {id:?}, not a UUID"))?;
            Ok(())
        }
        for (i, m) in self.modules.iter_mut().enumerate() {
            uuid(format!("modules[{i}].id"), &mut m.id)?;
        }
        for (i, s) in self.subjects.iter_mut().enumerate() {
            uuid(format!("subjects[{i}].id"), &mut s.id)?;
            if let Some(module) = &mut s.module {
                uuid(format!("subjects[{i}].module"), module)?;
            }
        }
        for (i, c) in self.chapters.iter_mut().enumerate() {
            uuid(format!("chapters[{i}].id"), &mut c.id)?;
            uuid(format!("chapters[{i}].subject"), &mut c.subject)?;
        }
        Ok(())
    }
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// Loads a dataset file into the new database `database`; a chapter without `position` gets
/// its order within its subject in the file.
pub fn load(database: &str, file: &Path, ids_dir: Option<&Path>) -> Result<Counts, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let mut data: Dataset =
        serde_json::from_slice(&bytes).map_err(|e| format!("{} is not a dataset: {e}", file.display()))?;
    data.normalize_ids().map_err(|e| format!("{} is not a dataset: {e}", file.display()))?;
    let now = Value::Time(crate::time::now_ms());
    let counts = crate::store::bulk_into(database, Target::empty(), crate::store::COMMAND_WAIT, |tx| {
        let mut w = Loader::new(tx);
        let mut fill = || -> Result<(), DbError> {
            for m in &data.modules {
                let fields = [
                    ("id", text(&m.id)),
                    ("title", text(m.title.trim())),
                    ("introduction", text(&m.introduction)),
                    ("content", text(&m.content)),
                    ("external_id", Value::text_or_null(m.external_id.as_deref())),
                ];
                w.insert(&MODULES, &[&fields[..], &stamps(&now)].concat())?;
            }
            for s in &data.subjects {
                let fields = [
                    ("id", text(&s.id)),
                    ("title", text(s.title.trim())),
                    ("introduction", text(&s.introduction)),
                    ("content", text(&s.content)),
                    ("external_id", Value::text_or_null(s.external_id.as_deref())),
                    ("available_for_courses", Value::Bool(s.available_for_courses)),
                    ("module_id", Value::text_or_null(s.module.as_deref())),
                ];
                w.insert(&SUBJECTS, &[&fields[..], &stamps(&now)].concat())?;
            }
            let mut position = std::collections::HashMap::<&str, i64>::new();
            for c in &data.chapters {
                let next = position.entry(&c.subject).or_insert(0);
                let fields = [
                    ("id", text(&c.id)),
                    ("title", text(c.title.trim())),
                    ("content", text(&c.content)),
                    ("position", Value::Int(c.position.unwrap_or(*next))),
                    ("subject_id", text(&c.subject)),
                ];
                w.insert(&CHAPTERS, &[&fields[..], &stamps(&now)].concat())?;
                *next += 1;
            }
            Ok(())
        };
        fill().map_err(|e| format!("loading {} failed: {e}", file.display()))?;
        w.finish().map_err(|e| format!("loading {} failed: {e}", file.display()))
    })?;
    if let Some(dir) = ids_dir {
        write_ids(dir, "module_ids.txt", data.modules.iter().map(|m| m.id.as_str()))?;
        write_ids(dir, "subject_ids.txt", data.subjects.iter().map(|s| s.id.as_str()))?;
    }
    Ok(counts)
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
    let counts = crate::store::bulk_into(database, Target::empty(), crate::store::COMMAND_WAIT, |tx| {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(json: &str) -> Dataset {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn ids_are_written_as_the_api_writes_them_and_anything_else_is_refused() {
        let mut d = dataset(
            r#"{"modules": [{"id": "0191A3B4-0000-7000-8000-00000000000A", "title": "M"}],
                "subjects": [{"id": "0191a3b4000070008000000000000001", "title": "S",
                              "module": "0191A3B4-0000-7000-8000-00000000000A"}],
                "chapters": [{"id": "0191a3b4-0000-7000-8000-000000000002", "title": "C",
                              "subject": "0191A3B4-0000-7000-8000-000000000001"}]}"#,
        );
        d.normalize_ids().unwrap();
        assert_eq!(d.modules[0].id, "0191a3b4-0000-7000-8000-00000000000a");
        assert_eq!(d.subjects[0].id, "0191a3b4-0000-7000-8000-000000000001");
        assert_eq!(d.subjects[0].module.as_deref(), Some("0191a3b4-0000-7000-8000-00000000000a"));
        assert_eq!(d.chapters[0].subject, "0191a3b4-0000-7000-8000-000000000001");

        let mut bad = dataset(
            r#"{"modules": [], "subjects": [{"id": "0191a3b4-0000-7000-8000-000000000001", "title": "S"}],
                "chapters": [{"id": "0191a3b4-0000-7000-8000-000000000002", "title": "C", "subject": "s-1"}]}"#,
        );
        assert_eq!(bad.normalize_ids().unwrap_err(), r#"chapters[0].subject is "s-1", not a UUID"#);
    }

    #[test]
    fn a_dataset_with_an_id_that_is_not_a_uuid_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("d.json");
        std::fs::write(&file, r#"{"modules": [{"id": "not-a-uuid", "title": "M"}], "subjects": [], "chapters": []}"#)
            .unwrap();
        let db = dir.path().join("x.db");
        let err = load(db.to_str().unwrap(), &file, None).unwrap_err();
        assert!(err.ends_with(r#"is not a dataset: modules[0].id is "not-a-uuid", not a UUID"#), "{err}");
        assert!(!db.exists(), "nothing is created for a dataset that is refused");
    }
}
