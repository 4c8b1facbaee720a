//! Snapshots of a SQLite file taken while servers go on using it, the check of a file written
//! that way, and how a new file of ours is published: written under a temporary name beside
//! it, checked, flushed and only then renamed, so that its name never holds half a file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::tx::SqliteTx;
use crate::store::bulk::{counts, Counts};
use crate::store::tx::Shared;

/// How long the snapshot waits for a lock (a writer checkpointing, a migration).
const BUSY: Duration = Duration::from_secs(30);

/// Writes the database `path` into the new file `dest` with `VACUUM INTO`: one read
/// transaction, so the copy holds exactly the commits made before it began, and in WAL mode
/// the server's writers go on meanwhile.
pub fn snapshot_into(path: &str, dest: &Path) -> Result<(), String> {
    if path == ":memory:" {
        return Err("a :memory: database lives in its server's process only; there is nothing to back up".into());
    }
    crate::store::require_existing(path, crate::store::DATABASE_FLAG)?;
    // Read-write without create: reading a WAL file may need to set up its shared memory.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| format!("cannot open {path}: {e}"))?;
    conn.busy_timeout(BUSY).map_err(|e| format!("cannot open {path}: {e}"))?;
    // Closing it must never checkpoint the WAL: when it is the last connection (its server
    // stopped meanwhile), what the WAL holds is the server's to copy (or, after a failed sync,
    // to leave as the disk has it).
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
        .map_err(|e| format!("cannot open {path}: {e}"))?;
    let app: i64 =
        conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(|e| format!("cannot read {path}: {e}"))?;
    if app != super::open::APPLICATION_ID {
        return Err(format!("{path} is not a coursed database"));
    }
    let dest_text = dest.to_str().ok_or_else(|| format!("{} is not a UTF-8 path", dest.display()))?;
    conn.execute("VACUUM INTO ?1", [dest_text]).map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
    Ok(())
}

/// Writes a backup of the database file `file`, at schema `version`, into `dir` (else beside it),
/// before a migration to `known`, while the caller holds the write lock: it holds exactly what
/// the migration starts from. Says where in the log.
pub fn before_migration(file: &str, version: i64, known: i64, dir: Option<&Path>) -> Result<(), String> {
    let began = std::time::Instant::now();
    let output = crate::store::upgrade::backup_path(Path::new(file), version, dir, crate::time::now_ms());
    let written = dir
        .map_or(Ok(()), crate::private::create_dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.unwrap_or(Path::new(".")).display()))
        .and_then(|()| write_new(&output, |partial| snapshot_into(file, partial)));
    let counts = written.map_err(|e| {
        format!(
            "it holds schema version {version}, which this coursed migrates to {known}, and a migration cannot be \
             undone, so a backup comes first; writing it to {} failed, and nothing was migrated: {e}. Free some \
             space there, name another folder with --backup-dir, or, holding a backup of your own, start with \
             --backup-before-migrate off",
            output.display()
        )
    })?;
    log::warn!(
        "backed up the database at schema version {version} ({counts}) to {} in {:.1} s before migrating it to \
         version {known}, which cannot be undone: an older coursed opens that backup; remove it when no longer needed",
        output.display(),
        began.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Writes the new SQLite file `output` with `fill`, which is handed the temporary name to fill:
/// then the file is sealed (see [`seal`]), flushed and renamed to `output`. On failure nothing
/// is left under either name.
pub fn write_new(output: &Path, fill: impl FnOnce(&Path) -> Result<(), String>) -> Result<Counts, String> {
    let partial = partial_path(output);
    remove_with_sidecars(&partial);
    // Ours alone, and never a link someone planted at that name.
    crate::private::create_new(&partial).map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let written = fill(&partial).and_then(|()| seal(&partial)).and_then(|counts| {
        publish(&partial, output)?;
        Ok(counts)
    });
    if written.is_err() {
        remove_with_sidecars(&partial);
    }
    written
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
pub fn remove_with_sidecars(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

/// Makes the new file `path` one self-contained file (rollback journal: no `-wal` beside it
/// to lose when it is moved), runs `PRAGMA integrity_check` on it and counts its resources.
pub fn seal(path: &Path) -> Result<Counts, String> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let fail = |e: rusqlite::Error| format!("{} fails its check: {e}", path.display());
    let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0)).map_err(fail)?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(format!("{} stays in journal mode {mode}", path.display()));
    }
    let mut problems = Vec::new();
    let mut check = conn.prepare("PRAGMA integrity_check").map_err(fail)?;
    let rows = check.query_map([], |r| r.get::<_, String>(0)).map_err(fail)?;
    for row in rows {
        problems.push(row.map_err(fail)?);
    }
    if problems != ["ok"] {
        return Err(format!("{} fails its integrity check: {}", path.display(), problems.join("; ")));
    }
    let shared = Shared::default();
    let counted = counts(&mut SqliteTx { conn: &conn, shared: &shared });
    counted.map_err(|e| format!("cannot count the resources of {}: {e}", path.display()))
}
