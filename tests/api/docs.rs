//! The manual's examples run, so that the README and docs/ never drift from what coursed does.
//!
//! Every fenced block tagged `sh` in README.md and in docs/ (every `.md` below it) runs: a
//! page's blocks in page order, as one bash script (`set -euo pipefail`), in a fresh folder,
//! with the `coursed` this test was built with first on `PATH`. Blocks tagged otherwise
//! (`text`, `json`, `sql`, none) are shown, not run. Markers in the page's source:
//!
//! - `<!-- not run: REASON -->` right before a `sh` block: that block is not run (it needs a
//!   machine of its own: systemd, HAProxy, a real district, a release build, ...);
//! - `<!-- blocks not run: REASON -->`: no block of the page runs (a diary of benchmark runs);
//! - `<!-- run with postgres -->`: the page's script gets `COURSED_DATABASE`, the URL of a
//!   fresh database on the suite's throwaway PostgreSQL server (the page's own `export` of it
//!   is marked not run); without PostgreSQL the page is skipped with a note, or fails when
//!   COURSED_REQUIRE_POSTGRES=1.
//!
//! Each page is bounded in time; whatever it started in the background is stopped by the
//! script's exit trap and then, by its process group, by this test, pass or fail.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A page's examples run in well under this; past it the page fails (and everything it
/// started is killed).
const PAGE_LIMIT: Duration = Duration::from_secs(120);

/// What the examples run besides coursed and the shell's own tools.
const TOOLS: [&str; 4] = ["curl", "jq", "openssl", "python3"];

#[derive(Debug, PartialEq)]
struct Block {
    /// The page's line of the block's first line of text (after the fence).
    line: usize,
    text: String,
}

#[derive(Debug, Default)]
struct Page {
    blocks: Vec<Block>,
    /// Why none of its blocks runs.
    not_run: Option<String>,
    postgres: bool,
    /// `sh` blocks marked not run.
    skipped: usize,
}

/// The page's `sh` blocks and markers; an error for a marker without a reason, or one that is
/// not followed by a `sh` block, and for a fence left open.
fn parse(text: &str) -> Result<Page, String> {
    let mut page = Page::default();
    let mut pending: Option<(usize, String)> = None;
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((n, line)) = lines.next() {
        let trimmed = line.trim_start();
        if let Some(marker) = trimmed.strip_prefix("<!--") {
            let marker = marker.trim().trim_end_matches("-->").trim();
            if let Some(reason) = marker.strip_prefix("not run:") {
                if reason.trim().is_empty() {
                    return Err(format!("line {n}: a block not run says why"));
                }
                pending = Some((n, reason.trim().to_owned()));
            } else if let Some(reason) = marker.strip_prefix("blocks not run:") {
                if reason.trim().is_empty() {
                    return Err(format!("line {n}: a page whose blocks are not run says why"));
                }
                page.not_run = Some(reason.trim().to_owned());
            } else if marker == "run with postgres" {
                page.postgres = true;
            }
            continue;
        }
        let Some(info) = trimmed.strip_prefix("```") else {
            if let Some((at, _)) = &pending {
                if !trimmed.is_empty() {
                    return Err(format!("line {at}: `not run` is not followed by a sh block"));
                }
            }
            continue;
        };
        let indent = line.len() - trimmed.len();
        let tag = info.split_whitespace().next().unwrap_or("");
        let mut body = Vec::new();
        let mut closed = false;
        for (_, inner) in lines.by_ref() {
            if inner.trim_start().starts_with("```") {
                closed = true;
                break;
            }
            // Blocks in list items are indented: their text is the lines without that indent.
            let cut = inner.char_indices().take_while(|&(i, c)| i < indent && c == ' ').count();
            body.push(&inner[cut..]);
        }
        if !closed {
            return Err(format!("line {n}: a fenced block is never closed"));
        }
        match (tag, pending.take()) {
            ("sh", Some(_)) => page.skipped += 1,
            ("sh", None) => page.blocks.push(Block { line: n + 1, text: body.join("\n") }),
            (_, Some((at, _))) => return Err(format!("line {at}: `not run` is followed by a {tag:?} block, not sh")),
            _ => {}
        }
    }
    if let Some((at, _)) = pending {
        return Err(format!("line {at}: `not run` is not followed by a sh block"));
    }
    Ok(page)
}

