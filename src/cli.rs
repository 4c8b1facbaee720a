//! The command line: `coursed serve` and its flags, each with a `COURSED_*` variable.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::store::Durability;

/// coursed: a self-hosted JSON:API 1.0 Course Content API over one SQLite file.
#[derive(Debug, Parser)]
#[command(name = "coursed", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API under http://HOST:PORT/v1 until SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// Load a dataset file ({"modules": [...], "subjects": [...], "chapters": [...]}, ids kept)
    /// into a new database.
    Load(LoadArgs),
    /// Generate a deterministic demo or load-test catalogue of any size into a new database.
    Generate(GenerateArgs),
}

#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// The database to create.
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
    /// The database to create.
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

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "COURSED_HOST", default_value = "127.0.0.1")]
    pub host: String,

    /// Port to listen on; 0 picks a free port (the readiness line tells which).
    #[arg(long, env = "COURSED_PORT", default_value_t = 8080)]
    pub port: u16,

    /// SQLite database file, created if missing; `:memory:` for a throw-away database.
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,

    /// An accepted bearer token; repeat the flag for several. The variable takes a comma-separated list.
    #[arg(long = "token", env = "COURSED_TOKENS", value_delimiter = ',', hide_env_values = true)]
    pub tokens: Vec<String>,

    /// File of accepted tokens: one per line, `#` starts a comment.
    #[arg(long, env = "COURSED_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,

    /// Public origin for the links in responses, e.g. https://school.example (without /v1).
    /// Default: built from each request's Host header.
    #[arg(long, env = "COURSED_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Log level: off, error, warn, info, debug or trace. Logs go to stderr.
    #[arg(long, env = "COURSED_LOG_LEVEL", default_value = "info")]
    pub log_level: log::LevelFilter,

    /// Serve a throw-away in-memory demo catalogue instead of --database (the mock server).
    #[arg(long, env = "COURSED_MOCK")]
    pub mock: bool,

    /// full: a 2xx write survives power loss (fsync per commit group); normal: it survives a
    /// crash of coursed but not of the machine, and commits are faster.
    #[arg(long, env = "COURSED_DURABILITY", value_enum, default_value = "full")]
    pub durability: Durability,

    /// Largest accepted request body in bytes (larger bodies get 413).
    #[arg(long, env = "COURSED_BODY_LIMIT", default_value_t = crate::app::DEFAULT_BODY_LIMIT)]
    pub body_limit: usize,
}
