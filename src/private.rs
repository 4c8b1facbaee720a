//! Files that hold the catalogue or the tokens' hashes (databases, backups, bundles): created by
//! coursed itself, exclusively (never through a name someone planted, such as a symbolic link
//! to another file), and readable by their owner only.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Creates the new file `path` for writing, mode `0600`; fails if anything (a file, a link)
/// already has that name.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)
}

/// Creates the empty file `path`, mode `0600`, when nothing has that name yet, so that SQLite,
/// which creates a missing database file with the process's default mode, opens ours instead;
/// its journal files take the mode of the database file.
pub fn precreate(path: &Path) -> io::Result<()> {
    match create_new(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates the folder `path` (and any missing parents), mode `0700`, unless it exists: an
/// existing folder keeps the mode its owner gave it.
pub fn create_dir(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    DirBuilder::new().recursive(true).mode(0o700).create(path)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{symlink, PermissionsExt as _};

    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_files_and_folders_are_the_owners_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.db");
        create_new(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        let folder = dir.path().join("backups/nested");
        create_dir(&folder).unwrap();
        assert_eq!((mode(&folder), mode(&dir.path().join("backups"))), (0o700, 0o700));
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o750)).unwrap();
        create_dir(&folder).unwrap();
        assert_eq!(mode(&folder), 0o750, "an existing folder keeps its mode");
    }

    #[test]
    fn a_planted_link_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        let planted = dir.path().join(".out.partial");
        symlink(&victim, &planted).unwrap();
        assert_eq!(create_new(&planted).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        precreate(&planted).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    }
}
