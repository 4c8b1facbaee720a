//! Bearer tokens: where they come from, who they name, and checking them.
//!
//! Two kinds, both accepted at once:
//! * configured tokens, from `--token`, `--tokens-file` or `COURSED_TOKENS` (named `config`),
//!   or, with none configured, the one the first start generates, keeps in a file beside the
//!   database (mode 0600) or in the PostgreSQL database, and prints once (named `bootstrap`;
//!   none when the database held tokens of its own before its first start).
//!   They have full access and are checked in memory;
//! * tokens made by `coursed token create`, kept hashed in the database with a name, a scope
//!   and maybe an expiry ([`secret`], [`store`]), which every process reads at each request, so
//!   that creating and revoking take effect at once everywhere ([`auth`]).
//!
//! Failed attempts are throttled per client address ([`throttle`]).

pub mod auth;
pub mod command;
pub mod first;
pub mod proxy;
pub mod secret;
pub mod store;
pub mod throttle;

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use warp::http::HeaderValue;

pub use auth::{Auth, Refusal};
pub use first::Kept;
pub use proxy::{Proxies, ProxyHeader};
pub use throttle::Throttle;

/// The name of the caller of a configured token (`--token`, `--tokens-file`, `COURSED_TOKENS`).
pub const CONFIGURED: &str = "config";
/// The name of the caller of the token generated at first start.
pub const BOOTSTRAP: &str = "bootstrap";

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// `GET`, `HEAD` (and `OPTIONS`) of anything; every write is refused (403).
    Read,
    /// Everything the API offers.
    Write,
    /// `write`, and what will need more later.
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    /// Whether the scope allows writes.
    pub fn writes(self) -> bool {
        self >= Scope::Write
    }
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Scope, String> {
        match s {
            "read" => Ok(Scope::Read),
            "write" => Ok(Scope::Write),
            "admin" => Ok(Scope::Admin),
            _ => Err(format!("{s:?} is not a scope; use read, write or admin")),
        }
    }
}

/// Who made a request: the name of its token and what it may do. Put into the extensions of
/// the response to every authenticated request, for what wraps the API (an access log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: Arc<str>,
    pub scope: Scope,
}

/// The configured tokens, all of one name.
#[derive(Clone)]
pub struct Tokens {
    list: Vec<Vec<u8>>,
    name: Arc<str>,
}

impl Tokens {
    /// Tokens from the flags, the file or the variable (named [`CONFIGURED`]).
    pub fn new(tokens: impl IntoIterator<Item = String>) -> Tokens {
        Tokens {
            list: tokens.into_iter().map(|t| t.trim().as_bytes().to_vec()).filter(|t| !t.is_empty()).collect(),
            name: CONFIGURED.into(),
        }
    }

    /// These tokens under another caller name.
    pub fn named(self, name: &str) -> Tokens {
        Tokens { name: name.into(), ..self }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether `Authorization` carries one of the tokens.
    pub fn accepts(&self, authorization: Option<&HeaderValue>) -> bool {
        authorization.and_then(bearer).is_some_and(|t| self.matches(t))
    }

    /// Whether `token` is one of the tokens. Every token is compared in full, in time that
    /// does not depend on where the bytes differ.
    fn matches(&self, token: &[u8]) -> bool {
        self.list.iter().fold(false, |found, t| found | constant_time_eq(t, token))
    }
}

/// The token of an `Authorization: Bearer <token>` header.
fn bearer(value: &HeaderValue) -> Option<&[u8]> {
    let (scheme, token) = value.as_bytes().split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"bearer ").then(|| token.trim_ascii())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    std::hint::black_box(a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y))) == 0
}

/// Reads a tokens file: one token a line, blank lines and `#` comments skipped. A weak token
/// (see [`first::weakness`]) is named in a warning by its line.
pub fn read_file(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read tokens file {}: {e}", path.display()))?;
    let numbered: Vec<(usize, &str)> = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .collect();
    first::warn_weak(numbered.iter().map(|&(i, t)| (format!("the token on line {} of {}", i + 1, path.display()), t)));
    Ok(numbered.into_iter().map(|(_, t)| t.to_owned()).collect())
}

/// A token generated at the first start because none was configured.
pub struct Bootstrap {
    /// The token generated, or those an earlier start's file holds (one a line, and any the
    /// administrator added).
    pub tokens: Vec<String>,
    /// Generated by this start (else read back from where an earlier start kept it).
    pub created: bool,
    /// Where it is kept.
    pub kept: Kept,
}

