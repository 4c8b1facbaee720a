//! Documents are read within a budget (see [`Budget`]): first the small one, inline when the
//! read is bounded, so that an ordinary page costs no more than it did; a document that
//! outgrows it is read again within the large budget, on the blocking pool, once one of the
//! few permits for large documents is free. The permit goes with the document's bytes until
//! they are sent (or dropped), so that however many clients ask for large documents at once,
//! only that many are in memory.

use std::time::Duration;

use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;

use crate::app::App;
use crate::error::{Error, Problem, Result};
use crate::jsonapi::query::{Budget, DOCUMENT_TOO_LARGE};
use crate::jsonapi::Query;
use crate::store::Tx;

/// A large document's permit, held while its bytes are. When it goes (the bytes were sent or
/// dropped), the memory they took is given back to the system.
pub struct Permit(#[allow(dead_code)] OwnedSemaphorePermit);

impl Drop for Permit {
    fn drop(&mut self) {
        crate::memory::give_back();
    }
}

/// Runs the read `work(q)` makes with `q` within [`Budget::SMALL`] (inline when `bounded`), and
/// again within [`Budget::LARGE`] when its document outgrew that; returns what it read, with
/// the permit of a large document.
pub async fn read<T, F, W>(app: &App, bounded: bool, q: &Query, work: F) -> Result<(T, Option<Permit>)>
where
    T: Send + 'static,
    F: Fn(Query) -> W,
    W: FnMut(&mut dyn Tx) -> Result<T> + Send + 'static,
{
    let small = q.within(Budget::SMALL);
    let first = if bounded { app.db.read(work(small)).await } else { app.db.scan(work(small)).await };
    match first {
        Err(e) if outgrown(&e) => {}
        other => return other.map(|t| (t, None)),
    }
    let wait = app.request_timeout;
    let permit = match tokio::time::timeout(wait, app.large_documents.clone().acquire_owned()).await {
        Ok(Ok(permit)) => Permit(permit),
        Ok(Err(closed)) => return Err(Error::internal(closed)),
        Err(_) => return Err(busy(wait)),
    };
    let large = q.within(Budget::LARGE);
    Ok((app.db.scan(work(large)).await?, Some(permit)))
}

/// A document's bytes, with its permit when it has one.
pub fn body(document: Vec<u8>, permit: Option<Permit>) -> Bytes {
    match permit {
        Some(permit) => Bytes::from_owner(Held(document, permit)),
        None => document.into(),
    }
}

/// The document, then its permit: fields are dropped in order, so the bytes are freed before
/// the permit gives the memory back.
struct Held(Vec<u8>, #[allow(dead_code)] Permit);

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Whether `e` is a document that outgrew its budget.
fn outgrown(e: &Error) -> bool {
    e.problems.iter().any(|p| p.code == DOCUMENT_TOO_LARGE)
}

/// 503: every permit stayed taken for `wait`.
fn busy(wait: Duration) -> Error {
    Problem::new(
        warp::http::StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        format!(
            "The server has been writing other large documents for {} s; retry shortly, or ask for less (a smaller \
             `page[size]`, fewer relationships in `include`).",
            wait.as_secs()
        ),
    )
    .into()
}
