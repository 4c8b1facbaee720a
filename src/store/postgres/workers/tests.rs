//! Tests of the engine's threads: the limit, a panic, queue order, late work, stopping.

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

/// A list of names, and a maker of jobs that each add their name to it as they run.
#[allow(clippy::type_complexity)]
fn recorder() -> (Arc<Mutex<Vec<&'static str>>>, impl Fn(&'static str) -> Box<dyn FnOnce() + Send>) {
    let order = Arc::new(Mutex::new(Vec::new()));
    let kept = order.clone();
    (order, move |name| {
        let order = kept.clone();
        Box::new(move || lock(&order).push(name))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_every_job_on_at_most_max_threads() {
    let workers = Workers::new(3, LONG);
    let threads = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let mut waits = Vec::new();
    for i in 0..200 {
        let (threads, done) = (threads.clone(), done.clone());
        waits.push(workers.run(Queue::Back, move || {
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
    let before = within(workers.run(Queue::Back, || std::thread::current().id())).await;
    assert_eq!(within(workers.run(Queue::Back, || -> usize { panic!("the job's own") })).await, None);
    let after = within(workers.run(Queue::Back, || std::thread::current().id())).await;
    assert_eq!(before, after, "the one thread was replaced");
    assert_eq!(lock(&workers.inner.state).threads, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_reads_wait_behind_every_other_kind_of_work() {
    let workers = Workers::new(1, LONG);
    let (release, running) = holding(&workers);
    running.recv().unwrap();
    let (order, push) = recorder();
    // Queued in this order while the one thread is busy.
    let long1 = workers.run(Queue::Later, push("long 1"));
    let short1 = workers.run(Queue::Back, push("short 1"));
    let long2 = workers.run(Queue::Later, push("long 2"));
    let short2 = workers.run(Queue::Back, push("short 2"));
    let leader = workers.run(Queue::Front, push("leader"));
    assert_eq!(lock(&workers.inner.state).later.len(), 2);
    release.send(()).unwrap();
    for done in [long1, short1, long2, short2, leader] {
        within(done).await.unwrap();
    }
    assert_eq!(*lock(&order), ["leader", "short 1", "short 2", "long 1", "long 2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_read_that_waited_half_its_time_goes_before_short_work() {
    let workers = Workers::new(1, LONG);
    let (release, running) = holding(&workers);
    running.recv().unwrap();
    let (order, push) = recorder();
    // A long read queued more than half of `LONG` ago (no sleep: its queueing time is set).
    let (done, long) = tokio::sync::oneshot::channel();
    let job = push("long");
    let queued = Instant::now() - LONG / 2 - Duration::from_secs(1);
    lock(&workers.inner.state).later.push_back((
        queued,
        Box::new(move || {
            job();
            let _ = done.send(());
        }),
    ));
    let short = workers.run(Queue::Back, push("short"));
    release.send(()).unwrap();
    within(long).await.unwrap();
    within(short).await.unwrap();
    assert_eq!(*lock(&order), ["long", "short"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_work_runs_when_a_thread_is_free_leaders_first() {
    let workers = Workers::new(1, LONG);
    let (release, running) = holding(&workers);
    running.recv().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (o1, o2) = (order.clone(), order.clone());
    let back = workers.run(Queue::Back, move || lock(&o1).push("back"));
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
    let late = workers.run(Queue::Back, move || counted.fetch_add(1, Ordering::SeqCst));
    release.send(()).unwrap();
    assert_eq!(within(late).await, None);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    // Once idle again, the thread takes work handed to it (never queued, so never late).
    while lock(&workers.inner.state).idle.is_empty() {
        std::thread::yield_now();
    }
    assert_eq!(within(workers.run(Queue::Back, || 5)).await, Some(5), "the thread goes on");
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

#[test]
fn work_handed_over_by_an_idle_thread_runs_at_the_requests_priority() {
    let workers = Arc::new(Workers::new(2, LONG));
    let policy = || unsafe { libc::sched_getscheduler(0) };
    let handing = workers.clone();
    // The first piece of work starts the engine's first thread, from a thread of the idle class.
    let (class, second) = std::thread::spawn(move || {
        crate::priority::idle();
        assert_eq!(policy(), libc::SCHED_IDLE);
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        handing.submit(Box::new(move || tx.send(policy()).unwrap()), Queue::Back);
        let first = rx.recv_timeout(Duration::from_secs(30)).expect("the work ran");
        // Both threads busy at once: the second is started too.
        let (release, running) = holding(&handing);
        running.recv_timeout(Duration::from_secs(30)).unwrap();
        handing.submit(Box::new(move || tx2.send(policy()).unwrap()), Queue::Back);
        let second = rx.recv_timeout(Duration::from_secs(30)).expect("the work ran");
        drop(release);
        (first, second)
    })
    .join()
    .unwrap();
    assert_eq!((class, second), (libc::SCHED_OTHER, libc::SCHED_OTHER));
    assert_eq!(lock(&workers.inner.state).threads, 2);
}
