//! Backups: a consistent snapshot of a database that servers go on using, written as a SQLite
//! file that `coursed serve --database FILE` opens, whichever engine it came from.
//!
//! SQLite is copied with `VACUUM INTO` (one read transaction); PostgreSQL with `coursed copy`'s
//! machinery (one `REPEATABLE READ` snapshot of the source). Either way the copy goes to a
//! temporary name beside the output, is checked (`PRAGMA integrity_check`), flushed to disk and
//! only then renamed: the output name never holds a half-written file.

mod schedule;

use std::path::{Path, PathBuf};

pub use self::schedule::{backup_name, is_backup_name, rotate, Schedule};
use crate::store::bulk::Counts;
use crate::store::is_postgres_url;

/// Writes a snapshot of `database` to the SQLite file `output`. An existing `output` is
/// refused unless `force` (then it is replaced in one rename, never truncated first).
pub fn backup(database: &str, output: &Path, force: bool) -> Result<Counts, String> {
    if output.is_dir() {
        return Err(format!("{} is a folder; name the backup file", output.display()));
    }
    if !is_postgres_url(database) && same_file(Path::new(database), output) {
        return Err("--output names the database itself; name the backup file".into());
    }
    if output.exists() && !force {
        return Err(format!("{} exists; choose another name or pass --force to replace it", output.display()));
    }
    let partial = partial_path(output);
    remove_with_sidecars(&partial);
    // Ours alone, and never a link someone planted at that name.
    crate::private::create_new(&partial).map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let written = write_checked(database, &partial).and_then(|counts| {
        publish(&partial, output)?;
        Ok(counts)
    });
    if written.is_err() {
        remove_with_sidecars(&partial);
    }
    written
}

fn write_checked(database: &str, partial: &Path) -> Result<Counts, String> {
    if is_postgres_url(database) {
        let to = partial.to_str().ok_or_else(|| format!("{} is not a UTF-8 path", partial.display()))?;
        crate::dataset::copy_with(database, to, false, true)?;
    } else {
        crate::store::snapshot_sqlite(database, partial)?;
    }
    crate::store::seal_sqlite(partial)
}

/// Flushes `partial` to disk, renames it to `output` and flushes the folder (the rename).
fn publish(partial: &Path, output: &Path) -> Result<(), String> {
    let sync = |p: &Path| std::fs::File::open(p).and_then(|f| f.sync_all());
    sync(partial).map_err(|e| format!("cannot flush {}: {e}", partial.display()))?;
    std::fs::rename(partial, output)
        .map_err(|e| format!("cannot rename {} to {}: {e}", partial.display(), output.display()))?;
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    sync(dir).map_err(|e| format!("cannot flush the folder {}: {e}", dir.display()))
}

/// The temporary name beside `output`: hidden, and unique to this process (two servers on one
/// PostgreSQL database may back up into one folder at the same moment).
fn partial_path(output: &Path) -> PathBuf {
    let name = output.file_name().map_or_else(|| "backup".into(), |n| n.to_string_lossy().into_owned());
    output.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

/// Removes the SQLite file `path` and whatever journal files it has beside it.
pub(crate) fn remove_with_sidecars(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