/// README.md and every `.md` under docs/, as paths from the repository's root.
fn pages(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = vec!["README.md".to_owned()];
    walk(&root.join("docs"), root, &mut out);
    out
}

/// The page's blocks as one script: strict, each block announced in the output, a failing
/// command reported with the page's block and line, background jobs killed at exit.
fn script(name: &str, blocks: &[Block]) -> String {
    let mut s = String::from(
        "set -euo pipefail\n\
         trap 'echo \"doc-test: exit status $? near line $((__doc_line + LINENO - __doc_from)) of {PAGE} (the block at line $__doc_line)\" >&2' ERR\n\
         trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n",
    )
    .replace("{PAGE}", name);
    for b in blocks {
        s.push_str(&format!("echo '--- {name}:{}' >&2; __doc_line={}; __doc_from=$((LINENO + 1))\n", b.line, b.line));
        s.push_str(&b.text);
        s.push('\n');
    }
    s
}

struct Outcome {
    name: String,
    ran: usize,
    took: Duration,
    /// Why it failed, with the output's end.
    failure: Option<String>,
    note: Option<String>,
}

fn run_page(root: &Path, name: &str, bin_dir: &Path) -> Outcome {
    let started = Instant::now();
    let text = std::fs::read_to_string(root.join(name)).unwrap();
    let mut outcome = Outcome { name: name.to_owned(), ran: 0, took: Duration::ZERO, failure: None, note: None };
    let page = match parse(&text) {
        Ok(p) => p,
        Err(e) => {
            outcome.failure = Some(format!("{name}: {e}"));
            return outcome;
        }
    };
    if let Some(why) = page.not_run {
        outcome.note = Some(format!("not run: {why}"));
        return outcome;
    }
    if page.blocks.is_empty() {
        return outcome;
    }
    let database = if page.postgres {
        match crate::pg_cluster::server() {
            Some(pg) => Some(pg.fresh_database()),
            None => {
                outcome.note = Some("skipped: no PostgreSQL".into());
                return outcome;
            }
        }
    } else {
        None
    };
    let dir = tempfile::tempdir().unwrap();
    let (work, tmp) = (dir.path().join("work"), dir.path().join("tmp"));
    std::fs::create_dir(&work).unwrap();
    std::fs::create_dir(&tmp).unwrap();
    let script_path = dir.path().join("page.sh");
    std::fs::write(&script_path, script(name, &page.blocks)).unwrap();
    let log_path = dir.path().join("output.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut command = Command::new("bash");
    command
        .arg(&script_path)
        .current_dir(&work)
        .env("PATH", path)
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .process_group(0);
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("COURSED_")) {
        command.env_remove(key);
    }
    if let Some(url) = &database {
        command.env("COURSED_DATABASE", url);
    }
    let mut child = command.spawn().expect("bash");
    let group = child.id() as i32;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > PAGE_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Whatever the page left running (a server it started and did not stop, or every process
    // of a page that timed out) goes with its process group.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
    outcome.ran = page.blocks.len();
    outcome.took = started.elapsed();
    let failed = match status {
        Some(s) if s.success() => None,
        Some(s) => Some(format!("{name} failed ({s})")),
        None => Some(format!("{name} took longer than {PAGE_LIMIT:?}")),
    };
    if let Some(why) = failed {
        let output = std::fs::read_to_string(&log_path).unwrap_or_default();
        let lines: Vec<&str> = output.lines().collect();
        let tail = lines[lines.len().saturating_sub(60)..].join("\n");
        outcome.failure = Some(format!("{why}; the end of its output:\n{tail}"));
    }
    outcome
}

#[test]
fn every_sh_block_of_the_readme_and_docs_runs_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_coursed")).parent().unwrap().to_owned();
    // What the examples use besides coursed: said once here rather than as "command not found"
    // in the middle of a page.
    let missing: Vec<&str> = TOOLS
        .into_iter()
        .filter(|tool| {
            !Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().unwrap().status.success()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the manual's examples need {missing:?} (on Debian: apt-get install curl jq openssl python3)"
    );
    let started = Instant::now();
    let outcomes: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = pages(root)
            .into_iter()
            .map(|name| {
                s.spawn({
                    let bin_dir = &bin_dir;
                    move || run_page(root, &name, bin_dir)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outcomes {
        let note = o.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
        eprintln!("{}: {} blocks in {:.1} s{note}", o.name, o.ran, o.took.as_secs_f64());
    }
    let ran: usize = outcomes.iter().map(|o| o.ran).sum();
    eprintln!("{ran} blocks of {} pages in {:.1} s", outcomes.len(), started.elapsed().as_secs_f64());
    let failures: Vec<&str> = outcomes.iter().filter_map(|o| o.failure.as_deref()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(outcomes.iter().find(|o| o.name == "README.md").is_some_and(|o| o.ran > 0), "the README's tour runs");
}

/// A link from one page to another (or to a file of the repository) leads to it, and a link
/// to a heading (`page.md#heading`, `#heading`) to a heading that page has.
#[test]
fn every_link_between_pages_leads_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    for name in pages(root) {
        let text = std::fs::read_to_string(root.join(&name)).unwrap();
        let dir = Path::new(&name).parent().unwrap_or(Path::new(""));
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').map_or((target.as_str(), None), |(f, a)| (f, Some(a)));
            let file = if file.is_empty() { name.clone() } else { normalize(&dir.join(file)) };
            let path = root.join(&file);
            if !path.exists() {
                broken.push(format!("{name}:{line}: {target}: no file {file}"));
                continue;
            }
            if let (Some(anchor), true) = (anchor, file.ends_with(".md")) {
                let target_text = std::fs::read_to_string(&path).unwrap();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{name}:{line}: {target}: {file} has no heading #{anchor}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "links that lead nowhere:\n{}", broken.join("\n"));
}

/// `a/../b` to `b`: paths from the repository's root.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.to_str().unwrap().split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// The targets of the page's inline links `[text](target)`, outside fenced blocks and code
/// spans, with their line.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans are dropped first: `[x](y)` inside one is text.
        let mut plain = String::new();
        for (j, part) in line.split('`').enumerate() {
            if j % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                out.push((i + 1, rest[..end].to_owned()));
                rest = &rest[end..];
            }
        }
    }
    out
}

/// The anchors a page's headings get, as GitHub makes them: lower case, punctuation dropped
/// but `-` and `_`, spaces as `-`, and `-1`, `-2` after a repeat.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while seen.contains(&unique) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
        seen.insert(unique);
    }
    seen
}

#[test]
fn the_markers_are_read_as_the_module_says() {
    let page = parse(
        "# A page\n<!-- run with postgres -->\n```sh\necho one\n```\n\n<!-- not run: needs systemd -->\n\n```sh\nsystemctl start coursed\n```\n\n- a list item:\n\n  ```sh\n  echo two\n    echo indented\n  ```\n```json\n{}\n```\n",
    )
    .unwrap();
    assert!(page.postgres && page.not_run.is_none());
    assert_eq!(page.skipped, 1);
    assert_eq!(
        page.blocks,
        vec![Block { line: 4, text: "echo one".into() }, Block { line: 16, text: "echo two\n  echo indented".into() }]
    );
    assert!(parse("<!-- not run: x -->\ntext\n```sh\nls\n```\n").unwrap_err().contains("not followed"));
    assert!(parse("<!-- not run: x -->\n```json\n{}\n```\n").unwrap_err().contains("not sh"));
    assert!(parse("<!-- not run: -->\n```sh\nls\n```\n").unwrap_err().contains("says why"));
    assert!(parse("```sh\nls\n").unwrap_err().contains("never closed"));
    assert_eq!(parse("<!-- blocks not run: a diary -->\n").unwrap().not_run.as_deref(), Some("a diary"));
    let slugs =
        anchors("# Backups and restore\n## `coursed copy`, between engines (2026-11-23)\n## Backups and restore\n");
    assert!(slugs.contains("backups-and-restore") && slugs.contains("backups-and-restore-1"));
    assert!(slugs.contains("coursed-copy-between-engines-2026-11-23"), "{slugs:?}");
}
