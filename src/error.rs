//! The one error type of the API and its JSON:API error document.
//!
//! Every failure a handler can meet becomes an [`Error`]: one HTTP status and one or more
//! [`Problem`]s. Client errors say what to fix; server-side causes (500, 503) are logged and
//! replaced by a generic detail before they reach the client.

use std::fmt::Write as _;

use warp::http::StatusCode;

/// Where in the request a problem was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    None,
    /// A JSON pointer into the request body, e.g. `/data/attributes/title`.
    Pointer(String),
    /// A query parameter, e.g. `page[size]`.
    Parameter(String),
}

/// One entry of the `errors` array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub status: StatusCode,
    /// A short machine-readable code, e.g. `invalid_attribute`.
    pub code: &'static str,
    pub detail: String,
    pub source: Source,
}

impl Problem {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Problem {
        Problem { status, code, detail: detail.into(), source: Source::None }
    }

    pub fn at(mut self, pointer: impl Into<String>) -> Problem {
        self.source = Source::Pointer(pointer.into());
        self
    }

    pub fn param(mut self, name: impl Into<String>) -> Problem {
        self.source = Source::Parameter(name.into());
        self
    }

    /// 422: a well-formed document with an invalid value at `pointer`.
    pub fn invalid(pointer: impl Into<String>, detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_value", detail).at(pointer)
    }

    /// 400: a query parameter the endpoint cannot accept.
    pub fn bad_param(param: impl Into<String>, detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, "invalid_parameter", detail).param(param)
    }

    /// 400: a request document that is not a JSON:API document at all.
    pub fn malformed(pointer: impl Into<String>, detail: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, "malformed_document", detail).at(pointer)
    }
}

/// An error response: a status, the problems, and the headers some statuses need.
#[derive(Debug, Clone)]
pub struct Error {
    pub status: StatusCode,
    pub problems: Vec<Problem>,
    /// The `Allow` header of a 405.
    pub allow: Option<&'static str>,
    /// Problems found beyond the first [`MAX_PROBLEMS`], counted and not kept.
    pub omitted: usize,
}

/// The most problems one error document lists: a request with thousands of faults gets an
/// answer of bounded size, whose `meta` tells how many more there were.
pub const MAX_PROBLEMS: usize = 100;

impl Error {
    /// All problems of one request; the status is theirs when they agree, else 400 (JSON:API).
    pub fn many(mut problems: Vec<Problem>) -> Error {
        let first = problems.first().map_or(StatusCode::BAD_REQUEST, |p| p.status);
        let status = if problems.iter().all(|p| p.status == first) {
            first
        } else if problems.iter().all(|p| p.status.is_client_error()) {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        let omitted = problems.len().saturating_sub(MAX_PROBLEMS);
        problems.truncate(MAX_PROBLEMS);
        Error { status, problems, allow: None, omitted }
    }

    pub fn not_found(detail: impl Into<String>) -> Error {
        Problem::new(StatusCode::NOT_FOUND, "not_found", detail).into()
    }

    /// 404: a path the API does not serve.
    pub fn no_route() -> Error {
        Error::not_found(
            "No such path. The API serves /v1/modules, /v1/subjects and /v1/chapters, their members and relationships.",
        )
    }

    pub fn method_not_allowed(allow: &'static str) -> Error {
        let detail = format!("This endpoint accepts only these methods: {allow}.");
        let mut e: Error = Problem::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", detail).into();
        e.allow = Some(allow);
        e
    }

    pub fn unauthorized() -> Error {
        Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Send a valid token in the header `Authorization: Bearer <token>`.",
        )
        .into()
    }

    /// 403: a write with a token of scope `read`.
    pub fn read_only(name: &str) -> Error {
        Problem::new(
            StatusCode::FORBIDDEN,
            "read_only_token",
            format!(
                "The token {name:?} is read-only (scope read): it may GET and HEAD, not create, change or delete. \
                 Use a token of scope write."
            ),
        )
        .into()
    }

