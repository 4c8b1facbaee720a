//! The access log: one line per request, with the route's template (never the raw path or the
//! query), the status, the duration, the bytes of the body sent and the name of the caller's
//! token (never the token, never a body).
//!
//! Lines are formatted on the request's thread into a shared buffer; a thread of the log's own
//! writes the buffer out in one write every 100 ms (sooner past 64 KiB), so that logging costs
//! no system call per request. [`AccessLog::flush`] writes what is pending at once (the server
//! calls it when it stops), and so does dropping the log.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use warp::http::Method;

use crate::tokens::Caller;
use warp::reply::Response;
use warp::Filter;

/// The route a request took, as the access log shows it: `/v1/subjects/{id}/chapters`.
#[derive(Debug, Clone, Copy)]
pub enum Template {
    Fixed(&'static str),
    Collection(&'static str),
    Item(&'static str),
    Related(&'static str, &'static str),
    Relationship(&'static str, &'static str),
}

impl Template {
    fn push(&self, line: &mut Vec<u8>) {
        let parts: [&str; 4] = match *self {
            Template::Fixed(path) => [path, "", "", ""],
            Template::Collection(t) => ["/v1/", t, "", ""],
            Template::Item(t) => ["/v1/", t, "/{id}", ""],
            Template::Related(t, rel) => ["/v1/", t, "/{id}/", rel],
            Template::Relationship(t, rel) => ["/v1/", t, "/{id}/relationships/", rel],
        };
        for part in parts {
            line.extend_from_slice(part.as_bytes());
        }
    }
}

/// `r` marked, for the access log, with the route it took (`None`: a path that names nothing)
/// and the caller (`None`: refused or unauthenticated). Only when the log is on (`on`):
/// extensions are a map allocated on first insert, and nothing else reads these.
pub fn marked(mut r: Response, on: bool, template: Option<Template>, caller: Option<Caller>) -> Response {
    if on {
        if let Some(template) = template {
            r.extensions_mut().insert(template);
        }
        if let Some(caller) = caller {
            r.extensions_mut().insert(caller);
        }
    }
    r
}

/// Batches are written at least this often.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// ... and sooner when this much is pending.
const FLUSH_AT: usize = 64 << 10;
/// Lines beyond this much pending (a sink that does not keep up) are dropped and counted.
const MAX_PENDING: usize = 16 << 20;

pub struct AccessLog {
    shared: Arc<Shared>,
    writer: Option<std::thread::JoinHandle<()>>,
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
    pub fn stderr() -> Arc<AccessLog> {
        Arc::new(AccessLog::new(Box::new(std::io::stderr())))
    }

    /// A log written to `sink` by a thread of its own.
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
        AccessLog { shared, writer }
    }

    /// Records one answered request. The line is formatted into the pending buffer under its
    /// lock, without allocating: most of its cost is here.
    pub fn record(&self, method: &Method, r: &Response, took: Duration) {
        let template = r.extensions().get::<Template>();
        // The caller's token name, which authentication puts into the response's extensions.
        let name = r.extensions().get::<Caller>().map_or("-", |c| &*c.name);
        let bytes = http_body::Body::size_hint(r.body()).exact();
        let ms = crate::time::now_ms();
        let micros = took.as_micros() as u64;
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
        digits(buf, ms.rem_euclid(1000) as u64, 3);
        buf.extend_from_slice(b"Z [INFO] access method=");
        value(buf, method.as_str());
        buf.extend_from_slice(b" route=");
        match template {
            Some(t) => t.push(buf),
            None => buf.push(b'-'),
        }
        buf.extend_from_slice(b" status=");
        digits(buf, u64::from(r.status().as_u16()), 1);
        buf.extend_from_slice(b" ms=");
        digits(buf, micros / 1000, 1);
        buf.push(b'.');
        digits(buf, micros % 1000, 3);
        buf.extend_from_slice(b" bytes=");
        match bytes {
            Some(n) => digits(buf, n, 1),
            None => buf.push(b'-'),
        }
        buf.extend_from_slice(b" caller=");
        value(buf, name);
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

/// `v` as a logfmt value: as it is, or quoted when it holds a space, a quote or `=`.
fn value(line: &mut Vec<u8>, v: &str) {
    if !v.is_empty() && !v.bytes().any(|b| b <= b' ' || b == b'"' || b == b'=' || b == 0x7f) {
        line.extend_from_slice(v.as_bytes());
    } else {
        let _ = write!(line, "{v:?}");
    }
}

/// `n` in decimal, zero-padded to at least `width` digits.
fn digits(line: &mut Vec<u8>, mut n: u64, width: usize) {
    let mut text = [b'0'; 20];
    let mut start = text.len();
    while n > 0 || text.len() - start < width {
        start -= 1;
        text[start] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    line.extend_from_slice(&text[start..]);
}

/// `inner` with each answer recorded in `log` (when there is one).
pub fn logged<F>(
    inner: F,
    log: Option<Arc<AccessLog>>,
) -> impl Filter<Extract = (Response,), Error = std::convert::Infallible> + Clone
where
    F: Filter<Extract = (Response,), Error = std::convert::Infallible> + Clone + Send + Sync + 'static,
{
    let on = log.is_some();
    warp::any().map(move || on.then(Instant::now)).and(warp::method()).and(inner).map(
        move |start: Option<Instant>, method: Method, r: Response| {
            if let (Some(log), Some(start)) = (&log, start) {
                log.record(&method, &r, start.elapsed());
            }
            r
        },
    )
}

#[cfg(test)]
mod tests {
    use super::{digits, value};

    fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut line = Vec::new();
        f(&mut line);
        String::from_utf8(line).unwrap()
    }

    #[test]
    fn numbers_are_written_in_decimal_padded_to_their_width() {
        assert_eq!(text(|l| digits(l, 0, 1)), "0");
        assert_eq!(text(|l| digits(l, 7, 3)), "007");
        assert_eq!(text(|l| digits(l, 1234, 3)), "1234");
        assert_eq!(text(|l| digits(l, u64::MAX, 1)), u64::MAX.to_string());
    }

    #[test]
    fn values_with_spaces_quotes_or_equals_signs_are_quoted() {
        assert_eq!(text(|l| value(l, "config")), "config");
        assert_eq!(text(|l| value(l, "a b")), r#""a b""#);
        assert_eq!(text(|l| value(l, "k=v")), r#""k=v""#);
        assert_eq!(text(|l| value(l, "say \"x\"\n")), r#""say \"x\"\n""#);
        assert_eq!(text(|l| value(l, "")), r#""""#);
    }
}
