//! The command line: `coursed serve` and its flags, each with a `COURSED_*` variable.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::store::Durability;

mod tools;
pub use tools::*;

/// coursed: a self-hosted JSON:API 1.0 Course Content API over one SQLite file or PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "coursed", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once at start: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API under http://HOST:PORT/v1 until SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// Load a dataset file ({"modules": [...], "subjects": [...], "chapters": [...]}, ids kept)
    /// into a new database.
    Load(LoadArgs),
    /// Generate a deterministic demo or load-test catalogue of any size into a new database.
    Generate(GenerateArgs),
    /// Copy every module, subject and chapter (ids and timestamps kept) from one database to
    /// another, SQLite or PostgreSQL, in one transaction on the target.
    Copy(CopyArgs),
    /// Write a consistent snapshot of a database, while servers go on using it, as a SQLite
    /// file that `coursed serve --database FILE` opens (from either engine).
    Backup(BackupArgs),
    /// Write the catalogue as a portable bundle (JSON Lines: a header, then one resource a
    /// line, parents first, then a trailer with the counts), read in one snapshot.
    Export(ExportArgs),
    /// Read a bundle into a database in one transaction: an empty one, or any with --merge.
    /// A bad line (its number and field are reported) leaves the database as it was.
    Import(ImportArgs),
    /// Create, list and revoke the access tokens kept (hashed) in a database. Servers running
    /// on it see every change at their next request.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Keep the history of changes bounded.
    #[command(subcommand)]
    History(HistoryCommand),
    /// Tell other systems of every change: webhooks, kept in the database, delivered by the
    /// servers running on it.
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Bring a database that follows another coursed's catalogue up to date once, and exit
    /// (`serve --follow` keeps it so); or stop following (--forget).
    Follow(FollowArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "COURSED_HOST", default_value = "127.0.0.1")]
    pub host: String,

    /// Port to listen on; 0 picks a free port (the readiness line tells which).
    #[arg(long, env = "COURSED_PORT", default_value_t = 8080)]
    pub port: u16,

    /// The database: a SQLite file (created if missing), `:memory:` for a throw-away database, or
    /// a PostgreSQL URL, postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=disable|prefer|require
    /// (prefer and require encrypt with TLS but, as libpq does, do not verify the certificate).
    #[arg(long, env = "COURSED_DATABASE", default_value = "./coursed.db")]
    pub database: String,

    /// How long to wait at start for a PostgreSQL server that does not answer yet (retrying with
    /// back-off) before giving up with an error, e.g. 30s, 5m.
    #[arg(long, env = "COURSED_DATABASE_WAIT", default_value = "60s", value_parser = parse_duration)]
    pub database_wait: std::time::Duration,

    /// An accepted bearer token; repeat the flag for several. The variable takes a comma-separated list.
    #[arg(long = "token", env = "COURSED_TOKENS", value_delimiter = ',', hide_env_values = true)]
    pub tokens: Vec<String>,

    /// File of accepted tokens: one per line, `#` starts a comment.
    #[arg(long, env = "COURSED_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,

    /// Failed authentications a client address may make in a burst; then it gets 429 with
    /// Retry-After until its allowance refills (0: no throttling).
    #[arg(long, env = "COURSED_AUTH_FAILURES", default_value_t = crate::tokens::throttle::DEFAULT_LIMIT)]
    pub auth_failures: u32,

    /// The time in which an address's allowance of failed authentications refills entirely
    /// (the default 20 per 60s lets one failure again every 3 s).
    #[arg(long, env = "COURSED_AUTH_WINDOW", default_value = "60s", value_parser = parse_duration)]
    pub auth_window: std::time::Duration,

    /// The address of a proxy in front (a load balancer) that names the client in the header
    /// of --proxy-header: failed authentications then count against the address it appended,
    /// not the proxy's. Repeat the flag for several; the variable takes a comma-separated list.
    #[arg(long = "trusted-proxy", env = "COURSED_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<std::net::IpAddr>,

    /// The header the trusted proxies append the client's address to (the other one is the
    /// client's own text and is ignored).
    #[arg(long, env = "COURSED_PROXY_HEADER", value_enum, default_value_t = crate::tokens::ProxyHeader::XForwardedFor)]
    pub proxy_header: crate::tokens::ProxyHeader,

    /// Serve HTTPS with this certificate: a PEM file, the server's certificate first, then the
    /// chain. It and --tls-key are read again on SIGHUP and whenever they change (a renewal).
    #[arg(long, env = "COURSED_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert: a PEM file (PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(long, env = "COURSED_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Serve GET /metrics (Prometheus' text format) on this address, e.g. 127.0.0.1:9464: never
    /// on the API's port, and without a token, so bind it where only the scraper reaches.
    /// Default: no metrics.
    #[arg(long, env = "COURSED_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,

    /// Public origin for the links in responses, e.g. https://school.example (without /v1).
    /// Default: built from each request's Host header.
    #[arg(long, env = "COURSED_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Log level: off, error, warn, info, debug or trace. Logs go to stderr.
    #[arg(long, env = "COURSED_LOG_LEVEL", default_value = "info")]
    pub log_level: log::LevelFilter,

    /// Serve a throw-away in-memory demo catalogue instead of --database (the mock server).
    #[arg(long, env = "COURSED_MOCK", value_parser = clap::builder::BoolishValueParser::new())]
    pub mock: bool,

    /// full: a 2xx write survives power loss (fsync per commit group); normal: it survives a
    /// crash of coursed but not of the machine, and commits are faster.
    #[arg(long, env = "COURSED_DURABILITY", value_enum, default_value = "full")]
    pub durability: Durability,

    /// Largest accepted request body in bytes (larger bodies get 413).
    #[arg(long, env = "COURSED_BODY_LIMIT", default_value_t = crate::app::DEFAULT_BODY_LIMIT)]
    pub body_limit: usize,

    /// An origin whose web pages may call the API (CORS), e.g. https://app.school.example, or *
    /// for any; repeat the flag for several. The variable takes a comma-separated list.
    /// Default: none (browsers refuse cross-origin calls).
    #[arg(long = "cors-origin", env = "COURSED_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,

    /// on: responses over 1 KiB are compressed (brotli or gzip) when the client accepts it;
    /// off: leave compression to a proxy in front.
    #[arg(long, env = "COURSED_COMPRESSION", value_enum, default_value = "on")]
    pub compression: Switch,

    /// on: the editor console, a web page for the people who write the content, at / and
    /// /console/ (its files are in the binary); off: the API alone.
    #[arg(long, env = "COURSED_CONSOLE", value_enum, default_value = "on")]
    pub console: Switch,

    /// Refuse (428) a PATCH or DELETE of a resource, or a write to a relationship, that does
    /// not carry If-Match with the ETag the client read (or *): no edit can overwrite another
    /// unseen.
    #[arg(long, env = "COURSED_REQUIRE_IF_MATCH", value_parser = clap::builder::BoolishValueParser::new())]
    pub require_if_match: bool,

    /// Write scheduled backups into this folder (created if missing): coursed-<UTC time>.db,
    /// each a SQLite file that `coursed serve --database` opens. Default: no scheduled backups.
    #[arg(long, env = "COURSED_BACKUP_DIR")]
    pub backup_dir: Option<PathBuf>,

    /// How often to back up, e.g. 30m, 6h, 1d; backups run at multiples of it counted from
    /// midnight UTC (6h: 00:00, 06:00, 12:00, 18:00 UTC).
    #[arg(long, env = "COURSED_BACKUP_EVERY", default_value = "6h", value_parser = parse_duration)]
    pub backup_every: std::time::Duration,

    /// on: before migrating a database that holds data to a newer schema (which cannot be
    /// undone), a SQLite file is backed up into --backup-dir, else beside it, as
    /// <file>.schema-<version>-<UTC time>.db (the migration is refused if that fails), and a
    /// PostgreSQL database is not migrated (back it up with pg_dump first); off: migrate
    /// without (you hold a backup).
    #[arg(long, env = "COURSED_BACKUP_BEFORE_MIGRATE", value_enum, default_value = "on")]
    pub backup_before_migrate: Switch,

    /// How long the history of changes is kept, e.g. 400d; pruned every hour (each resource
    /// keeps its newest revision). off: kept for ever.
    #[arg(long, env = "COURSED_HISTORY_KEEP", default_value = "off", value_parser = parse_keep)]
    pub history_keep: Keep,

    /// How many scheduled backups to keep in --backup-dir; older ones are removed.
    #[arg(long, env = "COURSED_BACKUP_KEEP", default_value_t = 28)]
    pub backup_keep: usize,

    /// How long a client may take to send a request's head (request line and headers), counted
    /// from its first byte (from the opening of the connection for its first request); the
    /// connection is closed when it is not complete by then.
    #[arg(long, env = "COURSED_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_positive_duration)]
    pub header_timeout: std::time::Duration,

    /// How long a connection may stay open with no request in flight (keep-alive between
    /// requests, or a response the client stopped reading) before it is closed.
    #[arg(long, env = "COURSED_IDLE_TIMEOUT", default_value = "75s", value_parser = parse_positive_duration)]
    pub idle_timeout: std::time::Duration,

    /// How long a client may take to send a request's body; a slower upload is answered 408
    /// and its connection closed.
    #[arg(long, env = "COURSED_BODY_TIMEOUT", default_value = "60s", value_parser = parse_positive_duration)]
    pub body_timeout: std::time::Duration,

    /// How long a request's database work may take (reads on SQLite, every statement on
    /// PostgreSQL), and how long a read may wait for a database connection or a large document
    /// for a turn; past it, a 503 with Retry-After, and nothing changed.
    #[arg(long, env = "COURSED_REQUEST_TIMEOUT", default_value = "10s", value_parser = parse_positive_duration)]
    pub request_timeout: std::time::Duration,

    /// The most connections open at once. At the cap a new connection makes room by closing one
    /// that is not serving a request: first one that made no request in its first 20 ms, else
    /// the one waiting longest for its next request; when all are serving, new connections wait
    /// in the listen backlog.
    #[arg(long, env = "COURSED_MAX_CONNECTIONS", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// How many live streams of the change feed (`GET /v1/revisions/stream`) may be open at
    /// once; each also holds a connection, so it must be below --max-connections. One more is
    /// answered 503 with `Retry-After`.
    #[arg(long, env = "COURSED_MAX_STREAMS", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_streams: u32,

    /// Follow another coursed's catalogue (a district's): its address, e.g.
    /// https://district.example. Its change feed is applied here as it changes (live stream,
    /// else a page a second), and writes to the catalogue here are refused (403). The database
    /// must be empty the first time.
    #[arg(long, env = "COURSED_FOLLOW", requires = "follow_token")]
    pub follow: Option<String>,

    /// A token of the upstream given by --follow (scope read is enough).
    #[arg(long, env = "COURSED_FOLLOW_TOKEN", hide_env_values = true)]
    pub follow_token: Option<String>,

    /// on: one line per request on stderr (at log level info): method, route template, status,
    /// duration, response bytes and the name of the caller's token, except the health checks
    /// (/healthz, /readyz) that load balancers send every few seconds; all: those too; off: none.
    #[arg(long, env = "COURSED_ACCESS_LOG", value_enum, default_value = "on")]
    pub access_log: AccessLogSwitch,
}

