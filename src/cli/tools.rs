//! The arguments of the commands other than `serve`: tokens, backups, bundles, copies and
//! generated or loaded datasets.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::parse_duration;

#[derive(Debug, Clone, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it once on stdout (only a hash of it is kept).
    Create(TokenCreateArgs),
    /// Show every token: name, scope, creation, expiry and last use (never the token).
    List(TokenListArgs),
    /// Revoke a token: every server refuses it (401) from its next request on.
    Revoke(TokenRevokeArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TokenCreateArgs {
    /// The server's database: a SQLite file, which must exist, or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// A unique name for the token (1 to 64 ASCII letters, digits, '.', '_', '-', '@'); logs name it.
    #[arg(long)]
    pub name: String,
    /// read: GET and HEAD only (writes get 403); write: everything the API offers; admin:
    /// write, and what will need more later.
    #[arg(long, default_value = "write")]
    pub scope: crate::tokens::Scope,
    /// How long the token is valid, e.g. 90d, 12h, 30m (default: until revoked).
    #[arg(long, value_parser = parse_duration)]
    pub expires: Option<std::time::Duration>,
    /// Create the SQLite file when it does not exist yet: a first token made before the
    /// server's first start (as the Debian package's installation does).
    #[arg(long)]
    pub create_database: bool,
}

#[derive(Debug, Clone, Args)]
pub struct TokenListArgs {
    /// The database: a SQLite file or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
}

#[derive(Debug, Clone, Args)]
pub struct TokenRevokeArgs {
    /// The database: a SQLite file or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// The name of the token to revoke.
    pub name: String,
}

#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    /// The database to back up: a SQLite file or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// The backup file to write (SQLite). It is written under a temporary name beside it,
    /// checked, and renamed when complete.
    #[arg(long)]
    pub output: PathBuf,
    /// Replace --output if it exists (otherwise an existing file is refused).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// The database to export: a SQLite file or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// The bundle file to write, or - for stdout.
    #[arg(long)]
    pub output: String,
    /// Replace --output if it exists (otherwise an existing file is refused).
    #[arg(long)]
    pub force: bool,
    /// Carry the history too: every revision kept, after the resources, in the order of the
    /// change feed (a bundle of version 2, which imports into a database without history).
    #[arg(long)]
    pub history: bool,
    /// Write a delta instead: the revisions after this cursor of the change feed (0: all of
    /// them), for a follower to import (`coursed import`); its header names the feed and the
    /// cursors it goes from and to.
    #[arg(long, conflicts_with = "history")]
    pub since: Option<i64>,
}

#[derive(Debug, Clone, Args)]
pub struct FollowArgs {
    /// The database that follows: a SQLite file (created if missing) or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// The coursed followed, e.g. https://district.example.
    #[arg(long, env = "COURSED_FOLLOW", required_unless_present = "forget")]
    pub upstream: Option<String>,
    /// A token of the upstream (scope read is enough).
    #[arg(long, env = "COURSED_FOLLOW_TOKEN", hide_env_values = true, required_unless_present = "forget")]
    pub token: Option<String>,
    /// Stop following: the catalogue becomes the database's own (writes allowed again). To
    /// follow again later, start from an empty database.
    #[arg(long, conflicts_with_all = ["upstream", "token"])]
    pub forget: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The database to fill: a SQLite file (created if missing) or a postgres:// URL. It must
    /// hold no resources unless --merge is given.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// The bundle to read, or - for stdin.
    pub file: String,
    /// Keep what the database holds: insert resources with new ids, update those whose id it
    /// holds, delete nothing.
    #[arg(long)]
    pub merge: bool,
    /// Check the whole bundle and print how many resources of each type would be inserted and
    /// updated; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Leave out the history a bundle carries, importing its catalogue alone (needed to merge
    /// it); the import records one revision per resource it writes, as for any bundle.
    #[arg(long)]
    pub no_history: bool,
    /// Begin to follow the district the bundle was exported from (a bundle written by `coursed
    /// export --history`): the database takes its catalogue and history, and follows its feed
    /// from the export's cursor on (serve --follow, coursed follow, or deltas since it). For a
    /// district whose history was pruned past the start of its feed.
    #[arg(long, conflicts_with_all = ["merge", "no_history"])]
    pub follow: bool,
}

#[derive(Debug, Clone, Args)]
pub struct CopyArgs {
    /// The source: a SQLite file or a postgres:// URL.
    #[arg(long)]
    pub from: String,
    /// The target: a SQLite file (created if missing) or a postgres:// URL; it must hold no
    /// resources unless --replace is given.
    #[arg(long)]
    pub to: String,
    /// Delete what the target holds first (in the same transaction as the copy).
    #[arg(long)]
    pub replace: bool,
}

#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// The database to fill (a SQLite file or a postgres:// URL); it must hold no resources.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// The dataset file (JSON).
    pub file: PathBuf,
    /// Also write module_ids.txt and subject_ids.txt (one id a line) into this folder.
    #[arg(long)]
    pub ids_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    /// The database to fill (a SQLite file or a postgres:// URL); it must hold no resources.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    #[arg(long, default_value_t = 100)]
    pub modules: u64,
    #[arg(long, default_value_t = 100)]
    pub subjects_per_module: u64,
    #[arg(long, default_value_t = 5)]
    pub chapters_per_subject: u64,
    /// The same seed and sizes give the same rows.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also write module_ids.txt and subject_ids.txt (one id a line) into this folder.
    #[arg(long)]
    pub ids_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum HistoryCommand {
    /// Delete the revisions recorded before a date, in batches; each resource keeps its newest
    /// revision, and the change feed then starts after the last revision deleted (a client
    /// behind it is told 410: start again from an export).
    Prune(HistoryPruneArgs),
}

#[derive(Debug, Clone, Args)]
pub struct HistoryPruneArgs {
    /// The database: a SQLite file or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// Prune what was recorded before this date (2026-01-31, midnight UTC) or time
    /// (2026-01-31T12:00:00Z).
    #[arg(long)]
    pub before: String,
}

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Add a webhook: every change from now on that its filter keeps is POSTed to --url, signed
    /// (Standard Webhooks). Prints its id and its signing secret, shown only this once.
    Add(WebhookAddArgs),
    /// Show every webhook: URL, filter, state, cursor, last delivery and its status, failures
    /// in a row, last error (never the secret).
    List(WebhookListArgs),
    /// Remove a webhook: no server delivers it from then on.
    Remove(WebhookIdArgs),
    /// Send a webhook a signed test message now, and say what its receiver answered.
    Test(WebhookIdArgs),
    /// Make a failing webhook active again: its deliveries start again where they stopped.
    Resume(WebhookIdArgs),
}

#[derive(Debug, Clone, Args)]
pub struct WebhookAddArgs {
    /// The server's database: a SQLite file, which must exist, or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// Where to POST: http:// or https:// (checked against the system's certificate authorities).
    #[arg(long)]
    pub url: String,
    /// Only changes of these types, e.g. subjects,modules (default: every type).
    #[arg(long, default_value = "")]
    pub types: String,
    /// Only these actions: create, update, delete, restore (default: every action).
    #[arg(long, default_value = "")]
    pub actions: String,
}

#[derive(Debug, Clone, Args)]
pub struct WebhookListArgs {
    /// The database: a SQLite file or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
}

#[derive(Debug, Clone, Args)]
pub struct WebhookIdArgs {
    /// The database: a SQLite file or a postgres:// URL.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,
    /// The webhook's id (coursed webhook list shows them).
    pub id: String,
}
