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

/// The size of work (a body, a document) after which its memory is worth giving back: below
/// it, what is freed is soon taken again by the next requests.
pub const WORTH_GIVING_BACK: usize = 1 << 20;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests share the one flag: one at a time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn a_trim_that_ran_lets_the_next_large_work_schedule_another() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        // Outside a runtime the trim runs at once: afterwards nothing is pending, so the next
        // large document gives its memory back too (a flag left set would end every trim).
        give_back();
        assert!(!PENDING.load(Ordering::Acquire));
    }

    #[test]
    fn on_the_server_the_trim_runs_on_the_blocking_pool_and_clears_its_flag() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_time().build().unwrap();
        rt.block_on(async {
            // Two calls in a row: the second finds the first pending, or already started.
            give_back();
            give_back();
            // The flag clears once the trim has started on the blocking pool (no signal to wait
            // for: look again every millisecond, for at most 10 s).
            for _ in 0..10_000 {
                if !PENDING.load(Ordering::Acquire) {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            panic!("the trim never started");
        });
    }
}
