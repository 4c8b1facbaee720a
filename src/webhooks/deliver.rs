//! Delivering webhooks, in every server: each looks for webhooks that are due a few times a
//! second, takes a webhook's lease in the database (one server delivers it at a time), and
//! delivers its revisions one by one in feed order in a task of its own: a 2xx moves its cursor
//! on in the same statement that renews the lease; anything else (no answer within the limit
//! included) is tried again after a backoff that doubles from 1 s to 1 h, and after 24 h of
//! failures the webhook is marked failing until `coursed webhook resume`. A delivery never holds
//! a transaction open while it waits for a receiver, so a slow or dead receiver slows no write
//! and no other webhook.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::json;

use super::client::{self, Target};
use super::store::{self, Outcome, Webhook};
use super::{sign, Filter};
use crate::render::Base;
use crate::resources;
use crate::store::history::{self, revision_id, Revision};
use crate::store::{Db, WriteContext};

/// How deliveries are paced; the defaults are what the README says.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long a receiver may take to answer.
    pub timeout: Duration,
    /// The wait after a first failure; it doubles with each one after, up to `longest_wait`.
    pub first_wait: Duration,
    pub longest_wait: Duration,
    /// After failing for this long, a webhook is marked failing (and no longer tried).
    pub give_up_after: Duration,
    /// How often a server looks for webhooks that are due.
    pub every: Duration,
    /// How long a lease holds without being renewed (longer than any one delivery).
    pub lease: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            timeout: Duration::from_secs(10),
            first_wait: Duration::from_secs(1),
            longest_wait: Duration::from_secs(3600),
            give_up_after: Duration::from_secs(24 * 3600),
            every: Duration::from_millis(200),
            lease: Duration::from_secs(60),
        }
    }
}

