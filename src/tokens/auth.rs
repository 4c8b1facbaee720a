//! Authentication of a request: who calls (a [`Caller`]), or why not.
//!
//! In order: a throttled address is refused unchecked (429); configured tokens are compared in
//! memory (no database access, so `--token` costs what it always did); a token of the form
//! `crsd_<id>_<secret>` is looked up by its id, one indexed read per request, so that a revoked
//! (deleted) or expired row refuses it at once in every process. An unknown id is refused
//! without hashing; a known one has its secret checked against the row's slow hash, paid once
//! per token and process: a verified token is remembered by the SHA-256 of the whole token and
//! the row's hash, so the next request costs one digest. Any refusal counts against the address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use tokio::sync::Semaphore;
use warp::http::HeaderValue;

use super::secret::{self, Presented};
use super::store::{self, Stored};
use super::throttle::Throttle;
use super::{constant_time_eq, Caller, Scope, Tokens};
use crate::error::Error;
use crate::store::Db;

/// How often a token's `last_used_at` is written at most: once a minute.
pub const LAST_USED_GRANULARITY_MS: i64 = 60_000;
/// Slow hashes computed at once; more wait, so that a flood of guesses cannot take every core.
const CONCURRENT_HASHES: usize = 2;
/// Verified tokens remembered at most; past it, the memory starts afresh.
const MAX_REMEMBERED: usize = 10_000;

/// Why a request is refused.
#[derive(Debug)]
pub enum Refusal {
    /// No token, or one not accepted: 401.
    Unauthorized,
    /// Too many failures from this address: 429, with the seconds to wait.
    Throttled(u64),
    /// The database could not be asked (503).
    Failed(Error),
}

pub struct Auth {
    configured: Tokens,
    pub throttle: Throttle,
    /// Proxies whose forwarding header names the client.
    pub proxies: super::Proxies,
    verified: Mutex<HashMap<[u8; 32], Verified>>,
    hashing: Semaphore,
}

/// A token this process has verified.
struct Verified {
    /// The row's hash when it was verified: a row replaced since is verified again.
    hash: String,
    /// When this process last asked for `last_used_at` to be written.
    touched: i64,
}

impl Auth {
    pub fn new(configured: Tokens, throttle: Throttle) -> Auth {
        Auth {
            configured,
            throttle,
            proxies: super::Proxies::default(),
            verified: Mutex::default(),
            hashing: Semaphore::new(CONCURRENT_HASHES),
        }
    }

    /// The configured tokens (from the flags, or generated at first start).
    pub fn configured(&self) -> &Tokens {
        &self.configured
    }

    /// The address failures of a request from `peer` count against.
    pub fn client(&self, peer: IpAddr, headers: &warp::http::HeaderMap) -> IpAddr {
        self.proxies.client(peer, headers)
    }

    /// Who sends `authorization` from `peer`, when that can be told without the database
    /// (a throttled address, no token, a configured token, a token of no known form);
    /// `None` when the database must be asked ([`Auth::database`]).
    pub fn check(&self, authorization: Option<&HeaderValue>, peer: IpAddr) -> Option<Result<Caller, Refusal>> {
        if let Some(wait) = self.throttle.blocked(peer) {
            return Some(Err(Refusal::Throttled(wait)));
        }
        let Some(header) = authorization else { return Some(Err(Refusal::Unauthorized)) };
        let token = super::bearer(header);
        if let Some(caller) = token.and_then(|t| self.configured.caller(t)) {
            return Some(Ok(caller));
        }
        if token.and_then(secret::parse).is_some() {
            return None;
        }
        self.throttle.failed(peer);
        Some(Err(Refusal::Unauthorized))
    }

    /// Who sends `authorization` from `peer`, asking the database for its token; call when
    /// [`Auth::check`] could not tell.
    pub async fn database(
        &self,
        db: &Db,
        authorization: Option<&HeaderValue>,
        peer: IpAddr,
    ) -> Result<Caller, Refusal> {
        let token = authorization.and_then(super::bearer).unwrap_or_default();
        let outcome = self.database_token(db, token).await;
        if matches!(outcome, Err(Refusal::Unauthorized)) {
            self.throttle.failed(peer);
        }
        outcome
    }

    async fn database_token(&self, db: &Db, token: &[u8]) -> Result<Caller, Refusal> {
        let Some(Presented { id, secret }) = secret::parse(token) else { return Err(Refusal::Unauthorized) };
        let key = id.to_owned();
        let row = db.read(move |tx| Ok(store::lookup(tx, &key)?)).await.map_err(Refusal::Failed)?;
        let Some(row) = row else { return Err(Refusal::Unauthorized) };
        let now = crate::time::now_ms();
        if row.expires_at.is_some_and(|at| at <= now) {
            return Err(Refusal::Unauthorized);
        }
        let digest = secret::digest(token);
        if !self.remembered(&digest, &row) {
            let _permit = self.hashing.acquire().await.map_err(|e| Refusal::Failed(Error::internal(e)))?;
            let (secret, salt, hash, iterations) =
                (secret.to_owned(), row.salt.clone(), row.hash.clone(), row.iterations);
            let ok = tokio::task::spawn_blocking(move || secret::verify(&secret, &salt, iterations, &hash))
                .await
                .map_err(|e| Refusal::Failed(Error::internal(e)))?;
            if !ok {
                return Err(Refusal::Unauthorized);
            }
            let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            if verified.len() >= MAX_REMEMBERED {
                verified.clear();
            }
            verified.insert(digest, Verified { hash: row.hash.clone(), touched: 0 });
        }
        self.record_use(db, id, &digest, &row, now);
        Ok(Caller { name: row.name, scope: row.scope })
    }

    /// Whether the token with `digest` was verified against this very row.
    fn remembered(&self, digest: &[u8; 32], row: &Stored) -> bool {
        let verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        verified.get(digest).is_some_and(|v| constant_time_eq(v.hash.as_bytes(), row.hash.as_bytes()))
    }

    /// Writes `last_used_at` in the background when the row's is older than the granularity
    /// and this process has not asked within it.
    fn record_use(&self, db: &Db, id: &str, digest: &[u8; 32], row: &Stored, now: i64) {
        if row.last_used_at.is_some_and(|at| now - at < LAST_USED_GRANULARITY_MS) {
            return;
        }
        {
            let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            match verified.get_mut(digest) {
                Some(v) if now - v.touched >= LAST_USED_GRANULARITY_MS => v.touched = now,
                _ => return,
            }
        }
        let (db, id) = (db.clone(), id.to_owned());
        tokio::spawn(async move {
            let written = db
                .write(&crate::store::WriteContext::system("coursed"), move |tx| {
                    Ok(store::touch(tx, &id, now, LAST_USED_GRANULARITY_MS)?)
                })
                .await;
            if let Err(e) = written {
                log::debug!("cannot record a token's last use: {e}");
            }
        });
    }
}

impl Tokens {
    /// The caller a configured token names, when `token` is one of them.
    fn caller(&self, token: &[u8]) -> Option<Caller> {
        self.matches(token).then(|| Caller { name: self.name.clone(), scope: Scope::Admin })
    }
}
