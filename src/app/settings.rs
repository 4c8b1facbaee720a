//! The settings of a server that its layers read: how the web layer finishes responses (CORS,
//! compression) and how long clients may take. Plain values, checked when they are made; what
//! they do to requests and responses is in the layers above (`http`, `server`).

use std::time::Duration;

/// How responses are finished, from the `serve` flags.
#[derive(Debug, Clone, Default)]
pub struct Web {
    pub cors: Cors,
    /// `--compression off` leaves compression to a proxy in front.
    pub compression: bool,
    /// `--console off` serves the API alone (no editor console at `/` and `/console/`).
    pub console: bool,
}

impl Web {
    pub fn new(cors_origins: &[String], compression: bool, console: bool) -> Result<Web, String> {
        Ok(Web { cors: Cors::new(cors_origins)?, compression, console })
    }
}

/// The origins allowed, from `--cors-origin`.
#[derive(Debug, Clone, Default)]
pub struct Cors {
    any: bool,
    origins: Vec<String>,
}

impl Cors {
    /// Checks and keeps `origins`: each `*` or `scheme://host[:port]` (no path), compared as
    /// browsers send them (scheme and host in lower case).
    pub fn new(origins: &[String]) -> Result<Cors, String> {
        let mut cors = Cors::default();
        for origin in origins.iter().map(|o| o.trim()).filter(|o| !o.is_empty()) {
            if origin == "*" {
                cors.any = true;
                continue;
            }
            let bad = || {
                format!("--cors-origin {origin:?} must be * or like https://app.example or http://localhost:3000 (scheme, host, optional port; no path)")
            };
            let (scheme, host) = origin.split_once("://").ok_or_else(bad)?;
            let host_ok = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b));
            if !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
                || scheme.is_empty()
                || !host_ok
            {
                return Err(bad());
            }
            cors.origins.push(origin.to_ascii_lowercase());
        }
        Ok(cors)
    }

    pub fn enabled(&self) -> bool {
        self.any || !self.origins.is_empty()
    }

    /// Whether a page from `origin` may call the API.
    pub fn admits(&self, origin: &str) -> bool {
        self.any || self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin))
    }
}

/// How long clients may take, and how many may be connected at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A request's head must arrive within this, counted from its first byte (from the
    /// connection's opening for its first request).
    pub header_timeout: Duration,
    /// A connection with no request in flight is closed after this without a new request (or
    /// without progress writing a response the client reads).
    pub idle_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { header_timeout: Duration::from_secs(10), idle_timeout: Duration::from_secs(75), max_connections: 1024 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_checked() {
        assert!(Cors::new(&["https://app.example".into(), "http://localhost:3000".into()]).is_ok());
        assert!(Cors::new(&["*".into()]).unwrap().admits("http://anything.example"));
        for bad in ["app.example", "https://app.example/path", "https://", "ftp ://x"] {
            assert!(Cors::new(&[bad.into()]).is_err(), "{bad}");
        }
        let cors = Cors::new(&["HTTPS://App.Example".into()]).unwrap();
        assert!(cors.admits("https://app.example"));
        assert!(!cors.admits("https://app.example.evil"));
        assert!(!Cors::default().enabled());
    }
}
