//! What is done before a migration of a database that holds data.
//!
//! coursed has no down-migrations, and an older coursed refuses a database of a newer schema:
//! once migrated, a database cannot be taken back by coursed. The way back is a copy taken just
//! before. On SQLite coursed writes one itself (a snapshot of the file as it is, which the older
//! coursed opens) and refuses to migrate without it. On PostgreSQL it cannot (its backups read
//! the catalogue through the newest schema, and write SQLite): it refuses to migrate until told
//! that a backup exists (`pg_dump`, or the server's own). `docs/upgrading.md` says it for
//! operators.

use std::path::{Path, PathBuf};

use super::{DbError, Tx};

/// What opening does before it migrates a database that holds resources or tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeforeMigration {
    /// SQLite: write a backup into this folder, else beside the database, and refuse to migrate
    /// if that fails. PostgreSQL: refuse to migrate.
    Backup { dir: Option<PathBuf> },
    /// Migrate without a backup: the operator has one.
    Migrate,
}

impl Default for BeforeMigration {
    fn default() -> BeforeMigration {
        BeforeMigration::Backup { dir: None }
    }
}

/// The schema version (on both engines) that made the token table.
const TOKENS: i64 = 2;

/// Whether a database at schema `version` holds a resource or a token.
pub fn holds_data(tx: &mut dyn Tx, version: i64) -> Result<bool, DbError> {
    // The counts kept by triggers since the first schema: no scan of a large table.
    if tx.exists("SELECT 1 FROM row_counts WHERE parent = '' AND n > 0", &[])? {
        return Ok(true);
    }
    Ok(version >= TOKENS && tx.exists("SELECT 1 FROM coursed_tokens LIMIT 1", &[])?)
}

/// Where the backup of the SQLite file `database`, at schema `version`, taken at `now_ms` before
/// a migration, is written: `<name>.schema-<version>-<UTC time>.db` in `dir`, else beside it.
/// No scheduled backup has such a name: rotation never removes it.
pub fn backup_path(database: &Path, version: i64, dir: Option<&Path>, now_ms: i64) -> PathBuf {
    let name = database.file_name().map_or_else(|| "coursed.db".into(), |n| n.to_string_lossy().into_owned());
    let name = format!("{name}.schema-{version}-{}.db", crate::time::file_stamp(now_ms));
    match dir {
        Some(dir) => dir.join(name),
        None => database.with_file_name(name),
    }
}

/// Why a PostgreSQL database that holds data is not migrated (see [`BeforeMigration::Backup`]).
pub fn postgres_refusal(version: i64, known: i64) -> String {
    format!(
        "its schema version is {version}; this coursed migrates it to {known}, which cannot be undone (an older \
         coursed refuses a newer schema), and coursed cannot back up an older PostgreSQL schema itself. Take a \
         backup first (pg_dump --format=custom --file=coursed-schema-{version}.dump \"$COURSED_DATABASE\", or your \
         server's own), then \
         start one coursed serve with --backup-before-migrate off (COURSED_BACKUP_BEFORE_MIGRATE=off) to migrate; \
         the other servers need nothing"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_is_named_after_the_database_its_schema_and_the_time() {
        let at = 1_795_414_500_000;
        let beside = backup_path(Path::new("/srv/courses.db"), 5, None, at);
        assert_eq!(beside, Path::new("/srv/courses.db.schema-5-20261123T061500Z.db"));
        let into = backup_path(Path::new("courses.db"), 7, Some(Path::new("/backups")), at);
        assert_eq!(into, Path::new("/backups/courses.db.schema-7-20261123T061500Z.db"));
        assert_eq!(
            backup_path(Path::new("courses.db"), 1, None, at),
            Path::new("courses.db.schema-1-20261123T061500Z.db")
        );
    }
}
