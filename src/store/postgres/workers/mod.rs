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
    /// Starts the threads that work handed over by a thread of the idle class needs (see
    /// [`Workers::submit`]).
    starter: Mutex<Option<std::sync::mpsc::Sender<Start>>>,
}

/// A thread for the starter to start: the engine's threads, and the slot it begins with.
type Start = (Arc<Inner>, Arc<Slot>);

#[derive(Default)]
struct State {
    /// Threads waiting for work, the most recently idle last.
    idle: Vec<Arc<Slot>>,
    /// Work no thread was free for, and when it was queued.
    queue: VecDeque<(Instant, Job)>,
    /// Work that may take long, taken only when `queue` is empty (see [`Queue::Later`]).
    later: VecDeque<(Instant, Job)>,
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
    /// After all of it: reads that may take long (scans, sorts, counts), so that short work
    /// waits for the next free thread rather than behind every long read a client sent; one
    /// that has waited half of what work may wait goes first.
    Later,
}

impl Workers {
    pub fn new(max: usize, max_wait: Duration) -> Workers {
        let inner = Inner {
            state: Mutex::default(),
            max: max.max(1),
            max_wait,
            gone: Condvar::new(),
            starter: Mutex::default(),
        };
        let (tx, rx) = std::sync::mpsc::channel::<Start>();
        // Started here, at the priority of whoever makes the engine (a server's main thread);
        // it ends when the engine is dropped (the sender with it).
        let started = std::thread::Builder::new().name("coursed-pg-start".into()).spawn(move || {
            for (inner, slot) in rx {
                inner.start(slot);
            }
        });
        if started.is_ok() {
            *lock(&inner.starter) = Some(tx);
        }
        Workers { inner: Arc::new(inner) }
    }

    /// Hands `f` to one of the threads at once, or queues it at `place` when every thread is
    /// busy; the future gives its result, or `None` if `f` did not run (it waited too long for
    /// a thread, or no thread could be started) or panicked.
    pub fn run<T: Send + 'static>(
        &self,
        place: Queue,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> impl std::future::Future<Output = Option<T>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(
            Box::new(move || {
                let _ = tx.send(f());
            }),
            place,
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
            // A thread started by a thread of the idle class (webhooks' deliveries) would be of
            // that class for good, and serve requests from it: the starter starts it instead.
            if crate::priority::is_idle() {
                let starter = lock(&self.inner.starter).clone();
                if let Some(tx) = starter {
                    if tx.send((self.inner.clone(), slot.clone())).is_ok() {
                        state.threads += 1;
                        return;
                    }
                }
            }
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
            Queue::Later => state.later.push_back((Instant::now(), job)),
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
        lock(&self.inner.starter).take();
        for thread in idle.iter().filter_map(|slot| slot.thread.get()) {
            thread.unpark();
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Starts the thread of `slot` (counted already), for [`Workers::submit`] from a thread of
    /// the idle class. If no thread can be started, its work waits for a busy one, or is
    /// dropped unrun when there is none (its owner answers 503).
    fn start(self: Arc<Self>, slot: Arc<Slot>) {
        let (inner, its) = (self.clone(), slot.clone());
        if let Err(e) = std::thread::Builder::new().name("coursed-pg".into()).spawn(move || inner.work(its)) {
            let job = lock(&slot.job).take();
            let mut state = self.lock();
            state.threads -= 1;
            if state.threads == 0 {
                self.gone.notify_all();
            }
            log::warn!("cannot start a thread for PostgreSQL work ({e})");
            match job {
                Some(job) if state.threads > 0 && !state.stopped => state.queue.push_front((Instant::now(), job)),
                job => {
                    drop(state);
                    drop(job);
                }
            }
        }
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
            if let Some((queued, job)) = self.next(&mut state) {
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

    /// The queued work to run next: the head of `queue`, unless the long read at the head of
    /// `later` has waited half of what work may wait (then it goes first, so that a steady
    /// stream of short work cannot keep every long read waiting until it is dropped); `later`
    /// when `queue` is empty.
    fn next(&self, state: &mut State) -> Option<(Instant, Job)> {
        if state.later.front().is_some_and(|(queued, _)| queued.elapsed() >= self.max_wait / 2) {
            return state.later.pop_front();
        }
        state.queue.pop_front().or_else(|| state.later.pop_front())
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
mod tests;
