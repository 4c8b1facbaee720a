//! Backups: a consistent snapshot of a database that servers go on using, written as a SQLite
//! file that `coursed serve --database FILE` opens, whichever engine it came from.
//!
//! SQLite is copied with `VACUUM INTO` (one read transaction); PostgreSQL with `coursed copy`'s
//! machinery (one `REPEATABLE READ` snapshot of the source). Either way the copy goes to a
//! temporary name beside the output, is checked (`PRAGMA integrity_check`), flushed to disk and
//! only then renamed: the output name never holds a half-written file.

mod schedule;

use std::path::Path;

pub use self::schedule::{backup_name, is_backup_name, rotate, Schedule};
use crate::store::bulk::Counts;
use crate::store::is_postgres_url;

/// Writes a snapshot of `database` to the SQLite file `output`. An existing `output` is
/// refused unless `force` (then it is replaced in one rename, never truncated first).
pub fn backup(database: &str, output: &Path, force: bool) -> Result<Counts, String> {
    if output.is_dir() {
        return Err(format!("{} is a folder; name the backup file", output.display()));
    }
    // Said before any work, and of the folder: the temporary file beside the output would be
    // the first thing found missing.
    let folder = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        let what = if folder.exists() { "is not a folder" } else { "does not exist" };
        return Err(format!(
            "cannot write {}: the folder {} {what}; create it first or name a file in a folder that exists",
            output.display(),
            folder.display()
        ));
    }
    if !is_postgres_url(database) && same_file(Path::new(database), output) {
        return Err("--output names the database itself; name the backup file".into());
    }
    if output.exists() && !force {
        return Err(format!("{} exists; choose another name or pass --force to replace it", output.display()));
    }
    crate::store::write_sqlite_file(output, |partial| {
        if is_postgres_url(database) {
            let to = partial.to_str().ok_or_else(|| format!("{} is not a UTF-8 path", partial.display()))?;
            crate::dataset::copy_with(database, to, false, true).map(drop)
        } else {
            crate::store::snapshot_sqlite(database, partial)
        }
    })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
