//! Files that hold the catalogue and the tokens' hashes: a new database, a backup, an export and
//! the backup folder are their owner's only, and a link planted at a temporary name is never
//! followed.

use std::os::unix::fs::{symlink, PermissionsExt as _};
use std::path::Path;

use crate::helpers::{on_both, Engine};
use coursed::store::{Db, Durability, Options};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

on_both!(new_databases_backups_and_exports_are_the_owners_only);
async fn new_databases_backups_and_exports_are_the_owners_only() {
    let dir = tempfile::tempdir().unwrap();
    let database = Engine::current().fresh_database(dir.path());
    let db = {
        let database = database.clone();
        blocking(move || Db::open(&Options::new(&database, Durability::Full)).unwrap()).await
    };
    if Engine::current() == Engine::Sqlite {
        for suffix in ["", "-wal", "-shm"] {
            assert_eq!(mode(Path::new(&format!("{database}{suffix}"))), 0o600, "the database{suffix}");
        }
    }
    drop(db);

    let (backup, export) = (dir.path().join("copy.db"), dir.path().join("catalogue.jsonl"));
    let (d, b, e) = (database.clone(), backup.clone(), export.clone());
    blocking(move || {
        coursed::backup::backup(&d, &b, false).unwrap();
        coursed::bundle::export(&d, e.to_str().unwrap(), false, coursed::bundle::Contents::Catalogue).unwrap();
    })
    .await;
    assert_eq!((mode(&backup), mode(&export)), (0o600, 0o600));

    let folder = dir.path().join("backups");
    let schedule =
        coursed::backup::Schedule { dir: folder.clone(), every: std::time::Duration::from_secs(60), keep: 1 };
    schedule.check(&database).unwrap();
    assert_eq!(mode(&folder), 0o700);
}

on_both!(an_export_never_writes_through_a_link_planted_at_its_temporary_name);
async fn an_export_never_writes_through_a_link_planted_at_its_temporary_name() {
    let dir = tempfile::tempdir().unwrap();
    let database = Engine::current().fresh_database(dir.path());
    let d = database.clone();
    blocking(move || drop(Db::open(&Options::new(&d, Durability::Full)).unwrap())).await;
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let output = dir.path().join("out.jsonl");
    // The temporary names are `.NAME.partial-PID` beside the output.
    for name in ["out.jsonl", "out.db"] {
        let planted = dir.path().join(format!(".{name}.partial-{}", std::process::id()));
        symlink(&victim, planted).unwrap();
    }
    let (d, o, b) = (database.clone(), output.clone(), dir.path().join("out.db"));
    blocking(move || {
        coursed::bundle::export(&d, o.to_str().unwrap(), false, coursed::bundle::Contents::Catalogue).unwrap();
        coursed::backup::backup(&d, &b, false).unwrap();
    })
    .await;
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(std::fs::read_to_string(&output).unwrap().starts_with("{\"format\":\"coursed-bundle\""));
}
