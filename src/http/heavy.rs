//! Work that grows with what a request sends or gets back (parsing a body, deriving its search
//! words, compressing a document) runs on the async threads only while it is small: past
//! [`INLINE_BYTES`] it goes to the blocking pool, so that a megabyte from one client never
//! holds the threads that answer everyone else (`/healthz` among them).

use crate::error::{Error, Result};

/// The most bytes of input handled inline: well under a millisecond of parsing or compressing.
pub const INLINE_BYTES: usize = 64 << 10;

/// Large inputs handled at once (one per core): a parsed megabyte takes several in memory, so
/// however many clients send one, memory stays bounded; the others wait their turn.
static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// Runs `f`, whose work grows with `size` bytes, inline when that is small, else on the
/// blocking pool at a lower priority (see [`crate::priority`]), once a turn is free within
/// `wait` (else a 503).
pub async fn run<T: Send + 'static>(
    size: usize,
    wait: std::time::Duration,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    if size <= INLINE_BYTES {
        return f();
    }
    let turn = tokio::time::timeout(wait, TURNS.acquire())
        .await
        .map_err(|_| Error::unavailable("every turn for a large body stayed taken"))?
        .map_err(Error::internal)?;
    let done = tokio::task::spawn_blocking(move || {
        crate::priority::lower();
        f()
    })
    .await
    .map_err(Error::internal)?;
    drop(turn);
    // What a large body's parsing left in the heaps of the blocking threads is given back.
    if size >= crate::memory::WORTH_GIVING_BACK {
        crate::memory::give_back();
    }
    done
}
