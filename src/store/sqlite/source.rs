//! A SQLite file read as a source (`coursed copy --from`, `coursed export`): left as it is. A
//! file of an older schema is not migrated in place (it may be a backup kept for its own sake,
//! or on read-only media): a private copy of it, made with `VACUUM INTO` from a read-only
//! connection, is migrated and read instead, and removed afterwards (a command killed while it
//! copies leaves its folder, `coursed-source-*` in the folder for temporary files).

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

/// A private, migratable copy of a source file, alone in a folder of its own (mode 0700, so
/// that nobody can plant the names SQLite gives its journal files beside it); the folder is
/// removed when it is dropped.
#[derive(Debug)]
pub struct TempCopy {
    pub path: PathBuf,
    dir: PathBuf,
}

impl Drop for TempCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `None` when the file at `path` can be read as it is (the current schema, or not a coursed
/// database at all, which opening then explains); else a copy of it in the system's folder for
/// temporary files (`TMPDIR`), ready to be opened and migrated.
pub fn migratable(path: &str) -> Result<Option<TempCopy>, String> {
    let fail = |e: rusqlite::Error| format!("cannot read {path}: {e}");
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(fail)?;
    let app: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0)).map_err(fail)?;
    if version == 0 || version >= super::open::schema_version() || (app != 0 && app != super::open::APPLICATION_ID) {
        return Ok(None);
    }
    let dir = temp_name();
    // A new folder (never one planted under that name), then the empty file VACUUM INTO fills.
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let copy = TempCopy { path: dir.join("source.db"), dir };
    crate::private::create_new(&copy.path).map_err(|e| format!("cannot create {}: {e}", copy.path.display()))?;
    let target = copy.path.to_str().ok_or("the folder for temporary files has a name that is not UTF-8")?;
    conn.execute("VACUUM INTO ?1", [target]).map_err(|e| format!("cannot copy {path} to {target}: {e}"))?;
    log::info!(
        "{path} has schema version {version}: reading a migrated copy of it, {target}, which is removed afterwards"
    );
    Ok(Some(copy))
}

fn temp_name() -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    Path::new(&std::env::temp_dir()).join(format!("coursed-source-{}-{nanos}", std::process::id()))
}
