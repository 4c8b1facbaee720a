//! coursed: a JSON:API 1.0 Course Content API served by one binary over one SQLite file or
//! a PostgreSQL database (any number of replicas).
//!
//! [`open`] turns the `serve` flags into an [`App`] (database opened and migrated, tokens
//! loaded); [`serve`] runs the API on a listener until a shutdown signal. The binary and the
//! integration tests both go through these two.

pub mod app;
pub mod background;
pub mod backup;
pub mod bundle;
pub mod cli;
pub mod client;
pub mod dataset;
pub mod error;
pub mod follow;
pub mod history;
pub mod http;
pub mod jsonapi;
pub mod memory;
pub mod metrics;
pub mod mock;
pub mod openapi;
pub mod priority;
pub mod private;
pub mod render;
pub mod resources;
pub mod search;
pub mod server;
pub mod store;
pub mod time;
pub mod tokens;
pub mod value;
pub mod webhooks;

use std::sync::Arc;
use std::time::Duration;

pub use app::App;
use cli::ServeArgs;
use render::Base;
pub use server::serve;
use tokens::Tokens;

/// How long in-flight requests may run on after a shutdown signal.
pub const DRAIN: Duration = Duration::from_secs(10);

/// Opens the database and gathers the tokens for `coursed serve`; with none configured, also
/// the token generated (or read back) for this start, to be printed when new.
pub async fn open(args: &ServeArgs) -> Result<(App, Option<tokens::Bootstrap>), String> {
    let path = if args.mock { ":memory:".to_owned() } else { args.database.clone() };
    let mut opts = store::Options::new(&path, args.durability);
    opts.wait = args.database_wait;
    opts.request_timeout = args.request_timeout;
    opts.before_migration = match args.backup_before_migrate {
        cli::Switch::On => store::BeforeMigration::Backup { dir: args.backup_dir.clone() },
        cli::Switch::Off => store::BeforeMigration::Migrate,
    };
    let db = tokio::task::spawn_blocking(move || store::Db::open(&opts)).await.map_err(|e| e.to_string())??;
    if args.mock {
        mock::seed(&db).await?;
    }

    let mut list = args.tokens.clone();
    tokens::first::warn_weak(args.tokens.iter().enumerate().filter(|(_, t)| !t.trim().is_empty()).map(|(i, t)| {
        (format!("the {} token given with --token or COURSED_TOKENS", tokens::first::ordinal(i + 1)), t.as_str())
    }));
    if let Some(file) = &args.tokens_file {
        list.extend(tokens::read_file(file)?);
    }
    let mut accepted = Tokens::new(list);
    let mut bootstrap = None;
    if accepted.is_empty() {
        match tokens::bootstrap(&db, &path).await? {
            Some(b) => {
                accepted = Tokens::new(b.tokens.clone()).named(tokens::BOOTSTRAP);
                bootstrap = Some(b);
            }
            None => log::info!("no token configured: the database's own tokens are accepted (coursed token list)"),
        }
    }

    if args.max_streams >= args.max_connections {
        return Err(format!(
            "--max-streams {} must be below --max-connections {}: streams would take every connection",
            args.max_streams, args.max_connections
        ));
    }
    let public_url = args.public_url.as_deref().map(parse_public_url).transpose()?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(server::tls::Tls::load(cert, key)?),
        _ => None,
    };
    let web = app::Web::new(&args.cors_origins, args.compression == cli::Switch::On, args.console == cli::Switch::On)?;
    if web.console {
        // The console's files are compressed once, before the first browser asks for them.
        tokio::task::spawn_blocking(http::console::Console::get);
    }
    let mut auth = tokens::Auth::new(accepted, tokens::Throttle::new(args.auth_failures, args.auth_window));
    auth.proxies = tokens::Proxies { trusted: args.trusted_proxies.clone(), header: args.proxy_header };
    let app = App {
        public_url,
        body_limit: args.body_limit,
        body_timeout: args.body_timeout,
        request_timeout: args.request_timeout,
        require_if_match: args.require_if_match,
        web: Arc::new(web),
        connections: app::Limits {
            header_timeout: args.header_timeout,
            idle_timeout: args.idle_timeout,
            max_connections: args.max_connections as usize,
        },
        access_log: (args.access_log != cli::AccessLogSwitch::Off && args.log_level >= log::LevelFilter::Info)
            .then(|| app::AccessLog::stderr(args.access_log == cli::AccessLogSwitch::All)),
        auth,
        streams: Arc::new(app::Streams::new(args.max_streams as usize)),
        tls,
        ..App::new(db, Tokens::new([]))
    };
    Ok((app, bootstrap))
}

/// `scheme://host[:port]` (a trailing `/` allowed) as the base of links.
fn parse_public_url(url: &str) -> Result<Base, String> {
    let bad = || format!("--public-url {url:?} must be like https://school.example or http://host:8080 (no path)");
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    Base::new(scheme, rest.trim_end_matches('/')).ok_or_else(bad)
}
