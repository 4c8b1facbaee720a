//! Work that grows with what a request sends or gets back (parsing a body, deriving its search
//! words, compressing a document) runs on the async threads only while it is small: past
//! [`INLINE_BYTES`] it goes to the blocking pool, so that a megabyte from one client never
//! holds the threads that answer everyone else (`/healthz` among them).

use crate::error::{Error, Result};

/// The most bytes of input handled inline: well under a millisecond of parsing or compressing.
pub const INLINE_BYTES: usize = 64 << 10;

/// Runs `f`, whose work grows with `size` bytes, inline when that is small, else on the
/// blocking pool.
pub async fn run<T: Send + 'static>(size: usize, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    if size <= INLINE_BYTES {
        return f();
    }
    tokio::task::spawn_blocking(f).await.map_err(Error::internal)?
}
