//! Memory that large work leaves behind goes back to the system.
//!
//! glibc's allocator keeps freed memory in the heap of the thread that freed it, for the next
//! allocation, and gives a heap back only from its top. That suits the ordinary requests, which
//! take and free a few KiB again and again; but after a large document or body (tens of MiB),
//! the freed pages would stay with the process, and a burst of such requests would leave the
//! server that much larger for good. So after each large piece of work, `malloc_trim` gives
//! every free page of every heap back, on the blocking pool, at most one at a time. The
//! ordinary requests never pay for it.

use std::sync::atomic::{AtomicBool, Ordering};

/// A trim is scheduled and has not started yet.
static PENDING: AtomicBool = AtomicBool::new(false);

/// Gives the free memory of the allocator's heaps back to the system, soon, off the async
/// threads; a call while a trim is pending adds nothing.
pub fn give_back() {
    if PENDING.swap(true, Ordering::AcqRel) {
        return;
    }
    let trim = || {
        // Memory freed from here on is for the next trim.
        PENDING.store(false, Ordering::Release);
        trim_heaps();
    };
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => drop(rt.spawn_blocking(trim)),
        Err(_) => trim(),
    }
}

#[cfg(target_env = "gnu")]
fn trim_heaps() {
    // SAFETY: takes no pointers; glibc locks each heap while it trims it.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(target_env = "gnu"))]
fn trim_heaps() {}
