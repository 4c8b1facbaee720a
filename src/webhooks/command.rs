//! `coursed webhook add|list|remove|test|resume`: the webhooks kept in a database, managed from
//! the command line while servers run on it (they read the table a few times a second).

use std::time::Duration;

use bytes::Bytes;
use serde_json::json;

use super::store::{self, Webhook};
use super::{check_url, mint_secret, sign, Filter};
use crate::client::{self, Target};
use crate::store::{display_name, history, DbError, Tx};

/// Adds a webhook that delivers every change from now on; returns it (its secret is shown
/// once, by the caller).
pub fn add(database: &str, url: &str, filter: &Filter) -> Result<Webhook, String> {
    check_url(url)?;
    let now = crate::time::now_ms();
    let mut webhook = Webhook {
        id: uuid::Uuid::now_v7().to_string(),
        url: url.to_owned(),
        types: filter.types_text(),
        actions: filter.actions_text(),
        secret: mint_secret()?,
        cursor: 0,
        failing: false,
        created_at: now,
        failures: 0,
        failing_since: None,
        next_at: 0,
        last_attempt_at: None,
        last_status: None,
        last_error: None,
        delivered: 0,
        last_delivered_at: None,
    };
    let row = webhook.clone();
    webhook.cursor = crate::store::on_command_database(database, false, async move |db: &crate::store::Db| {
        // What committed before is placed in the feed first (PostgreSQL places revisions after
        // their commit): the webhook starts after it.
        db.sync_feed().await?;
        db.write(&crate::store::WriteContext::system("coursed"), move |tx| {
            // From the newest place of the feed on: what was written before is not news.
            let mut row = row.clone();
            row.cursor = history::head(tx)?;
            store::insert(tx, &row)?;
            Ok(row.cursor)
        })
        .await
    })?;
    Ok(webhook)
}

/// Every webhook of `database`.
pub fn list(database: &str) -> Result<Vec<Webhook>, String> {
    on_database(database, false, store::list)
}

/// The webhooks as a table: id, URL, filter, state, cursor, deliveries, last attempt.
pub fn table(webhooks: &[Webhook]) -> String {
    let time = |t: Option<i64>| t.map_or("never".to_owned(), crate::time::format_ms);
    let mut out = String::new();
    for w in webhooks {
        let filter = Filter::parse(&w.types, &w.actions).unwrap_or_default().describe();
        let state = if w.failing { "FAILING (coursed webhook resume)" } else { "active" };
        let last = match (w.last_attempt_at, w.last_status) {
            (None, _) => "no delivery yet".to_owned(),
            (Some(at), Some(status)) => format!("last attempt {} answered {status}", crate::time::format_ms(at)),
            (Some(at), None) => format!("last attempt {} got no answer", crate::time::format_ms(at)),
        };
        out.push_str(&format!(
            "{}  {}\n    filter: {filter}\n    state: {state}; cursor {}; {} delivered, the last {}\n    {last}; {} failures in a row{}\n",
            w.id,
            w.url,
            w.cursor,
            w.delivered,
            time(w.last_delivered_at),
            w.failures,
            w.last_error.as_deref().map(|e| format!("; last error: {e}")).unwrap_or_default(),
        ));
    }
    if out.is_empty() {
        out.push_str("no webhooks (coursed webhook add --url URL adds one)\n");
    }
    out
}

/// Removes the webhook `id`.
pub fn remove(database: &str, id: &str) -> Result<(), String> {
    change(database, id, store::remove)
}

/// Makes a failing webhook active again, tried at once.
pub fn resume(database: &str, id: &str) -> Result<(), String> {
    change(database, id, store::resume)
}

/// Runs `f` on the webhook `id`; an error naming it when there is none.
fn change(database: &str, id: &str, f: fn(&mut dyn Tx, &str) -> Result<bool, DbError>) -> Result<(), String> {
    let owned = id.to_owned();
    if on_database(database, true, move |tx| f(tx, &owned))? {
        Ok(())
    } else {
        Err(missing(database, id))
    }
}

/// Sends the webhook `id` a signed test message (not a revision: `{"meta": {"test": true}}`),
/// and says what the receiver answered.
pub fn test(database: &str, id: &str, timeout: Duration) -> Result<String, String> {
    let owned = id.to_owned();
    let w = on_database(database, false, move |tx| store::get(tx, &owned))?.ok_or_else(|| missing(database, id))?;
    let target = Target::parse(&w.url)?;
    let now = crate::time::now_ms();
    let message = format!("test-{}", uuid::Uuid::new_v4());
    let doc = json!({"jsonapi": {"version": "1.0"}, "meta": {"test": true, "webhook": w.id, "at": crate::time::format_ms(now)}});
    let body = Bytes::from(doc.to_string());
    let headers = [
        ("content-type", crate::jsonapi::JSONAPI.to_owned()),
        ("webhook-id", message.clone()),
        ("webhook-timestamp", (now / 1000).to_string()),
        ("webhook-signature", sign(&w.secret, &message, now / 1000, &body)?),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    match runtime.block_on(client::post(&target, &headers, body, timeout)) {
        Ok(status) if (200..300).contains(&status) => Ok(format!("{} answered {status}: it works", w.url)),
        Ok(status) => Err(format!("{} answered {status} to a signed test message", w.url)),
        Err(e) => Err(format!("{}: {e}", w.url)),
    }
}

fn missing(database: &str, id: &str) -> String {
    format!("there is no webhook {id:?} in {} (coursed webhook list shows them)", display_name(database))
}

fn on_database<T: Send + 'static>(
    database: &str,
    write: bool,
    f: impl FnMut(&mut dyn Tx) -> Result<T, DbError> + Send + 'static,
) -> Result<T, String> {
    crate::store::on_command_tx(database, "webhooks", write, false, f)
}
