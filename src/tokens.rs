//! Bearer tokens: where they come from, and checking them.
//!
//! Tokens come from `--token`, `--tokens-file` or `COURSED_TOKENS`. With none configured, the
//! first start generates one, stores it in a file beside the database (mode 0600) and prints it
//! once; later starts read it back.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use warp::http::HeaderValue;

/// The accepted bearer tokens.
#[derive(Clone)]
pub struct Tokens(Vec<Vec<u8>>);

impl Tokens {
    pub fn new(tokens: impl IntoIterator<Item = String>) -> Tokens {
        Tokens(tokens.into_iter().map(|t| t.trim().as_bytes().to_vec()).filter(|t| !t.is_empty()).collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `Authorization` carries one of the tokens. Every token is compared in full, in
    /// time that does not depend on where the bytes differ.
    pub fn accepts(&self, authorization: Option<&HeaderValue>) -> bool {
        let Some(value) = authorization.map(HeaderValue::as_bytes) else { return false };
        let Some((scheme, token)) = value.split_at_checked(7) else { return false };
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return false;
        }
        let token = token.trim_ascii();
        self.0.iter().fold(false, |found, t| found | constant_time_eq(t, token))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    std::hint::black_box(a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y))) == 0
}

/// Reads a tokens file: one token a line, blank lines and `#` comments skipped.
pub fn read_file(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read tokens file {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
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