/// What the access log records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccessLogSwitch {
    /// Every request but the health checks.
    On,
    /// Every request, the health checks too.
    All,
    /// No access log.
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// A duration of at least 1 ms.
fn parse_positive_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("{s:?}: must be longer than 0"));
    }
    Ok(d)
}

/// A duration such as `500ms`, `30s`, `5m` or `1h` (a bare number is seconds).
/// How long something is kept: for ever, or for a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    Forever,
    For(std::time::Duration),
}

/// `off` or a duration such as `400d`.
pub fn parse_keep(s: &str) -> Result<Keep, String> {
    match s.trim() {
        "off" => Ok(Keep::Forever),
        other => match parse_duration(other)? {
            d if d.is_zero() => Err("--history-keep must be longer than 0 (or off)".into()),
            d => Ok(Keep::For(d)),
        },
    }
}

pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("{s:?} is not a duration like 30s, 5m or 1h"))?;
    let unit_secs = match unit {
        "ms" => return Ok(std::time::Duration::from_millis(n)),
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: the unit must be ms, s, m, h or d")),
    };
    let secs = n.checked_mul(unit_secs).ok_or_else(|| format!("{s:?} is too long a duration"))?;
    Ok(std::time::Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_with_units_and_refuse_overflow() {
        assert_eq!(parse_duration("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("3w").unwrap_err().contains("unit"));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("99999999999999999d").unwrap_err().contains("too long"));
    }
}