impl Settings {
    /// The wait after the `failures`-th failure in a row (1 s, 2 s, 4 s, ... 1 h).
    pub fn backoff(&self, failures: i64) -> Duration {
        let doublings = u32::try_from(failures.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
        self.first_wait.saturating_mul(1u32 << doublings).min(self.longest_wait)
    }
}

/// Revisions read from the feed at a time, looking for the next one a webhook keeps.
const PAGE: usize = 100;

/// Starts delivering the webhooks of `db` for as long as the runtime runs; `base` is the origin
/// of the links in what is sent (`--public-url`, or the address the server listens on).
pub fn spawn(db: Db, base: Base, settings: Settings) -> tokio::task::JoinHandle<()> {
    let owner = uuid::Uuid::new_v4().to_string();
    let busy: Arc<Mutex<HashSet<String>>> = Arc::default();
    let settings = Arc::new(settings);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(settings.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = crate::time::now_ms();
            let mine = owner.clone();
            let due = match db.read(move |tx| Ok(store::due(tx, now, &mine)?)).await {
                Ok(due) => due,
                Err(e) => {
                    log::warn!("webhooks: cannot read which are due: {e}");
                    continue;
                }
            };
            for w in due {
                if !lock(&busy).insert(w.id.clone()) {
                    continue;
                }
                let delivery = Delivery {
                    db: db.clone(),
                    base: base.clone(),
                    settings: settings.clone(),
                    owner: owner.clone(),
                    webhook: w,
                };
                let busy = busy.clone();
                tokio::spawn(async move {
                    let id = delivery.webhook.id.clone();
                    delivery.run().await;
                    lock(&busy).remove(&id);
                });
            }
        }
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One webhook's deliveries while this server holds its lease.
struct Delivery {
    db: Db,
    base: Base,
    settings: Arc<Settings>,
    owner: String,
    webhook: Webhook,
}

/// The next thing a webhook has to do.
enum Next {
    /// Nothing new in the feed.
    Nothing,
    /// Revisions its filter leaves out, up to this place.
    Skip(i64),
    /// A revision to send, at this place.
    Send(i64, Revision),
}

impl Delivery {
    async fn run(mut self) {
        let ctx = WriteContext::system("webhooks");
        let (id, owner) = (self.webhook.id.clone(), self.owner.clone());
        let now = crate::time::now_ms();
        let until = now + self.settings.lease.as_millis() as i64;
        let taken = self.db.write(&ctx, move |tx| Ok(store::lease(tx, &id, &owner, now, until)?)).await;
        if !matches!(taken, Ok(true)) {
            return;
        }
        let target = match Target::parse(&self.webhook.url) {
            Ok(t) => t,
            Err(e) => {
                self.finish(&ctx, Outcome::Failed { status: None, error: e, next_at: 0, failing_after: 0 }).await;
                return;
            }
        };
        let filter = Filter::parse(&self.webhook.types, &self.webhook.actions).unwrap_or_default();
        loop {
            let next = match self.next(&filter).await {
                Ok(next) => next,
                Err(e) => {
                    log::warn!("webhook {}: cannot read the change feed: {e}", self.webhook.id);
                    self.release(&ctx).await;
                    return;
                }
            };
            let outcome = match next {
                Next::Nothing => {
                    self.release(&ctx).await;
                    return;
                }
                Next::Skip(cursor) => Outcome::Skipped { cursor },
                Next::Send(cursor, revision) => self.send(&target, cursor, &revision).await,
            };
            let failed = matches!(outcome, Outcome::Failed { .. });
            let cursor = match &outcome {
                Outcome::Delivered { cursor, .. } | Outcome::Skipped { cursor } => Some(*cursor),
                Outcome::Failed { .. } => None,
            };
            if !self.finish(&ctx, outcome).await || failed {
                return;
            }
            if let Some(cursor) = cursor {
                self.webhook.cursor = cursor;
            }
        }
    }

    /// The next revision after the webhook's cursor that its filter keeps.
    async fn next(&self, filter: &Filter) -> crate::error::Result<Next> {
        let after = self.webhook.cursor;
        let types: Vec<&'static resources::ResourceType> =
            filter.types.iter().filter_map(|name| resources::by_name(name)).collect();
        let filter = filter.clone();
        self.db
            .read(move |tx| {
                let page = history::feed(tx, after, PAGE, &types)?;
                if page.pruned {
                    // What came after the cursor was pruned before it was delivered: the webhook
                    // goes on from the oldest revision kept.
                    return Ok(Next::Skip(history::floor(tx)?));
                }
                for r in page.revisions {
                    let place = r.seq.unwrap_or(after);
                    if filter.keeps_action(&r.action) {
                        return Ok(Next::Send(place, r));
                    }
                }
                Ok(if page.next > after { Next::Skip(page.next) } else { Next::Nothing })
            })
            .await
    }

    /// POSTs `revision` and says what came of it.
    async fn send(&self, target: &Target, cursor: i64, revision: &Revision) -> Outcome {
        let doc = json!({"jsonapi": {"version": "1.0"}, "data": crate::http::revisions::object(&self.base, revision)});
        let body = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        let message = revision_id(revision.key);
        let timestamp = crate::time::now_ms() / 1000;
        let answer = match sign(&self.webhook.secret, &message, timestamp, &body) {
            Ok(signature) => {
                let headers = [
                    ("content-type", crate::jsonapi::JSONAPI.to_owned()),
                    ("user-agent", concat!("coursed/", env!("CARGO_PKG_VERSION")).to_owned()),
                    ("webhook-id", message),
                    ("webhook-timestamp", timestamp.to_string()),
                    ("webhook-signature", signature),
                ];
                client::post(target, &headers, body, self.settings.timeout).await
            }
            Err(e) => Err(e),
        };
        match answer {
            Ok(status) if (200..300).contains(&status) => Outcome::Delivered { cursor, status },
            other => {
                let (status, error) = match other {
                    Ok(status) => (Some(status), format!("the receiver answered {status}")),
                    Err(e) => (None, e),
                };
                let wait = self.settings.backoff(self.webhook.failures + 1);
                Outcome::Failed {
                    status,
                    error,
                    next_at: crate::time::now_ms() + wait.as_millis() as i64,
                    failing_after: self.settings.give_up_after.as_millis() as i64,
                }
            }
        }
    }

    /// Records `outcome`; false when this server no longer holds the lease.
    async fn finish(&self, ctx: &WriteContext, outcome: Outcome) -> bool {
        let (id, owner) = (self.webhook.id.clone(), self.owner.clone());
        let now = crate::time::now_ms();
        let until = now + self.settings.lease.as_millis() as i64;
        if let Outcome::Failed { error, .. } = &outcome {
            log::warn!("webhook {} ({}): {error}", self.webhook.id, self.webhook.url);
        }
        match self.db.write(ctx, move |tx| Ok(store::record(tx, &id, &owner, now, until, &outcome)?)).await {
            Ok(held) => held,
            Err(e) => {
                log::warn!("webhook {}: cannot record a delivery: {e}", self.webhook.id);
                false
            }
        }
    }

    async fn release(&self, ctx: &WriteContext) {
        let (id, owner) = (self.webhook.id.clone(), self.owner.clone());
        if let Err(e) = self.db.write(ctx, move |tx| Ok(store::release(tx, &id, &owner)?)).await {
            log::warn!("webhook {}: cannot give its lease up: {e}", self.webhook.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_one_second_to_an_hour() {
        let s = Settings::default();
        let waits: Vec<u64> = [1, 2, 3, 4, 12, 13, 100].iter().map(|n| s.backoff(*n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 2048, 3600, 3600]);
    }
}
