//! The dataset file of `coursed load`: flat rows of modules, subjects and chapters, ids kept,
//! checked before anything is written.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use super::{stamps, text, write_ids};
use crate::resources::{CHAPTERS, MODULES, SUBJECTS};
use crate::store::bulk::{Counts, Loader, Target};
use crate::store::{DbError, Value};

/// The dataset file: `{"modules": [...], "subjects": [...], "chapters": [...]}` with the ids kept.
#[derive(Deserialize)]
struct Dataset {
    modules: Vec<ModuleRow>,
    subjects: Vec<SubjectRow>,
    chapters: Vec<ChapterRow>,
}

/// What a module row is, and a subject row begins with.
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

impl ModuleRow {
    /// Its columns (the title trimmed, as the API stores it).
    fn fields(&self) -> [(&'static str, Value); 5] {
        [
            ("id", text(&self.id)),
            ("title", text(self.title.trim())),
            ("introduction", text(&self.introduction)),
            ("content", text(&self.content)),
            ("external_id", Value::text_or_null(self.external_id.as_deref())),
        ]
    }
}

#[derive(Deserialize)]
struct SubjectRow {
    #[serde(flatten)]
    common: ModuleRow,
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
    /// an error naming the first that is not a UUID (the API could never reach such a row), the
    /// first id two rows of one type share, or the first reference to no row of the file.
    fn check_ids(&mut self) -> Result<(), String> {
        self.normalize_ids()?;
        let mut seen = HashMap::new();
        let rows = (self.modules.iter().enumerate().map(|(i, m)| ("modules", i, &m.id)))
            .chain(self.subjects.iter().enumerate().map(|(i, s)| ("subjects", i, &s.common.id)))
            .chain(self.chapters.iter().enumerate().map(|(i, c)| ("chapters", i, &c.id)));
        for (kind, i, id) in rows {
            if let Some(first) = seen.insert((kind, id.as_str()), i) {
                return Err(format!("{kind}[{i}].id is the id of {kind}[{first}] ({id})"));
            }
        }
        for (i, s) in self.subjects.iter().enumerate() {
            if let Some(module) = s.module.as_deref().filter(|m| !seen.contains_key(&("modules", *m))) {
                return Err(format!("subjects[{i}].module is {module:?}, which is no module of the file"));
            }
        }
        for (i, c) in self.chapters.iter().enumerate() {
            if !seen.contains_key(&("subjects", c.subject.as_str())) {
                return Err(format!("chapters[{i}].subject is {:?}, which is no subject of the file", c.subject));
            }
        }
        Ok(())
    }

    fn normalize_ids(&mut self) -> Result<(), String> {
        fn uuid(at: String, id: &mut String) -> Result<(), String> {
            *id = crate::jsonapi::query::normalize_id(id).ok_or_else(|| format!("{at} is {id:?}, not a UUID"))?;
            Ok(())
        }
        for (i, m) in self.modules.iter_mut().enumerate() {
            uuid(format!("modules[{i}].id"), &mut m.id)?;
        }
        for (i, s) in self.subjects.iter_mut().enumerate() {
            uuid(format!("subjects[{i}].id"), &mut s.common.id)?;
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

/// Loads a dataset file into the new database `database`; a chapter without `position` gets
/// its order within its subject in the file.
pub fn load(database: &str, file: &Path, ids_dir: Option<&Path>) -> Result<Counts, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let mut data: Dataset =
        serde_json::from_slice(&bytes).map_err(|e| format!("{} is not a dataset: {e}", file.display()))?;
    data.check_ids().map_err(|e| format!("{} is not a dataset: {e}", file.display()))?;
    let now = Value::Time(crate::time::now_ms());
    let counts = crate::store::bulk_into(database, Target::empty().by("load"), crate::store::COMMAND_WAIT, |tx| {
        let mut w = Loader::new(tx);
        let mut fill = || -> Result<(), DbError> {
            for m in &data.modules {
                w.insert(&MODULES, &[&m.fields()[..], &stamps(&now)].concat())?;
            }
            for s in &data.subjects {
                let own = [
                    ("available_for_courses", Value::Bool(s.available_for_courses)),
                    ("module_id", Value::text_or_null(s.module.as_deref())),
                ];
                w.insert(&SUBJECTS, &[&s.common.fields()[..], &own, &stamps(&now)].concat())?;
            }
            let mut position = HashMap::<&str, i64>::new();
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
        write_ids(dir, "subject_ids.txt", data.subjects.iter().map(|s| s.common.id.as_str()))?;
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(json: &str) -> Dataset {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn ids_are_written_as_the_api_writes_them_and_bad_ones_are_named() {
        let mut d = dataset(
            r#"{"modules": [{"id": "0191A3B4-0000-7000-8000-00000000000A", "title": "M"}],
                "subjects": [{"id": "0191a3b4000070008000000000000001", "title": "S",
                              "module": "0191A3B4-0000-7000-8000-00000000000A"}],
                "chapters": [{"id": "0191a3b4-0000-7000-8000-000000000002", "title": "C",
                              "subject": "0191A3B4-0000-7000-8000-000000000001"}]}"#,
        );
        d.check_ids().unwrap();
        assert_eq!(d.modules[0].id, "0191a3b4-0000-7000-8000-00000000000a");
        assert_eq!(d.subjects[0].common.id, "0191a3b4-0000-7000-8000-000000000001");
        assert_eq!(d.subjects[0].module.as_deref(), Some("0191a3b4-0000-7000-8000-00000000000a"));
        assert_eq!(d.chapters[0].subject, "0191a3b4-0000-7000-8000-000000000001");

        let mut bad = dataset(
            r#"{"modules": [], "subjects": [{"id": "0191a3b4-0000-7000-8000-000000000001", "title": "S"}],
                "chapters": [{"id": "0191a3b4-0000-7000-8000-000000000002", "title": "C", "subject": "s-1"}]}"#,
        );
        assert_eq!(bad.check_ids().unwrap_err(), r#"chapters[0].subject is "s-1", not a UUID"#);

        let twice = r#"{"modules": [], "subjects": [{"id": "0191a3b4-0000-7000-8000-000000000001", "title": "S"},
                        {"id": "0191A3B4-0000-7000-8000-000000000001", "title": "T"}], "chapters": []}"#;
        assert_eq!(
            dataset(twice).check_ids().unwrap_err(),
            "subjects[1].id is the id of subjects[0] (0191a3b4-0000-7000-8000-000000000001)"
        );
        let dangling = r#"{"modules": [], "subjects": [{"id": "0191a3b4-0000-7000-8000-000000000001", "title": "S",
                           "module": "0191a3b4-0000-7000-8000-0000000000ff"}], "chapters": []}"#;
        assert_eq!(
            dataset(dangling).check_ids().unwrap_err(),
            r#"subjects[0].module is "0191a3b4-0000-7000-8000-0000000000ff", which is no module of the file"#
        );
        let orphan = r#"{"modules": [], "subjects": [], "chapters": [{"id": "0191a3b4-0000-7000-8000-000000000002",
                         "title": "C", "subject": "0191a3b4-0000-7000-8000-0000000000ff"}]}"#;
        assert!(dataset(orphan).check_ids().unwrap_err().starts_with("chapters[0].subject is"));
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
