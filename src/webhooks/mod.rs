//! Webhooks: other systems told of every change. A webhook is a reader of the change feed with
//! a cursor of its own, kept in the database (so every server on it knows it): each revision
//! its filter keeps is POSTed to its URL as the revision's JSON:API document, signed as
//! Standard Webhooks does, at least once, in feed order, one at a time across all servers
//! (`deliver.rs`); `coursed webhook ...` manages them (`command.rs`).

pub mod command;
pub mod deliver;
pub mod store;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::hmac;

use crate::resources::{self, TYPES};

/// The actions a revision records, as a filter names them.
pub const ACTIONS: [&str; 4] = ["create", "update", "delete", "restore"];

/// What a webhook keeps of the feed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Type names; empty: every type.
    pub types: Vec<&'static str>,
    /// Actions; empty: every action.
    pub actions: Vec<&'static str>,
}

impl Filter {
    /// The filter of `--types` and `--actions` (comma-separated lists; empty for all).
    pub fn parse(types: &str, actions: &str) -> Result<Filter, String> {
        let mut f = Filter::default();
        for name in types.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let rt = resources::by_name(name).ok_or_else(|| {
                let known: Vec<&str> = TYPES.iter().map(|t| t.name).collect();
                format!("--types: {name:?} is not a type; use {}", known.join(", "))
            })?;
            if !f.types.contains(&rt.name) {
                f.types.push(rt.name);
            }
        }
        for name in actions.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let action = ACTIONS
                .iter()
                .find(|a| **a == name)
                .ok_or_else(|| format!("--actions: {name:?} is not an action; use {}", ACTIONS.join(", ")))?;
            if !f.actions.contains(action) {
                f.actions.push(action);
            }
        }
        Ok(f)
    }

    pub fn types_text(&self) -> String {
        self.types.join(",")
    }

    pub fn actions_text(&self) -> String {
        self.actions.join(",")
    }

    /// Whether a revision of `action` passes (its type is filtered by the feed's read).
    pub fn keeps_action(&self, action: &str) -> bool {
        self.actions.is_empty() || self.actions.contains(&action)
    }

    /// The filter as `webhook list` shows it.
    pub fn describe(&self) -> String {
        let types = if self.types.is_empty() { "every type".to_owned() } else { self.types.join(",") };
        let actions = if self.actions.is_empty() { "every action".to_owned() } else { self.actions.join(",") };
        format!("{types}; {actions}")
    }
}

/// Checks a webhook's URL: `http://` or `https://`, a host, no user name or password (a secret
/// in a URL ends up in logs; the signature says who sends).
pub fn check_url(url: &str) -> Result<(), String> {
    crate::client::Target::parse(url).map(drop).map_err(|e| format!("--url {e}"))
}

/// A new signing secret, as Standard Webhooks writes them: `whsec_` and 32 random bytes in
/// base64.
pub fn mint_secret() -> Result<String, String> {
    let mut key = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
        .map_err(|_| "the system's random source failed".to_owned())?;
    Ok(format!("whsec_{}", BASE64.encode(key)))
}

/// The `webhook-signature` of a message (Standard Webhooks): `v1,` and the base64 HMAC-SHA256,
/// with the secret's key, of `{id}.{timestamp}.{body}`.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, String> {
    Ok(signing_key(secret)?.sign(id, timestamp, body))
}

/// A webhook's secret made ready to sign with, once for many messages.
pub struct SigningKey(hmac::Key);

/// The key of `secret` (`whsec_` and the key in base64).
pub fn signing_key(secret: &str) -> Result<SigningKey, String> {
    let key = BASE64
        .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
        .map_err(|_| "the webhook's secret is not base64 (whsec_...)".to_owned())?;
    Ok(SigningKey(hmac::Key::new(hmac::HMAC_SHA256, &key)))
}

impl SigningKey {
    /// `v1,<base64 of the HMAC-SHA256 of "{id}.{timestamp}.{body}">`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(id.as_bytes());
        ctx.update(b".");
        ctx.update(timestamp.to_string().as_bytes());
        ctx.update(b".");
        ctx.update(body);
        format!("v1,{}", BASE64.encode(ctx.sign().as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_name_known_types_and_actions_once() {
        let f = Filter::parse("subjects, modules,subjects", "create,delete").unwrap();
        assert_eq!(f.types, ["subjects", "modules"]);
        assert_eq!(f.actions, ["create", "delete"]);
        assert!(f.keeps_action("create") && !f.keeps_action("update"));
        assert!(Filter::parse("", "").unwrap().keeps_action("restore"));
        assert!(Filter::parse("lessons", "").unwrap_err().contains("modules, subjects, chapters"));
        assert!(Filter::parse("", "insert").unwrap_err().contains("create, update, delete, restore"));
    }

    #[test]
    fn the_signature_is_standard_webhooks() {
        // The example of the Standard Webhooks specification's reference libraries.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let signed = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).unwrap();
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        let minted = mint_secret().unwrap();
        assert!(minted.starts_with("whsec_") && BASE64.decode(&minted[6..]).unwrap().len() == 32);
    }
}
