//! Threads that do heavy work for one request (a scan, a large document, a large body) run at a
//! lower CPU priority than the threads that answer everyone else: when clients keep both cores
//! busy with such work, `/healthz` and a point read are still scheduled first. Work nobody waits
//! for (webhooks' deliveries) runs in the idle class: it takes only the CPU time that nothing
//! else on the machine wants.

use std::cell::Cell;

/// How much lower (the `nice` value added): the scheduler then gives such a thread about a
/// tenth of the time of a thread at the default priority when both want a core.
const LOWER_BY: i32 = 10;

thread_local! {
    static LOWERED: Cell<bool> = const { Cell::new(false) };
    static IDLE: Cell<bool> = const { Cell::new(false) };
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

/// Moves the calling thread into the idle scheduling class (`SCHED_IDLE`): it runs when a core
/// would otherwise be idle, and gets only a sliver of one while every core is busy. Threads it
/// starts inherit the class, and an unprivileged thread cannot leave it: such a thread must not
/// start threads that serve requests (see [`is_idle`]).
pub fn idle() {
    if IDLE.with(|i| i.replace(true)) {
        return;
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` outlives the call; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        log::debug!("cannot move a background thread to the idle class: {}", std::io::Error::last_os_error());
    }
}

/// Whether the calling thread was moved into the idle class by [`idle`].
pub fn is_idle() -> bool {
    IDLE.with(Cell::get)
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

    #[test]
    fn an_idle_thread_is_in_the_idle_class_and_its_starter_is_not() {
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let (class, marked) = std::thread::spawn(move || {
            super::idle();
            (policy(), super::is_idle())
        })
        .join()
        .unwrap();
        assert_eq!((class, marked), (libc::SCHED_IDLE, true));
        assert_eq!(policy(), libc::SCHED_OTHER);
        assert!(!super::is_idle());
    }
}
