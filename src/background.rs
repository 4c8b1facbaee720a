//! Work a server does beside its requests (webhooks' deliveries, following another coursed), on
//! a thread of its own with a runtime of its own: stopped when its handle is dropped, which
//! waits a little for it to finish what it is doing.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Tells the work it is asked to stop.
#[derive(Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    pub fn stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Returns once asked to stop.
    pub async fn wait(&self) {
        while !self.stopped() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sleeps for `d`, or less when asked to stop meanwhile.
    pub async fn sleep(&self, d: Duration) {
        let until = tokio::time::Instant::now() + d;
        while !self.stopped() && tokio::time::Instant::now() < until {
            tokio::time::sleep_until(until.min(tokio::time::Instant::now() + Duration::from_millis(50))).await;
        }
    }
}

/// A background thread; dropping it asks the work to stop and waits up to `within` (and a
/// second more) for it.
pub struct Background {
    stop: Stop,
    within: Duration,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Runs `work` on the thread `name`, at the requests' priority, or in the idle class when
    /// `idle` (see [`crate::priority::idle`]: work that nobody waits for, which then takes only
    /// CPU time that requests and the database leave).
    pub fn spawn<F, Fut>(name: &str, within: Duration, idle: bool, work: F) -> Result<Background, String>
    where
        F: FnOnce(Stop) -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let stop = Stop::default();
        let stopping = stop.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime of {name}: {e}"))?;
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                if idle {
                    crate::priority::idle();
                }
                runtime.block_on(work(stopping))
            })
            .map_err(|e| format!("cannot start the thread {name}: {e}"))?;
        Ok(Background { stop, within, thread: Some(thread) })
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.0.store(true, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + self.within + Duration::from_secs(1);
        while self.thread.as_ref().is_some_and(|t| !t.is_finished()) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if let Some(t) = self.thread.take().filter(|t| t.is_finished()) {
            let _ = t.join();
        }
    }
}