    /// 429: too many failed authentications from this address; retry after the time given.
    pub fn throttled() -> Error {
        Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_failed_authentications",
            "Too many requests from this address carried a token that is not accepted; wait for the seconds that \
             `Retry-After` gives, then send a valid token.",
        )
        .into()
    }

    pub fn forbidden(pointer: impl Into<String>, detail: impl Into<String>) -> Error {
        Problem::new(StatusCode::FORBIDDEN, "forbidden", detail).at(pointer).into()
    }

    pub fn conflict(pointer: impl Into<String>, detail: impl Into<String>) -> Error {
        Problem::new(StatusCode::CONFLICT, "conflict", detail).at(pointer).into()
    }

    /// 503: the database cannot take the request now; the cause is logged, not sent.
    pub fn unavailable(cause: impl std::fmt::Display) -> Error {
        log::warn!("service unavailable: {cause}");
        Error::busy()
    }

    /// 503: the request's database work outlived its time budget and was stopped.
    pub fn timed_out(cause: impl std::fmt::Display) -> Error {
        log::info!("request stopped at its time budget: {cause}");
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timed_out",
            "The request took longer than a request may take and was stopped; nothing was changed. Ask for less \
             (a narrower search or filter, a smaller page), or retry later.",
        )
        .into()
    }

    /// 503: the disk failed to keep a write (a failed sync), and the server writes nothing more
    /// until it is restarted (see `store::sqlite::Failed`). The cause is logged, not sent.
    pub fn storage_failed() -> Error {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_failed",
            "The disk failed to keep a write. To keep what the disk holds sound, this server writes nothing more \
             until it is restarted; it still serves reads. A write answered so may or may not have been kept: read it \
             back after the restart. The cause is in the server log.",
        )
        .into()
    }

    /// 503 without a log line (the caller logs, or retries).
    pub fn busy() -> Error {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "The database cannot accept this request right now; nothing was changed. Retry shortly.",
        )
        .into()
    }

    /// 500: a fault of the server; the cause is logged, never sent.
    pub fn internal(cause: impl std::fmt::Display) -> Error {
        log::error!("internal error: {cause}");
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "The server failed to handle this request; nothing was changed. The cause is in the server log.",
        )
        .into()
    }

    /// The error of a part of a request whose body sits at `pointer` in the whole: every
    /// pointer is prefixed with it, and a client error without one points at the part.
    pub fn within(mut self, pointer: &str) -> Error {
        for p in &mut self.problems {
            match &mut p.source {
                Source::Pointer(ptr) => ptr.insert_str(0, pointer),
                Source::None if p.status.is_client_error() => p.source = Source::Pointer(pointer.to_owned()),
                _ => {}
            }
        }
        self
    }

    /// The JSON:API error document of this error.
    pub fn to_document(&self) -> Vec<u8> {
        let mut out = String::with_capacity(256);
        out.push_str(r#"{"jsonapi":{"version":"1.0"},"errors":["#);
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let title = p.status.canonical_reason().unwrap_or("Error");
            let _ = write!(
                out,
                r#"{{"status":"{}","code":"{}","title":{},"detail":{}"#,
                p.status.as_u16(),
                p.code,
                json_str(title),
                json_str(&p.detail)
            );
            match &p.source {
                Source::None => {}
                Source::Pointer(ptr) => {
                    let _ = write!(out, r#","source":{{"pointer":{}}}"#, json_str(ptr));
                }
                Source::Parameter(name) => {
                    let _ = write!(out, r#","source":{{"parameter":{}}}"#, json_str(name));
                }
            }
            out.push('}');
        }
        out.push(']');
        if self.omitted > 0 {
            let total = self.problems.len() + self.omitted;
            let _ = write!(out, r#","meta":{{"errors":{{"total":{total},"omitted":{}}}}}"#, self.omitted);
        }
        out.push('}');
        out.into_bytes()
    }
}

fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The details of the problems, for messages outside HTTP (commands, start-up).
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let details: Vec<&str> = self.problems.iter().map(|p| p.detail.as_str()).collect();
        f.write_str(&details.join("; "))
    }
}

impl From<Problem> for Error {
    fn from(p: Problem) -> Error {
        Error { status: p.status, problems: vec![p], allow: None, omitted: 0 }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
