//! Tokens kept in the database: their form, and how their secrets are hashed.
//!
//! A token is `crsd_<id>_<secret>`: `id` (16 hex digits, 64 random bits) is public and finds
//! the row by its primary key; `secret` (64 hex digits, 256 random bits) is never stored. The
//! row keeps a PBKDF2-HMAC-SHA256 hash of the secret with a salt of its own and the iteration
//! count, so that a copy of the table (a stolen backup) gives no token back, and a guess costs
//! the full hash.

use std::num::NonZeroU32;

use ring::rand::{SecureRandom, SystemRandom};

/// What every database token starts with: recognisable in a leaked log or file.
pub const PREFIX: &str = "crsd_";
const ID_BYTES: usize = 8;
const SECRET_BYTES: usize = 32;
const SALT_BYTES: usize = 16;
const HASH_BYTES: usize = 32;
/// PBKDF2 iterations of a new token (kept in its row, so that it can be raised later without
/// invalidating older tokens). About 16 ms of one core per verification in a release build,
/// paid once per token and process (see [`super::auth`]); the secrets are random, so this
/// guards a stolen table rather than weak secrets.
pub const ITERATIONS: u32 = 100_000;

/// A new token: what the user is given once, and what the row keeps.
pub struct Minted {
    pub token: String,
    pub id: String,
    pub salt: String,
    pub hash: String,
    pub iterations: u32,
}

/// A presented token split into its public id and its secret.
#[derive(Debug, PartialEq, Eq)]
pub struct Presented<'a> {
    pub id: &'a str,
    pub secret: &'a str,
}

/// Makes a new random token and the hash its row keeps.
pub fn mint() -> Result<Minted, String> {
    let id = hex(&random::<ID_BYTES>()?);
    let secret = hex(&random::<SECRET_BYTES>()?);
    let salt = random::<SALT_BYTES>()?;
    let hash = derive(&salt, ITERATIONS, &secret);
    Ok(Minted {
        token: format!("{PREFIX}{id}_{secret}"),
        id,
        salt: hex(&salt),
        hash: hex(&hash),
        iterations: ITERATIONS,
    })
}

/// The id and secret of `token` when it has the form of a database token.
pub fn parse(token: &[u8]) -> Option<Presented<'_>> {
    let token = std::str::from_utf8(token).ok()?;
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let is_hex = |s: &str, n: usize| s.len() == n * 2 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    (is_hex(id, ID_BYTES) && is_hex(secret, SECRET_BYTES)).then_some(Presented { id, secret })
}

/// Whether `secret` hashes to `hash` (hex) with `salt` (hex) and `iterations`. Costs the full
/// hash whatever the secret; the comparison takes the same time wherever the bytes differ.
pub fn verify(secret: &str, salt: &str, iterations: i64, hash: &str) -> bool {
    let (Some(salt), Some(hash)) = (unhex(salt), unhex(hash)) else { return false };
    let Some(iterations) = u32::try_from(iterations).ok().and_then(NonZeroU32::new) else { return false };
    ring::pbkdf2::verify(ring::pbkdf2::PBKDF2_HMAC_SHA256, iterations, &salt, secret.as_bytes(), &hash).is_ok()
}

/// SHA-256 of a presented token: how a process remembers one it has verified.
pub fn digest(token: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token);
    let mut out = [0; 32];
    out.copy_from_slice(d.as_ref());
    out
}

fn derive(salt: &[u8], iterations: u32, secret: &str) -> [u8; HASH_BYTES] {
    let mut out = [0; HASH_BYTES];
    let n = NonZeroU32::new(iterations).expect("iterations are not zero");
    ring::pbkdf2::derive(ring::pbkdf2::PBKDF2_HMAC_SHA256, n, salt, secret.as_bytes(), &mut out);
    out
}

fn random<const N: usize>() -> Result<[u8; N], String> {
    let mut out = [0; N];
    SystemRandom::new().fill(&mut out).map_err(|_| "the system's random number generator failed".to_owned())?;
    Ok(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_token_parses_and_verifies_against_its_hash_only() {
        let m = mint().unwrap();
        assert!(m.token.starts_with("crsd_") && m.token.len() == 5 + 16 + 1 + 64, "{}", m.token);
        let p = parse(m.token.as_bytes()).expect("parses");
        assert_eq!(p.id, m.id);
        assert!(!m.hash.contains(p.secret) && !m.salt.contains(p.secret));
        assert!(verify(p.secret, &m.salt, m.iterations.into(), &m.hash));
        let mut wrong = p.secret.to_owned();
        wrong.replace_range(0..1, if wrong.starts_with('0') { "1" } else { "0" });
        assert!(!verify(&wrong, &m.salt, m.iterations.into(), &m.hash));
        assert!(!verify(p.secret, &m.salt, 1, &m.hash), "the iteration count is part of the hash");
        assert!(!verify(p.secret, "zz", m.iterations.into(), &m.hash), "a damaged row verifies nothing");
        assert_ne!(mint().unwrap().token, m.token);
    }

    #[test]
    fn only_the_exact_form_is_a_database_token() {
        let id = "0123456789abcdef";
        let secret = "ab".repeat(32);
        assert_eq!(parse(format!("crsd_{id}_{secret}").as_bytes()), Some(Presented { id, secret: &secret }));
        for bad in [
            format!("crsd_{id}_{secret}0"),
            format!("crsd_{id}0_{secret}"),
            format!("crsd_{}_{secret}", id.to_uppercase()),
            format!("CRSD_{id}_{secret}"),
            format!("crsd_{id}{secret}"),
            format!("crsd__{secret}"),
            "crsd_".to_owned(),
            "s3cret".to_owned(),
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn the_hash_is_pbkdf2_hmac_sha256() {
        // RFC 7914 section 11, second vector (PBKDF2-HMAC-SHA256, "passwd", "salt", c = 1).
        let out = derive(b"salt", 1, "passwd");
        assert_eq!(hex(&out), "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc");
        assert_eq!(unhex(&hex(&out)).unwrap(), out);
    }
}
