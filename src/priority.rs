//! Threads that do heavy work for one request (a scan, a large document, a large body) run at a
//! lower CPU priority than the threads that answer everyone else: when clients keep both cores
//! busy with such work, `/healthz` and a point read are still scheduled first. Work nobody waits
//! for (webhooks' deliveries) runs in the idle class: it takes only the CPU time that nothing
//! else on the machine wants.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// Requests this process is answering now (counted by the server around each one).
static ANSWERING: AtomicUsize = AtomicUsize::new(0);

/// A request began (the server calls it as it hands a request to its handler).
pub fn request_began() {
    ANSWERING.fetch_add(1, Ordering::Relaxed);
}

/// A request ended (answered, or dropped).
pub fn request_ended() {
    ANSWERING.fetch_sub(1, Ordering::Relaxed);
}

/// How busy the machine's CPUs must have been since the last look for requests to be taken as
/// wanting every core.
const SATURATED: f64 = 0.9;
/// How often the machine's CPU time is read, at most.
const LOOK_EVERY: Duration = Duration::from_millis(200);

/// Whether requests want every core: the machine's CPUs were at least 90 % busy since the last
/// look, and this process is answering requests. Work that can wait (webhooks' deliveries)
/// then waits: unlike the idle class, which ranks only this process's threads, this also
/// spares the database the work's reads (a PostgreSQL on the same machine is a service of its
/// own, which Linux shares the CPU with first).
#[derive(Clone)]
pub struct Saturation(Arc<Source>);

enum Source {
    Machine(Mutex<Look>),
    /// Set by hand (tests).
    Given(AtomicBool),
}

#[derive(Default)]
struct Look {
    at: Option<Instant>,
    cpu: Option<(u64, u64)>,
    saturated: bool,
}

impl Saturation {
    /// Read from the machine (`/proc/stat`) and this process's requests.
    pub fn machine() -> Saturation {
        Saturation(Arc::new(Source::Machine(Mutex::default())))
    }

    /// Says what [`Saturation::set`] last set (for tests).
    pub fn given(saturated: bool) -> Saturation {
        Saturation(Arc::new(Source::Given(AtomicBool::new(saturated))))
    }

    /// Sets what a [`Saturation::given`] says (no effect on one read from the machine).
    pub fn set(&self, saturated: bool) {
        if let Source::Given(s) = &*self.0 {
            s.store(saturated, Ordering::SeqCst);
        }
    }

    /// Whether requests want every core now (as of the last look, at most 200 ms old).
    pub fn now(&self) -> bool {
        match &*self.0 {
            Source::Given(s) => s.load(Ordering::SeqCst),
            Source::Machine(look) => {
                let mut look = look.lock().unwrap_or_else(|e| e.into_inner());
                if look.at.is_some_and(|at| at.elapsed() < LOOK_EVERY) {
                    return look.saturated;
                }
                let cpu = std::fs::read_to_string("/proc/stat").ok().and_then(|s| cpu_time(&s));
                look.saturated = saturated(look.cpu, cpu, ANSWERING.load(Ordering::Relaxed));
                (look.cpu, look.at) = (cpu, Some(Instant::now()));
                look.saturated
            }
        }
    }
}

impl std::fmt::Debug for Saturation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.0 {
            Source::Machine(_) => f.write_str("Saturation::machine()"),
            Source::Given(s) => write!(f, "Saturation::given({})", s.load(Ordering::SeqCst)),
        }
    }
}

/// Whether requests want every core, from the machine's CPU time at the last look and now, and
/// the requests in flight.
fn saturated(before: Option<(u64, u64)>, now: Option<(u64, u64)>, answering: usize) -> bool {
    match (before, now) {
        (Some((busy0, total0)), Some((busy1, total1))) if total1 > total0 && answering > 0 => {
            busy1.saturating_sub(busy0) as f64 / (total1 - total0) as f64 >= SATURATED
        }
        _ => false,
    }
}

/// The machine's busy and total CPU time so far (clock ticks), from the `cpu` line of
/// `/proc/stat`: user, nice, system, idle, iowait, irq, softirq, steal (guest time is counted
/// in user already); idle and iowait are not busy.
fn cpu_time(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let ticks: Vec<u64> = line.split_whitespace().take(8).map(|t| t.parse().ok()).collect::<Option<_>>()?;
    let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
    let total: u64 = ticks.iter().sum();
    Some((total - idle, total))
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

    #[test]
    fn cpu_time_is_read_from_the_cpu_line_with_idle_and_iowait_not_busy() {
        let stat = "cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 50 2 25 400 20 1 1 0 3 0\n";
        assert_eq!(super::cpu_time(stat), Some((160, 1000)));
        assert_eq!(super::cpu_time("cpu  1 2 3\n"), None, "too short");
        assert_eq!(super::cpu_time("intr 5\n"), None);
        assert_eq!(super::cpu_time("cpu  1 x 3 4 5\n"), None);
        // This machine's own.
        let (busy, total) = super::cpu_time(&std::fs::read_to_string("/proc/stat").unwrap()).unwrap();
        assert!(busy <= total && total > 0);
    }

    #[test]
    fn a_given_saturation_says_what_it_was_set_to_in_every_clone() {
        let given = super::Saturation::given(false);
        assert!(!given.now());
        given.set(true);
        assert!(given.now() && given.clone().now());
    }

    #[test]
    fn saturated_when_the_cpus_were_nine_tenths_busy_while_requests_were_in_flight() {
        use super::saturated;
        assert!(saturated(Some((100, 1000)), Some((190, 1100)), 1));
        assert!(!saturated(Some((100, 1000)), Some((189, 1100)), 1), "89 % busy");
        assert!(!saturated(Some((100, 1000)), Some((200, 1100)), 0), "no request in flight");
        assert!(!saturated(None, Some((200, 1100)), 3), "a first look");
        assert!(!saturated(Some((100, 1000)), Some((100, 1000)), 3), "no time went by");
        assert!(!saturated(Some((100, 1000)), None, 3), "unreadable");
    }
}
