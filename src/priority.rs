//! Threads that do heavy work for one request (a scan, a large document, a large body) run at a
//! lower CPU priority than the threads that answer everyone else: when clients keep both cores
//! busy with such work, `/healthz` and a point read are still scheduled first.

use std::cell::Cell;

/// How much lower (the `nice` value added): the scheduler then gives such a thread about a
/// tenth of the time of a thread at the default priority when both want a core.
const LOWER_BY: i32 = 10;

thread_local! {
    static LOWERED: Cell<bool> = const { Cell::new(false) };
}

/// Lowers the priority of the calling thread, once (a thread of the blocking pool keeps it:
/// it runs only such work).
pub fn lower() {
    if LOWERED.with(|l| l.replace(true)) {
        return;
    }
    // SAFETY: `gettid` and `setpriority` take no pointers; on Linux `PRIO_PROCESS` with a
    // thread id sets that thread's own nice value.
    let failed = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, LOWER_BY) != 0
    };
    if failed {
        log::debug!("cannot lower a worker thread's priority: {}", std::io::Error::last_os_error());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_thread_lowers_its_own_priority_only() {
        let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::syscall(libc::SYS_gettid) as libc::id_t) };
        let before = nice();
        let lowered = std::thread::spawn(move || {
            super::lower();
            super::lower();
            nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + super::LOWER_BY).min(19));
        assert_eq!(nice(), before, "the calling thread is as it was");
    }
}
