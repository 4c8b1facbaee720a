//! The threads the engine's blocking work runs on (a request's statements wait on the network).
//!
//! Each piece of work is handed to one idle thread directly (or to a new one, up to the limit): the thread that finished last is
//! woken (warm caches, and one wake-up per piece of work), and no thread queues on a lock that
//! every other thread also takes. Work that finds every thread busy waits in a queue that
//! finishing threads empty; work that waited there longer than the engine waits for a
//! connection is dropped unrun (its caller answers 503), so that an overloaded server sheds
//! load instead of answering later and later. Measured against tokio's blocking pool, whose
//! threads share one queue behind one lock, under W1 on PostgreSQL: see docs/performance.md.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

pub type Job = Box<dyn FnOnce() + Send>;

/// A set of at most `max` threads, started as work needs them, stopped when dropped.
pub struct Workers {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    max: usize,
    /// How long work may wait in the queue and still run.
    max_wait: Duration,
    /// Signalled when the last thread has stopped.
    gone: Condvar,
}

#[derive(Default)]
struct State {
    /// Threads waiting for work, the most recently idle last.
    idle: Vec<Arc<Slot>>,
    /// Work no thread was free for, and when it was queued.
    queue: VecDeque<(Instant, Job)>,
    threads: usize,
    stopped: bool,
}

/// Where an idle thread receives its next work.
struct Slot {
    job: Mutex<Option<Job>>,
    /// Set by the thread itself as it starts, before it can be idle.
    thread: OnceLock<Thread>,
}

/// Where work goes when every thread is busy.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Queue {
    /// Behind the work already waiting.
    Back,
    /// Before it: work that others wait on (a group-commit leader).
    Front,
}

impl Workers {
    pub fn new(max: usize, max_wait: Duration) -> Workers {
        let inner = Inner { state: Mutex::default(), max: max.max(1), max_wait, gone: Condvar::new() };
        Workers { inner: Arc::new(inner) }
    }

