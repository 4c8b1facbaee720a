//! coursed: a JSON:API 1.0 Course Content API served by one binary over one SQLite file or
//! a PostgreSQL database (any number of replicas).
//!
//! [`open`] turns the `serve` flags into an [`App`] (database opened and migrated, tokens
//! loaded); [`serve`] runs the API on a listener until a shutdown signal. The binary and the
//! integration tests both go through these two.

pub mod app;
pub mod backup;
pub mod bundle;
pub mod cli;
pub mod dataset;
pub mod error;
pub mod http;
pub mod jsonapi;
pub mod mock;
pub mod openapi;
pub mod resources;
pub mod search;
pub mod store;
pub mod time;
pub mod tokens;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub use app::App;
use cli::ServeArgs;
use jsonapi::Base;
use tokens::Tokens;

/// How long in-flight requests may run on after a shutdown signal.
pub const DRAIN: Duration = Duration::from_secs(10);

/// Opens the database and gathers the tokens for `coursed serve`; with none configured, also
/// the token generated (or read back) for this start, to be printed when new.
pub async fn open(args: &ServeArgs) -> Result<(App, Option<store::Bootstrap>), String> {
    let path = if args.mock { ":memory:".to_owned() } else { args.database.clone() };
    let mut opts = store::Options::new(&path, args.durability);
    opts.wait = args.database_wait;
    let db = tokio::task::spawn_blocking(move || store::Db::open(&opts)).await.map_err(|e| e.to_string())??;
    if args.mock {
        mock::seed(&db).await?;
    }

    let mut list = args.tokens.clone();
    if let Some(file) = &args.tokens_file {
        list.extend(tokens::read_file(file)?);
    }
    let mut accepted = Tokens::new(list);
    let mut bootstrap = None;
    if accepted.is_empty() {
        let b = db.bootstrap_token(&path).await?;
        accepted = Tokens::new(b.tokens.clone());
        bootstrap = Some(b);
    }

    let public_url = args.public_url.as_deref().map(parse_public_url).transpose()?;
    let web = http::Web::new(&args.cors_origins, args.compression == cli::Switch::On)?;
    let app = App {
        public_url,
        body_limit: args.body_limit,
        require_if_match: args.require_if_match,
        web: Arc::new(web),
        ..App::new(db, accepted)
    };
    Ok((app, bootstrap))
}

/// `scheme://host[:port]` (a trailing `/` allowed) as the base of links.
fn parse_public_url(url: &str) -> Result<Base, String> {
    let bad = || format!("--public-url {url:?} must be like https://school.example or http://host:8080 (no path)");
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    Base::new(scheme, rest.trim_end_matches('/')).ok_or_else(bad)
}

/// Serves the API on `listener` until `shutdown` completes, then lets in-flight requests finish
/// (for at most [`DRAIN`]).
///
/// The accept loop is ours rather than `warp::serve`'s so that every connection gets
/// `TCP_NODELAY`: without it the last segment of a large response waits for the client's
/// delayed ACK.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    let routes = http::routes(app);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little instead of spinning.
                    log::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(warp::service(routes.clone()));
        let connection = Builder::new(TokioExecutor::new())
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                log::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    log::info!("shutting down: finishing in-flight requests");
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN) => log::warn!("in-flight requests did not finish within {} s; stopping anyway", DRAIN.as_secs()),
    }
}