/// The token a first start generates when none is configured, kept where every later start
/// (and every replica) finds it: in the database when it keeps settings (PostgreSQL), else
/// beside the database file in `<database>.tokens` (mode 0600); an in-memory database keeps
/// none. `database` is the `--database` given.
///
/// None when the database holds tokens of its own (`coursed token create` made them before
/// the first start, as a package's installation does) and no earlier start generated one:
/// there is a way in already, and a generated token would be one more full-access token kept
/// in plain text (and printed to the log). One generated earlier is still read back.
pub async fn bootstrap(db: &crate::store::Db, database: &str) -> Result<Option<Bootstrap>, String> {
    if database != ":memory:" && !generated_before(db, database).await? && holds_tokens(db).await? {
        return Ok(None);
    }
    let candidate = generate();
    let kept = db.keep_setting("bootstrap_token", candidate.clone()).await;
    match kept.map_err(|e| format!("cannot keep the generated token in the database: {e}"))? {
        Some((token, created)) => {
            let url = crate::store::display_name(database);
            return Ok(Some(Bootstrap { tokens: vec![token], created, kept: Kept::Database { url } }));
        }
        None if database == ":memory:" => {
            return Ok(Some(Bootstrap { tokens: vec![candidate], created: true, kept: Kept::Process }))
        }
        None => {}
    }
    let path = bootstrap_path(database);
    // Named in full: the first request shown at start reads it from any folder.
    let kept = Kept::File(std::path::absolute(&path).unwrap_or_else(|_| path.clone()));
    if path.exists() {
        let tokens = read_file(&path)?;
        if tokens.is_empty() {
            return Err(format!("tokens file {} holds no token; add one or remove the file", path.display()));
        }
        return Ok(Some(Bootstrap { tokens, created: false, kept }));
    }
    store_new(&path, &candidate)?;
    Ok(Some(Bootstrap { tokens: vec![candidate], created: true, kept }))
}

/// Whether an earlier start of `database` generated a token (kept in the database on
/// PostgreSQL, beside the file on SQLite).
async fn generated_before(db: &crate::store::Db, database: &str) -> Result<bool, String> {
    if !crate::store::is_postgres_url(database) {
        return Ok(bootstrap_path(database).exists());
    }
    db.read(|tx| {
        let name = crate::store::Value::Text("bootstrap_token".into());
        Ok(tx.exists("SELECT 1 FROM coursed_settings WHERE name = ?", &[name])?)
    })
    .await
    .map_err(|e| format!("cannot read the settings of the database: {e}"))
}

/// Whether the database holds tokens made by `coursed token create` (revoked ones are deleted).
async fn holds_tokens(db: &crate::store::Db) -> Result<bool, String> {
    db.read(|tx| Ok(tx.exists("SELECT 1 FROM coursed_tokens LIMIT 1", &[])?))
        .await
        .map_err(|e| format!("cannot read the tokens of the database: {e}"))
}

/// Where the generated token of `database` is kept: beside it, as `<database>.tokens`.
pub fn bootstrap_path(database: &str) -> PathBuf {
    PathBuf::from(format!("{database}.tokens"))
}

/// A new random token (244 random bits, hex).
pub fn generate() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Writes a newly generated token to `path`, readable by the owner only; fails if it exists.
pub fn store_new(path: &Path, token: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create tokens file {}: {e}", path.display()))?;
    writeln!(f, "# coursed access token, generated on first start; one token a line\n{token}")
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("cannot write tokens file {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_and_order() {
        assert_eq!("read".parse(), Ok(Scope::Read));
        assert_eq!("admin".parse::<Scope>().map(Scope::writes), Ok(true));
        assert!(!Scope::Read.writes() && Scope::Write.writes());
        assert!("Write".parse::<Scope>().unwrap_err().contains("read, write or admin"));
    }

    #[test]
    fn bearer_tokens_are_matched_exactly() {
        let t = Tokens::new(["secret-one".to_owned(), "two".to_owned()]);
        let h = |s: &str| HeaderValue::from_str(s).unwrap();
        assert!(t.accepts(Some(&h("Bearer secret-one"))));
        assert!(t.accepts(Some(&h("bearer two"))));
        assert!(!t.accepts(Some(&h("Bearer secret-on"))));
        assert!(!t.accepts(Some(&h("Basic two"))));
        assert!(!t.accepts(Some(&h("Bearer"))));
        assert!(!t.accepts(None));
    }
}
