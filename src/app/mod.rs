//! The state every request sees: the database, the tokens, and how links are built.

use std::sync::Arc;

use warp::http::HeaderMap;

mod log;
mod settings;
pub mod streams;

pub use self::log::AccessLog;
pub use self::settings::{Cors, Limits, Web};
pub use self::streams::Streams;
use crate::error::{Error, Problem};
use crate::render::Base;
use crate::store::Db;
use crate::tokens::{throttle, Auth, Throttle, Tokens};

/// Request bodies larger than this are refused with 413.
pub const DEFAULT_BODY_LIMIT: usize = 2 << 20;
/// Request bodies slower than this are refused with 408.
pub const DEFAULT_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

pub struct App {
    pub db: Db,
    /// Who may call: configured tokens, tokens in the database, throttling of failures.
    pub auth: Auth,
    /// Links are built from this origin when set, else from the request's `Host`.
    pub public_url: Option<Base>,
    pub body_limit: usize,
    /// How long a request's body may take to arrive.
    pub body_timeout: std::time::Duration,
    /// Refuse writes without `If-Match` (428).
    pub require_if_match: bool,
    /// CORS and compression.
    pub web: Arc<Web>,
    /// Slow and idle clients, and how many may be connected.
    pub connections: Limits,
    /// One line per request, when on.
    pub access_log: Option<Arc<AccessLog>>,
    /// How long a request's database work may take, and how long it may wait for a turn.
    pub request_timeout: std::time::Duration,
    /// Permits for the few documents larger than the small budget built at once (see
    /// the web layer's `large.rs`).
    pub large_documents: Arc<tokio::sync::Semaphore>,
    /// The live streams of the change feed.
    pub streams: Arc<Streams>,
    /// What the catalogue follows, if anything (writes are then refused).
    pub follow: Arc<crate::follow::Status>,
    /// HTTPS, when served: the certificate, read again when renewed.
    pub tls: Option<Arc<crate::server::tls::Tls>>,
    /// Whether the database answered the last readiness check, so that only changes are logged.
    pub readiness: Arc<Readiness>,
}

/// The outcome of the latest readiness check: since when the database has not answered, if it
/// has not.
#[derive(Debug, Default)]
pub struct Readiness {
    down_since: std::sync::Mutex<Option<std::time::Instant>>,
}

/// A change of the database's readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadinessChange {
    /// It stopped answering.
    Lost,
    /// It answers again, after this long.
    Back(std::time::Duration),
}

impl Readiness {
    /// Notes whether the database answered a check; says so when that changed.
    pub fn note(&self, answered: bool) -> Option<ReadinessChange> {
        let mut down = self.down_since.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match (answered, *down) {
            (false, None) => {
                *down = Some(std::time::Instant::now());
                Some(ReadinessChange::Lost)
            }
            (true, Some(since)) => {
                *down = None;
                Some(ReadinessChange::Back(since.elapsed()))
            }
            _ => None,
        }
    }
}

/// What a handler may tell the connection it answers on (the server implements it; `http`
/// does not see the server): a response that streams for long is not an idle connection.
pub trait ConnHook: Send + Sync {
    /// A stream's body began: the connection is busy while it lasts (never closed to make
    /// room), and closed only when the client stops taking its bytes.
    fn stream_began(&self);
    fn stream_ended(&self);
    /// `n` more bytes of a streamed body are on their way to the socket.
    fn owe(&self, n: usize);
}

/// How many documents larger than the small budget are built and sent at once: each takes at
/// most `Budget::LARGE` for its rows and as much for its document.
pub const LARGE_DOCUMENTS: usize = 2;

/// How long a request's database work may take, unless `--request-timeout` says otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl App {
    /// An app over `db` accepting `tokens` (and those of the database), with every other
    /// setting at its default.
    pub fn new(db: Db, tokens: Tokens) -> App {
        App {
            db,
            auth: Auth::new(tokens, Throttle::new(throttle::DEFAULT_LIMIT, throttle::DEFAULT_WINDOW)),
            public_url: None,
            body_limit: DEFAULT_BODY_LIMIT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            require_if_match: false,
            web: Arc::new(Web { compression: true, console: true, ..Web::default() }),
            connections: Limits::default(),
            access_log: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            large_documents: Arc::new(tokio::sync::Semaphore::new(LARGE_DOCUMENTS)),
            streams: Arc::new(Streams::new(streams::DEFAULT_MAX_STREAMS)),
            follow: Arc::default(),
            tls: None,
            readiness: Arc::default(),
        }
    }

    /// `https` when served over TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// The absolute `.../v1` prefix of links for this request.
    pub fn base(&self, headers: &HeaderMap) -> Result<Base, Error> {
        if let Some(base) = &self.public_url {
            return Ok(base.clone());
        }
        host(headers)?.and_then(|h| Base::new(self.scheme(), h)).ok_or_else(invalid_host)
    }
}

/// The request's `Host`, if it has one: two `Host` lines, or one that is not a host name or
/// address with an optional port, are refused (RFC 9112 §3.2: with two, a proxy could read the
/// other, and links would name a host it did not ask for).
pub fn host(headers: &HeaderMap) -> Result<Option<&str>, Error> {
    let mut hosts = headers.get_all(warp::http::header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) => Ok(None),
        (Some(h), None) => h.to_str().ok().filter(|h| Base::is_authority(h)).map(Some).ok_or_else(invalid_host),
        (Some(_), Some(_)) => Err(invalid_host()),
    }
}

/// A request without one valid `Host` (400).
pub fn invalid_host() -> Error {
    Problem::new(
        warp::http::StatusCode::BAD_REQUEST,
        "invalid_host",
        "The request needs one valid `Host` header (host name or address, optional port); links are built from it.",
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::{Readiness, ReadinessChange};

    #[test]
    fn only_changes_of_readiness_are_told() {
        let r = Readiness::default();
        assert_eq!(r.note(true), None, "ready from the start");
        assert_eq!(r.note(false), Some(ReadinessChange::Lost));
        assert_eq!(r.note(false), None);
        assert!(matches!(r.note(true), Some(ReadinessChange::Back(_))));
        assert_eq!(r.note(true), None);
    }
}
