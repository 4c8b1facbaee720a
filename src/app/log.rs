//! A log of lines written by a thread of its own (the access log; the web layer's `access.rs`
//! says what its lines hold): lines are appended on the request's
//! thread to a shared buffer, which the log's thread writes out in one write every 100 ms
//! (sooner past 64 KiB), so that logging costs no system call per request. [`AccessLog::flush`]
//! writes what is pending at once (the server calls it when it stops), and so does dropping
//! the log.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Batches are written at least this often.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// ... and sooner when this much is pending.
const FLUSH_AT: usize = 64 << 10;
/// Lines beyond this much pending (a sink that does not keep up) are dropped and counted.
const MAX_PENDING: usize = 16 << 20;

pub struct AccessLog {
    shared: Arc<Shared>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// Whether the health checks (`/healthz`, `/readyz`) are logged: a load balancer sends one
    /// every few seconds per server, which would bury the requests of clients.
    pub health_checks: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    sink: Mutex<Box<dyn Write + Send>>,
}

#[derive(Default)]
struct Pending {
    buf: Vec<u8>,
    dropped: u64,
    closed: bool,
    /// The second of the last line, and its time up to the second (`2026-11-23T11:02:16.`):
    /// formatting a time is the dearest part of a line, and lines share their seconds.
    second: i64,
    second_text: String,
}

impl AccessLog {
    /// A log written to stderr, beside the other logs.
    pub fn stderr(health_checks: bool) -> Arc<AccessLog> {
        let mut log = AccessLog::new(Box::new(std::io::stderr()));
        log.health_checks = health_checks;
        Arc::new(log)
    }

    /// A log written to `sink` by a thread of its own, without the health checks.
    pub fn new(sink: Box<dyn Write + Send>) -> AccessLog {
        let shared = Arc::new(Shared { pending: Mutex::default(), wake: Condvar::new(), sink: Mutex::new(sink) });
        let writing = shared.clone();
        let writer = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || writing.run())
            .map_err(|e| {
                log::error!("cannot start the access log's thread ({e}); lines are written when the server stops")
            })
            .ok();
        AccessLog { shared, writer, health_checks: false }
    }

    /// Appends one line: the time `ms` and `[INFO] access `, what `write` writes, and a newline.
    /// The line is written into the pending buffer under its lock, without allocating: most of
    /// a line's cost is here. A line beyond what the sink keeps up with is dropped, and counted.
    pub fn line(&self, ms: i64, write: impl FnOnce(&mut Vec<u8>)) {
        let mut pending = self.shared.lock();
        if pending.buf.len() > MAX_PENDING {
            pending.dropped += 1;
            return;
        }
        let was_empty = pending.buf.is_empty();
        if ms.div_euclid(1000) != pending.second || pending.second_text.is_empty() {
            pending.second = ms.div_euclid(1000);
            pending.second_text = crate::time::format_ms(ms)[..20].to_owned();
        }
        let Pending { buf, second_text, .. } = &mut *pending;
        let before = buf.len();
        buf.extend_from_slice(second_text.as_bytes());
        let millis = ms.rem_euclid(1000);
        buf.extend_from_slice(&[
            b'0' + (millis / 100) as u8,
            b'0' + (millis / 10 % 10) as u8,
            b'0' + (millis % 10) as u8,
        ]);
        buf.extend_from_slice(b"Z [INFO] access ");
        write(buf);
        buf.push(b'\n');
        let full = buf.len() >= FLUSH_AT && before < FLUSH_AT;
        drop(pending);
        if was_empty || full {
            self.shared.wake.notify_one();
        }
    }

    /// Writes every line recorded so far.
    pub fn flush(&self) {
        let (batch, dropped) = {
            let mut pending = self.shared.lock();
            (std::mem::take(&mut pending.buf), std::mem::take(&mut pending.dropped))
        };
        self.shared.write(&batch, dropped);
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
        match self.writer.take() {
            Some(writer) => {
                let _ = writer.join();
            }
            None => self.flush(),
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The writer thread: waits for a line, gathers more for [`FLUSH_EVERY`], writes the
    /// batch; until the log is dropped, when it writes what is left.
    fn run(&self) {
        let mut spare = Vec::new();
        let mut pending = self.lock();
        loop {
            while pending.buf.is_empty() && !pending.closed {
                pending = self.wake.wait(pending).unwrap_or_else(|e| e.into_inner());
            }
            let until = Instant::now() + FLUSH_EVERY;
            while pending.buf.len() < FLUSH_AT && !pending.closed {
                let Some(left) = until.checked_duration_since(Instant::now()) else { break };
                pending = self.wake.wait_timeout(pending, left).unwrap_or_else(|e| e.into_inner()).0;
            }
            let batch = std::mem::replace(&mut pending.buf, std::mem::take(&mut spare));
            let (dropped, closed) = (std::mem::take(&mut pending.dropped), pending.closed);
            drop(pending);
            self.write(&batch, dropped);
            spare = batch;
            spare.clear();
            if closed {
                return;
            }
            pending = self.lock();
        }
    }

    fn write(&self, batch: &[u8], dropped: u64) {
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        let mut written = sink.write_all(batch);
        if dropped > 0 {
            let note = format!(
                "{} [WARN] access log: {dropped} lines dropped (the log's output did not keep up)\n",
                crate::time::format_ms(crate::time::now_ms())
            );
            written = written.and_then(|()| sink.write_all(note.as_bytes()));
        }
        if let Err(e) = written.and_then(|()| sink.flush()) {
            log::warn!("cannot write the access log: {e}");
        }
    }
}
