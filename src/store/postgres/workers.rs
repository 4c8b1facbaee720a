//! The threads the engine's blocking work runs on (a request's statements wait on the network).
//!
//! Each piece of work is handed to one idle thread directly: the thread that finished last is
//! woken (warm caches, and one wake-up per piece of work), and no thread queues on a lock that
//! every other thread also takes. Work that finds every thread busy waits in a queue that
//! finishing threads empty. Measured against tokio's blocking pool, whose threads share one
//! queue behind one lock, under W1 on PostgreSQL: see docs/performance.md.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::Thread;

type Job = Box<dyn FnOnce() + Send>;

/// A set of at most `max` threads, started as work needs them, stopped when dropped.
pub struct Workers {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    max: usize,
    /// Signalled when the last thread has stopped.
    gone: Condvar,
}

#[derive(Default)]
struct State {
    /// Threads waiting for work, the most recently idle last.
    idle: Vec<Arc<Slot>>,
    /// Work no thread was free for.
    queue: VecDeque<Job>,
    threads: usize,
    stopped: bool,
}

/// Where an idle thread receives its next work.
struct Slot {
    job: Mutex<Option<Job>>,
    thread: Thread,
}

impl Workers {
    pub fn new(max: usize) -> Workers {
        Workers { inner: Arc::new(Inner { state: Mutex::default(), max: max.max(1), gone: Condvar::new() }) }
    }

    /// Hands `f` to one of the threads at once; the future gives its result (`None` if `f`
    /// panicked).
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> impl std::future::Future<Output = Option<T>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(Box::new(move || {
            let _ = tx.send(f());
        }));
        async move { rx.await.ok() }
    }

    /// Hands `job` to an idle thread, or starts one, or queues it.
    pub fn submit(&self, job: Job) {
        let mut state = self.inner.lock();
        if let Some(slot) = state.idle.pop() {
            drop(state);
            *lock(&slot.job) = Some(job);
            slot.thread.unpark();
            return;
        }
        if state.threads < self.inner.max {
            let inner = self.inner.clone();
            let started = std::thread::Builder::new().name("coursed-pg".into()).spawn(move || inner.work(job));
            match started {
                Ok(_) => state.threads += 1,
                Err(e) => log::warn!("cannot start a thread for PostgreSQL work ({e}); the work waits for a busy one"),
            }
            // A thread that could not start leaves `job` to be dropped with its closure: the
            // caller sees its result channel closed. Queue nothing in its place.
            return;
        }
        state.queue.push_back(job);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        let idle = {
            let mut state = self.inner.lock();
            state.stopped = true;
            std::mem::take(&mut state.idle)
        };
        for slot in idle {
            slot.thread.unpark();
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// A thread's life: its first job, then whatever is queued or handed to it, until stopped.
    fn work(self: Arc<Self>, first: Job) {
        let slot = Arc::new(Slot { job: Mutex::new(None), thread: std::thread::current() });
        let mut next = Some(first);
        loop {
            if let Some(job) = next.take() {
                // A panic is the job's own (its caller sees its result channel closed); the
                // thread goes on.
                let _ = catch_unwind(AssertUnwindSafe(job));
            }
            {
                let mut state = self.lock();
                if let Some(job) = state.queue.pop_front() {
                    next = Some(job);
                    continue;
                }
                if state.stopped {
                    return self.stop(state);
                }
                state.idle.push(slot.clone());
            }
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
}

impl Inner {
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
    use std::sync::Barrier;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_every_job_on_at_most_max_threads_and_survives_a_panic() {
        let workers = Workers::new(3);
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
        let results: Vec<_> = futures_util::future::join_all(waits).await;
        assert_eq!(results, (0..200).map(|i| Some(i * 2)).collect::<Vec<_>>());
        assert_eq!(done.load(Ordering::SeqCst), 200);
        assert!(lock(&threads).len() <= 3, "{} threads", lock(&threads).len());
        assert_eq!(workers.run(|| -> usize { panic!("the job's own") }).await, None);
        assert_eq!(workers.run(|| 7).await, Some(7), "a thread goes on after a panic");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_beyond_max_waits_for_a_thread_and_then_runs() {
        let workers = Workers::new(2);
        // Both threads held until four jobs are submitted: two of them must queue.
        let gate = Arc::new(Barrier::new(3));
        let mut waits: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = Option<usize>> + Send>>> = Vec::new();
        for _ in 0..2 {
            let gate = gate.clone();
            waits.push(Box::pin(workers.run(move || {
                gate.wait();
                1
            })));
        }
        waits.extend((0..2).map(|_| Box::pin(workers.run(|| 1usize)) as std::pin::Pin<Box<_>>));
        assert_eq!(lock(&workers.inner.state).threads, 2);
        gate.wait();
        let ran: usize = futures_util::future::join_all(waits).await.into_iter().flatten().sum();
        assert_eq!(ran, 4);
    }

    #[test]
    fn dropping_stops_the_threads() {
        let workers = Workers::new(4);
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..4 {
            let tx = tx.clone();
            workers.submit(Box::new(move || tx.send(()).unwrap()));
        }
        for _ in 0..4 {
            rx.recv().unwrap();
        }
        let inner = workers.inner.clone();
        drop(workers);
        let state = lock(&inner.state);
        let (state, timeout) = inner
            .gone
            .wait_timeout_while(state, std::time::Duration::from_secs(10), |s| s.threads > 0)
            .unwrap_or_else(|e| e.into_inner());
        assert!(!timeout.timed_out(), "{} threads still running", state.threads);
    }
}
