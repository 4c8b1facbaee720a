//! Bulk data for demos and load tests: load a dataset file, or generate a catalogue of any size.
//!
//! Both fill a new (empty) database in one pass with the journal off, then switch it to WAL and
//! refresh the planner's statistics. They bypass the API's per-request validation, not the
//! schema's constraints and triggers. An interrupted run leaves an unusable file: delete it.

use std::io::Write as _;
use std::path::Path;

use rusqlite::{params, Connection};
use serde::Deserialize;

use crate::time::timestamp;

/// What `generate` makes.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub modules: u64,
    pub subjects_per_module: u64,
    pub chapters_per_subject: u64,
    pub seed: u64,
}

/// Rows written.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub modules: u64,
    pub subjects: u64,
    pub chapters: u64,
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

/// Loads a dataset file into the new database `path`; a chapter without `position` gets its
/// order within its subject in the file.
pub fn load(path: &str, file: &Path, ids_dir: Option<&Path>) -> Result<Counts, String> {
    let text = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let data: Dataset =
        serde_json::from_slice(&text).map_err(|e| format!("{} is not a dataset: {e}", file.display()))?;
    let now = timestamp(std::time::SystemTime::now());
    let counts = fill(path, |w| {
        for m in &data.modules {
            w.module(&m.id, &m.title, &m.introduction, &m.content, m.external_id.as_deref(), &now)?;
        }
        for s in &data.subjects {
            let (intro, content) = (&s.introduction, &s.content);
            w.subject(
                &s.id,
                &s.title,
                intro,
                content,
                s.external_id.as_deref(),
                s.available_for_courses,
                s.module.as_deref(),
                &now,
            )?;
        }
        let mut position = std::collections::HashMap::<&str, i64>::new();
        for c in &data.chapters {
            let next = position.entry(&c.subject).or_insert(0);
            w.chapter(&c.id, &c.title, &c.content, c.position.unwrap_or(*next), &c.subject, &now)?;
            *next += 1;
        }
        Ok(())
    })?;
    if let Some(dir) = ids_dir {
        write_ids(dir, "module_ids.txt", data.modules.iter().map(|m| m.id.as_str()))?;
        write_ids(dir, "subject_ids.txt", data.subjects.iter().map(|s| s.id.as_str()))?;
    }
    Ok(counts)
}

/// Generates a deterministic catalogue (the same `shape` gives the same rows) into the new
/// database `path`. Ids are UUIDv7 one millisecond apart, so id order is creation order.
pub fn generate(path: &str, shape: Shape, ids_dir: Option<&Path>) -> Result<Counts, String> {
    let mut rng = Rng(shape.seed ^ 0x9E37_79B9_7F4A_7C15);
    let start = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_767_225_600); // 2026-01-01
    let mut tick = 0u64;
    let mut next_id = |rng: &mut Rng| {
        tick += 1;
        let at = start + std::time::Duration::from_millis(tick);
        let ms = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis() as u64;
        let random: [u8; 10] = std::array::from_fn(|_| rng.next() as u8);
        (uuid::Builder::from_unix_timestamp_millis(ms, &random).into_uuid().hyphenated().to_string(), timestamp(at))
    };
    let mut modules = Vec::new();
    let mut subjects = Vec::new();
    let counts = fill(path, |w| {
        for m in 0..shape.modules {
            let (id, at) = next_id(&mut rng);
            let content = format!("<p>{}</p>", rng.text(1024, 5120));
            w.module(&id, &rng.title(), &rng.text(200, 500), &content, Some(&format!("MOD-{:05}", m + 1)), &at)?;
            for s in 0..shape.subjects_per_module {
                let (sid, at) = next_id(&mut rng);
                let content = if rng.below(5) == 0 { String::new() } else { rng.text(1024, 5120) };
                let ext = format!("SUBJ-{:07}", m * shape.subjects_per_module + s + 1);
                let available = rng.below(5) != 0;
                w.subject(&sid, &rng.title(), &rng.text(200, 500), &content, Some(&ext), available, Some(&id), &at)?;
                for c in 0..shape.chapters_per_subject {
                    let (cid, at) = next_id(&mut rng);
                    w.chapter(&cid, &format!("{}. {}", c + 1, rng.title()), "", c as i64, &sid, &at)?;
                }
                subjects.push(sid);
            }
            modules.push(id);
        }
        Ok(())
    })?;
    if let Some(dir) = ids_dir {
        write_ids(dir, "module_ids.txt", modules.iter().map(String::as_str))?;
        write_ids(dir, "subject_ids.txt", subjects.iter().map(String::as_str))?;
    }
    Ok(counts)
}