    /// Hands `f` to one of the threads at once; the future gives its result, or `None` if `f`
    /// did not run (it waited too long for a thread, or no thread could be started) or panicked.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> impl std::future::Future<Output = Option<T>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(
            Box::new(move || {
                let _ = tx.send(f());
            }),
            Queue::Back,
        );
        async move { rx.await.ok() }
    }

    /// Hands `job` to an idle thread, or to a new one if fewer than `max` run, or queues it at
    /// `place`. A job that cannot run (no thread at all could be started) is dropped, which its
    /// owner must handle as not run.
    pub fn submit(&self, job: Job, place: Queue) {
        let mut state = self.inner.lock();
        if let Some(slot) = state.idle.pop() {
            drop(state);
            *lock(&slot.job) = Some(job);
            if let Some(thread) = slot.thread.get() {
                thread.unpark();
            }
            return;
        }
        let job = if state.threads < self.inner.max {
            let slot = Arc::new(Slot { job: Mutex::new(Some(job)), thread: OnceLock::new() });
            let (inner, its) = (self.inner.clone(), slot.clone());
            match std::thread::Builder::new().name("coursed-pg".into()).spawn(move || inner.work(its)) {
                Ok(_) => {
                    state.threads += 1;
                    return;
                }
                Err(e) => {
                    let job = lock(&slot.job).take();
                    if state.threads == 0 {
                        log::error!("cannot start a thread for PostgreSQL work ({e}); the work is not done");
                        drop(state);
                        drop(job);
                        return;
                    }
                    log::warn!("cannot start a thread for PostgreSQL work ({e}); the work waits for a busy one");
                    match job {
                        Some(job) => job,
                        None => return,
                    }
                }
            }
        } else {
            job
        };
        match place {
            Queue::Back => state.queue.push_back((Instant::now(), job)),
            Queue::Front => state.queue.push_front((Instant::now(), job)),
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        let idle = {
            let mut state = self.inner.lock();
            state.stopped = true;
            std::mem::take(&mut state.idle)
        };
        for thread in idle.iter().filter_map(|slot| slot.thread.get()) {
            thread.unpark();
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// A thread's life: the job it was started for, then whatever is queued or handed to it,
    /// until stopped.
    fn work(self: Arc<Self>, slot: Arc<Slot>) {
        let _ = slot.thread.set(std::thread::current());
        let mut next = lock(&slot.job).take();
        loop {
            if let Some(job) = next.take() {
                // A panic is the job's own (its caller sees its result channel closed); the
                // thread goes on. The panic's payload is dropped under a guard too.
                if let Err(payload) = catch_unwind(AssertUnwindSafe(job)) {
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
                }
            }
            let mut state = self.lock();
            if let Some((queued, job)) = state.queue.pop_front() {
                if queued.elapsed() <= self.max_wait {
                    next = Some(job);
                } else {
                    // Dropped unrun, outside the lock (its owner's drop may take locks of its own).
                    drop(state);
                    let _ = catch_unwind(AssertUnwindSafe(move || drop(job)));
                }
                continue;
            }
            if state.stopped {
                return self.stop(state);
            }
            state.idle.push(slot.clone());
            drop(state);
            // Handed a job, or told to stop (a wake-up without either is spurious).
            loop {
                std::thread::park();
                if let Some(job) = lock(&slot.job).take() {
                    next = Some(job);
                    break;
                }
                let state = self.lock();
                if state.stopped {
                    return self.stop(state);
                }
            }
        }
    }

    fn stop(&self, mut state: MutexGuard<'_, State>) {
        state.threads -= 1;
        if state.threads == 0 {
            self.gone.notify_all();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    const LONG: Duration = Duration::from_secs(60);

    /// Waits for `f`, failing the test instead of hanging.
    async fn within<F: std::future::Future>(f: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(30), f).await.expect("the work did not finish")
    }

    /// A job that holds its thread until the returned sender is used (or dropped).
    fn holding(workers: &Workers) -> (mpsc::Sender<()>, mpsc::Receiver<()>) {
        let (release, held) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel::<()>();
        workers.submit(
            Box::new(move || {
                started.send(()).unwrap();
                let _ = held.recv();
            }),
            Queue::Back,
        );
        (release, running)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_every_job_on_at_most_max_threads() {
        let workers = Workers::new(3, LONG);
        let threads = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let done = Arc::new(AtomicUsize::new(0));
        let mut waits = Vec::new();
        for i in 0..200 {
            let (threads, done) = (threads.clone(), done.clone());
            waits.push(workers.run(move || {
                lock(&threads).insert(std::thread::current().id());
                done.fetch_add(1, Ordering::SeqCst);
                i * 2
            }));
        }
        let results: Vec<_> = within(futures_util::future::join_all(waits)).await;
        assert_eq!(results, (0..200).map(|i| Some(i * 2)).collect::<Vec<_>>());
        assert_eq!(done.load(Ordering::SeqCst), 200);
        assert!(lock(&threads).len() <= 3, "{} threads", lock(&threads).len());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_thread_goes_on_after_a_job_panics() {
        let workers = Workers::new(1, LONG);
        let before = within(workers.run(|| std::thread::current().id())).await;
        assert_eq!(within(workers.run(|| -> usize { panic!("the job's own") })).await, None);
        let after = within(workers.run(|| std::thread::current().id())).await;
        assert_eq!(before, after, "the one thread was replaced");
        assert_eq!(lock(&workers.inner.state).threads, 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_work_runs_when_a_thread_is_free_leaders_first() {
        let workers = Workers::new(1, LONG);
        let (release, running) = holding(&workers);
        running.recv().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (o1, o2) = (order.clone(), order.clone());
        let back = workers.run(move || lock(&o1).push("back"));
        let (done, finished) = tokio::sync::oneshot::channel();
        workers.submit(
            Box::new(move || {
                lock(&o2).push("front");
                let _ = done.send(());
            }),
            Queue::Front,
        );
        assert_eq!(lock(&workers.inner.state).queue.len(), 2);
        release.send(()).unwrap();
        within(back).await.unwrap();
        within(finished).await.unwrap();
        assert_eq!(*lock(&order), ["front", "back"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_that_waited_too_long_is_dropped_unrun() {
        let workers = Workers::new(1, Duration::ZERO);
        let (release, running) = holding(&workers);
        running.recv().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let counted = ran.clone();
        let late = workers.run(move || counted.fetch_add(1, Ordering::SeqCst));
        release.send(()).unwrap();
        assert_eq!(within(late).await, None);
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        // Once idle again, the thread takes work handed to it (never queued, so never late).
        while lock(&workers.inner.state).idle.is_empty() {
            std::thread::yield_now();
        }
        assert_eq!(within(workers.run(|| 5)).await, Some(5), "the thread goes on");
    }

    #[test]
    fn dropping_stops_the_threads_idle_and_busy() {
        let workers = Workers::new(4, LONG);
        let (release, running) = holding(&workers);
        running.recv().unwrap();
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            let tx = tx.clone();
            workers.submit(Box::new(move || tx.send(()).unwrap()), Queue::Back);
        }
        for _ in 0..3 {
            rx.recv().unwrap();
        }
        // Every thread but the busy one parked, so that the drop must wake them.
        let inner = workers.inner.clone();
        while {
            let state = lock(&inner.state);
            state.idle.len() + 1 < state.threads
        } {
            std::thread::yield_now();
        }
        drop(workers);
        release.send(()).unwrap();
        let state = lock(&inner.state);
        let (state, timeout) = inner
            .gone
            .wait_timeout_while(state, Duration::from_secs(10), |s| s.threads > 0)
            .unwrap_or_else(|e| e.into_inner());
        assert!(!timeout.timed_out(), "{} threads still running", state.threads);
    }
}
