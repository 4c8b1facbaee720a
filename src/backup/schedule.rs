//! Scheduled backups while serving: a thread of their own writes `coursed-<UTC time>.db` into
//! a folder at every multiple of the period (counted from 1970-01-01 UTC, so `6h` runs at 00:00,
//! 06:00, 12:00 and 18:00 UTC whenever the server started), keeps the newest `keep` of them,
//! and retries a failed backup after a minute (or at the next period, when that comes first).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::store::display_name;

/// How long a failed backup waits before it is tried again (at most; a shorter period wins).
const RETRY: Duration = Duration::from_secs(60);

/// Where, how often, and how many.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub dir: PathBuf,
    pub every: Duration,
    pub keep: usize,
}

impl Schedule {
    /// Checks the settings and the folder (created if missing) for backups of `database`.
    pub fn check(&self, database: &str) -> Result<(), String> {
        if database == ":memory:" {
            return Err("--backup-dir needs a database file or a postgres:// URL, not :memory:".into());
        }
        if self.every < Duration::from_secs(1) {
            return Err("--backup-every must be at least 1s (backups are named to the second)".into());
        }
        if self.keep == 0 {
            return Err("--backup-keep must be at least 1".into());
        }
        crate::private::create_dir(&self.dir).map_err(|e| format!("cannot create {}: {e}", self.dir.display()))
    }

    /// Starts the backup thread for `database`; it runs as long as the process.
    pub fn start(self, database: String) -> Result<(), String> {
        self.check(&database)?;
        log::info!(
            "backing up {} into {} every {} s, keeping {}",
            display_name(&database),
            self.dir.display(),
            self.every.as_secs(),
            self.keep
        );
        std::thread::Builder::new()
            .name("coursed-backup".into())
            .spawn(move || self.run(&database))
            .map(drop)
            .map_err(|e| format!("cannot start the backup thread: {e}"))
    }

    fn run(&self, database: &str) {
        let every = self.every.as_millis().max(1) as i64;
        let mut next = next_slot(crate::time::now_ms(), every);
        loop {
            let now = crate::time::now_ms();
            if next > now {
                std::thread::sleep(Duration::from_millis((next - now) as u64));
            }
            let path = self.dir.join(backup_name(next));
            let started = std::time::Instant::now();
            match super::backup(database, &path, true) {
                Ok(counts) => {
                    crate::metrics::M.backups_ok.inc();
                    crate::metrics::M.backup_at.set(crate::time::now_ms());
                    log::info!(
                        "backup {} written ({counts}) in {:.1} s",
                        path.display(),
                        started.elapsed().as_secs_f64()
                    );
                    match rotate(&self.dir, self.keep) {
                        Ok(removed) => removed.iter().for_each(|p| log::info!("old backup {} removed", p.display())),
                        Err(e) => log::error!("removing old backups failed: {e}"),
                    }
                    next = next_slot(crate::time::now_ms(), every);
                }
                Err(e) => {
                    crate::metrics::M.backups_failed.inc();
                    let retry = crate::time::now_ms() + RETRY.as_millis() as i64;
                    next = retry.min(next_slot(crate::time::now_ms(), every));
                    log::error!(
                        "backup {} failed: {e}; trying again at {}",
                        path.display(),
                        crate::time::format_ms(next)
                    );
                }
            }
        }
    }
}

/// The first multiple of `every` (milliseconds) after `now`.
fn next_slot(now: i64, every: i64) -> i64 {
    (now.div_euclid(every) + 1) * every
}

/// `coursed-20261123T061500Z.db` for the time `ms` (milliseconds since the epoch).
pub fn backup_name(ms: i64) -> String {
    format!("coursed-{}.db", crate::time::file_stamp(ms))
}

/// Whether `name` is one [`backup_name`] makes (only those are ever removed).
pub fn is_backup_name(name: &str) -> bool {
    let Some(stamp) = name.strip_prefix("coursed-").and_then(|s| s.strip_suffix("Z.db")) else { return false };
    let b = stamp.as_bytes();
    b.len() == 15 && b[8] == b'T' && b.iter().enumerate().all(|(i, c)| i == 8 || c.is_ascii_digit())
}

/// Removes the oldest backups in `dir` beyond the newest `keep`; returns what it removed.
pub fn rotate(dir: &Path, keep: usize) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut names: Vec<String> =
        entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).filter(|n| is_backup_name(n)).collect();
    // The names sort as their times do.
    names.sort_unstable();
    let excess = names.len().saturating_sub(keep);
    let mut removed = Vec::new();
    for name in &names[..excess] {
        let path = dir.join(name);
        std::fs::remove_file(&path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
        removed.push(path);
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_carry_the_utc_time_and_only_they_match() {
        let name = backup_name(1_795_414_500_000);
        assert_eq!(name, "coursed-20261123T061500Z.db");
        assert!(is_backup_name(&name));
        // A backup taken before a migration is kept until its owner removes it.
        let before_migration = crate::store::upgrade::backup_path(Path::new("coursed.db"), 5, None, 1_795_414_500_000);
        let before_migration = before_migration.to_str().unwrap();
        for other in [
            "coursed-20261123T061500Z.db-wal",
            ".coursed-20261123T061500Z.db.partial-1",
            "coursed.db",
            before_migration,
        ] {
            assert!(!is_backup_name(other), "{other}");
        }
        assert_eq!(next_slot(1_000, 6 * 3_600_000), 6 * 3_600_000);
        assert_eq!(next_slot(6 * 3_600_000, 6 * 3_600_000), 12 * 3_600_000);
    }
}