/// Inserts rows through prepared statements, counting them.
pub struct Writer<'c> {
    conn: &'c Connection,
    counts: Counts,
}

impl Writer<'_> {
    fn module(
        &mut self,
        id: &str,
        title: &str,
        intro: &str,
        content: &str,
        ext: Option<&str>,
        at: &str,
    ) -> rusqlite::Result<()> {
        let sql = "INSERT INTO modules (id, title, introduction, content, external_id, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)";
        self.conn.prepare_cached(sql)?.execute(params![id, title.trim(), intro, content, ext, at])?;
        self.counts.modules += 1;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn subject(
        &mut self,
        id: &str,
        title: &str,
        intro: &str,
        content: &str,
        ext: Option<&str>,
        available: bool,
        module: Option<&str>,
        at: &str,
    ) -> rusqlite::Result<()> {
        let sql = "INSERT INTO subjects (id, title, introduction, content, external_id, available_for_courses, module_id, created_at, updated_at) \
                   VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)";
        self.conn.prepare_cached(sql)?.execute(params![
            id,
            title.trim(),
            intro,
            content,
            ext,
            available,
            module,
            at
        ])?;
        self.counts.subjects += 1;
        Ok(())
    }

    fn chapter(
        &mut self,
        id: &str,
        title: &str,
        content: &str,
        position: i64,
        subject: &str,
        at: &str,
    ) -> rusqlite::Result<()> {
        let sql = "INSERT INTO chapters (id, title, content, position, subject_id, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)";
        self.conn.prepare_cached(sql)?.execute(params![id, title.trim(), content, position, subject, at])?;
        self.counts.chapters += 1;
        Ok(())
    }
}

/// Creates and migrates the database, refuses one that has data, and runs `rows` in one
/// transaction with the journal off.
fn fill(path: &str, rows: impl FnOnce(&mut Writer<'_>) -> rusqlite::Result<()>) -> Result<Counts, String> {
    if path == ":memory:" {
        return Err("load into a database file, not :memory:".into());
    }
    crate::store::create_sqlite(path)?;
    let conn = Connection::open(path).map_err(|e| e.to_string())?;
    let existing: i64 = conn
        .query_row("SELECT sum(n) FROM row_counts WHERE parent = ''", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if existing > 0 {
        return Err(format!("{path} already holds {existing} resources; load into a new database"));
    }
    let sql = |e: rusqlite::Error| format!("loading {path} failed: {e}");
    conn.execute_batch("PRAGMA journal_mode = DELETE; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -262144; PRAGMA foreign_keys = ON;")
        .map_err(sql)?;
    conn.execute_batch("BEGIN").map_err(sql)?;
    let mut w = Writer { conn: &conn, counts: Counts::default() };
    rows(&mut w).map_err(sql)?;
    let counts = w.counts;
    conn.execute_batch("COMMIT; ANALYZE; PRAGMA synchronous = FULL; PRAGMA journal_mode = WAL;").map_err(sql)?;
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

/// splitmix64: small, fast and the same everywhere.
struct Rng(u64);

const WORDS: &[&str] = &[
    "course",
    "module",
    "subject",
    "chapter",
    "lesson",
    "learning",
    "student",
    "teacher",
    "content",
    "overview",
    "practice",
    "exercise",
    "theory",
    "example",
    "analysis",
    "design",
    "system",
    "data",
    "model",
    "history",
    "science",
    "language",
    "culture",
    "biology",
    "physics",
    "geometry",
    "algebra",
    "statistics",
    "network",
    "security",
    "reading",
    "writing",
    "project",
    "assessment",
    "feedback",
    "review",
    "skill",
    "method",
    "problem",
    "solution",
    "the",
    "of",
    "and",
    "to",
    "in",
    "for",
    "with",
    "on",
    "advanced",
    "basic",
    "applied",
    "modern",
    "digital",
    "practical",
    "café",
    "naïve",
    "Zürich",
    "\"quoted\"",
    "A&B",
];

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Words of `lo` to `hi` bytes in all, with a line break now and then.
    fn text(&mut self, lo: usize, hi: usize) -> String {
        let target = lo + self.below((hi - lo + 1) as u64) as usize;
        let mut s = String::with_capacity(target + 16);
        while s.len() < target {
            if !s.is_empty() {
                s.push(if self.below(40) == 0 { '\n' } else { ' ' });
            }
            s.push_str(WORDS[self.below(WORDS.len() as u64) as usize]);
        }
        s
    }
    fn title(&mut self) -> String {
        let mut t = self.text(20, 70).replace('\n', " ");
        if let Some(first) = t.get(..1) {
            t.replace_range(..1, &first.to_uppercase());
        }
        t
    }
}
