//! What an operator watches: counters, gauges and histograms kept in memory by the parts of the
//! server they describe, and written in Prometheus' text format for `GET /metrics` on the
//! address of `--metrics-listen` (see [`serve`]), never on the API's port.
//!
//! Labels hold only what has few values: a route's template (never a path, an id or a query),
//! a method, a status, a kind of work. The figures are process-wide (one server runs per
//! process); the request figures are kept only while metrics are served ([`enable`]), so that
//! a server without them does no work for them.

mod serve;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{LazyLock, RwLock};
use std::time::Duration;

use warp::http::Method;

use crate::http::access::Template;

pub use serve::serve;

static ON: AtomicBool = AtomicBool::new(false);

/// Keeps the request figures from now on (they cost every request a little).
pub fn enable() {
    ON.store(true, Relaxed);
}

/// Whether the request figures are kept.
pub fn enabled() -> bool {
    ON.load(Relaxed)
}

/// Every figure of the process.
pub static M: LazyLock<Metrics> = LazyLock::new(Metrics::default);

pub struct Counter(AtomicU64);

impl Counter {
    pub const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }

    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

impl Default for Counter {
    fn default() -> Counter {
        Counter::new()
    }
}

#[derive(Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    pub fn set(&self, v: i64) {
        self.0.store(v, Relaxed);
    }

    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Relaxed);
    }

    pub fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

/// Upper bounds of the buckets of durations, in seconds.
pub const SECONDS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Upper bounds of the buckets of counts (writes in a commit group).
pub const COUNTS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];

/// Observations counted into buckets: `bounds` are inclusive upper bounds; the sum is kept in
/// millionths (microseconds, for durations).
pub struct Histogram {
    bounds: &'static [f64],
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_micro: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_micro: AtomicU64::new(0),
        }
    }

    pub fn seconds() -> Histogram {
        Histogram::new(SECONDS)
    }

    pub fn observe(&self, v: f64) {
        // Only the first bucket that holds it: the cumulative counts are made when written out.
        if let Some(i) = self.bounds.iter().position(|&b| v <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_micro.fetch_add((v * 1e6) as u64, Relaxed);
    }

    pub fn time(&self, took: Duration) {
        self.observe(took.as_secs_f64());
    }

    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (bound, n) in self.bounds.iter().zip(self.buckets.iter()) {
            cumulative += n.load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum_micro.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count{braces} {count}");
    }
}

/// What the database is asked to do, as the figures of its waits and queries tell it apart.
#[derive(Clone, Copy)]
pub enum Work {
    /// A bounded read (a page, a resource).
    Read,
    /// A read that may take long (a count, a sort, a search).
    Scan,
    Write,
}

const WORKS: [(Work, &str); 3] = [(Work::Read, "read"), (Work::Scan, "scan"), (Work::Write, "write")];

/// Why a connection was closed before a request of it was answered.
#[derive(Clone, Copy)]
pub enum Refused {
    /// To make room for a new one, at `--max-connections`.
    ForRoom,
    /// Its TLS handshake failed or took longer than a head may.
    Handshake,
}

/// The methods counted by name; others are counted as `other`.
const METHODS: [&str; 8] = ["GET", "HEAD", "POST", "PATCH", "PUT", "DELETE", "OPTIONS", "other"];

fn method_index(m: &Method) -> usize {
    METHODS.iter().position(|&name| name == m.as_str()).unwrap_or(METHODS.len() - 1)
}

/// A route's template, a method's index in [`METHODS`], a status.
type RequestKey = (Option<Template>, usize, u16);

#[derive(Default)]
pub struct Metrics {
    requests: RwLock<HashMap<RequestKey, Counter>>,
    durations: RwLock<HashMap<Option<Template>, Histogram>>,
    pub compressed: Counter,
    pub not_modified: Counter,
    pub connections_open: Gauge,
    pub connections_accepted: Counter,
    refused: [Counter; 2],
    pub accept_errors: Counter,
    db_wait: [Histogram; 3],
    db_query: [Histogram; 3],
    /// Writes waiting for SQLite's writer.
    pub sqlite_queue: Gauge,
    pub sqlite_group: Counts,
    pub sqlite_commit: Histogram,
    pub sqlite_sync: Histogram,
    pub sqlite_checkpoint: Histogram,
    pub search_folded: Counter,
    /// When the search changes were last folded (ms since the epoch; 0: never).
    pub search_folded_at: Gauge,
    pub backups_ok: Counter,
    pub backups_failed: Counter,
    /// When the last scheduled backup succeeded (ms since the epoch; 0: none yet).
    pub backup_at: Gauge,
    pub auth_throttled: Counter,
    pub stream_events: Counter,
    pub webhook_delivered: Counter,
    pub webhook_failed: Counter,
    /// 1 while deliveries wait for requests that saturate the machine.
    pub webhook_waiting: Gauge,
    pub follow_applied: Counter,
}

impl Metrics {
    /// One answered request (only while [`enabled`]).
    pub fn request(&self, template: Option<Template>, method: &Method, status: u16, took: Duration, compressed: bool) {
        let key = (template, method_index(method), status);
        let counted = self.requests.read().unwrap_or_else(|e| e.into_inner()).get(&key).map(Counter::inc).is_some();
        if !counted {
            self.requests.write().unwrap_or_else(|e| e.into_inner()).entry(key).or_default().inc();
        }
        let timed =
            self.durations.read().unwrap_or_else(|e| e.into_inner()).get(&template).map(|h| h.time(took)).is_some();
        if !timed {
            self.durations
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .entry(template)
                .or_insert_with(Histogram::seconds)
                .time(took);
        }
        if compressed {
            self.compressed.inc();
        }
        if status == 304 {
            self.not_modified.inc();
        }
    }

    pub fn refused(&self, why: Refused) {
        self.refused[why as usize].inc();
    }

    /// How long a piece of database work waited for a connection (or the writer), and how
    /// long it then ran.
    pub fn db(&self, work: Work, waited: Duration, ran: Duration) {
        self.db_wait[work as usize].time(waited);
        self.db_query[work as usize].time(ran);
    }
}

impl Default for Histogram {
    /// Of durations.
    fn default() -> Histogram {
        Histogram::seconds()
    }
}

/// A histogram of counts.
pub struct Counts(pub Histogram);

impl Default for Counts {
    fn default() -> Counts {
        Counts(Histogram::new(COUNTS))
    }
}

/// What only the running server knows, read when the figures are written out.
#[derive(Default)]
pub struct Now {
    pub streams_open: i64,
    pub throttled_addresses: i64,
    pub follow_lag_seconds: Option<f64>,
    /// PostgreSQL's pool (open, idle, most), `None` on SQLite: only the database's engine's
    /// figures are written.
    pub pool: Option<(u32, u32, u32)>,
}

/// The whole text of a scrape.
pub fn render(now: &Now) -> String {
    let m = &*M;
    let mut out = String::with_capacity(16 * 1024);
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    // `-`, as in the access log: refused before routing (401, 429), or a path that names nothing.
    let template = |t: &Option<Template>| t.map_or_else(|| "-".to_owned(), |t| t.to_string());

    family(
        &mut out,
        "coursed_http_requests_total",
        "counter",
        "Requests answered, by route template, method and status.",
    );
    let mut rows: Vec<_> = {
        let requests = m.requests.read().unwrap_or_else(|e| e.into_inner());
        requests.iter().map(|((t, method, status), n)| (template(t), METHODS[*method], *status, n.get())).collect()
    };
    rows.sort();
    for (route, method, status, n) in rows {
        let _ = writeln!(
            out,
            "coursed_http_requests_total{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {n}"
        );
    }
    family(
        &mut out,
        "coursed_http_request_duration_seconds",
        "histogram",
        "Time from a request's arrival to its answer's head, by route template.",
    );
    {
        let durations = m.durations.read().unwrap_or_else(|e| e.into_inner());
        let mut routes: Vec<_> = durations.iter().map(|(t, h)| (template(t), h)).collect();
        routes.sort_by(|a, b| a.0.cmp(&b.0));
        for (route, h) in routes {
            h.write(&mut out, "coursed_http_request_duration_seconds", &format!("route=\"{route}\""));
        }
    }
    let counter = |out: &mut String, name: &str, help: &str, v: u64| {
        family(out, name, "counter", help);
        let _ = writeln!(out, "{name} {v}");
    };
    counter(
        &mut out,
        "coursed_http_responses_compressed_total",
        "Responses sent compressed (brotli or gzip).",
        m.compressed.get(),
    );
    counter(
        &mut out,
        "coursed_http_responses_not_modified_total",
        "304 Not Modified answers to conditional requests.",
        m.not_modified.get(),
    );
    counter(&mut out, "coursed_http_connections_accepted_total", "Connections accepted.", m.connections_accepted.get());
    counter(
        &mut out,
        "coursed_http_accept_errors_total",
        "Connections the system could not accept (out of descriptors, say).",
        m.accept_errors.get(),
    );
    let _ = writeln!(
        out,
        "# HELP coursed_http_connections_refused_total Connections closed before a request was answered: to make room at --max-connections, or a TLS handshake that failed or took too long.\n\
         # TYPE coursed_http_connections_refused_total counter\n\
         coursed_http_connections_refused_total{{reason=\"room\"}} {}\n\
         coursed_http_connections_refused_total{{reason=\"tls_handshake\"}} {}",
        m.refused[Refused::ForRoom as usize].get(),
        m.refused[Refused::Handshake as usize].get()
    );
    let _ = writeln!(
        out,
        "# HELP coursed_http_connections_open Connections open now.\n# TYPE coursed_http_connections_open gauge\ncoursed_http_connections_open {}",
        m.connections_open.get()
    );

    family(
        &mut out,
        "coursed_db_wait_seconds",
        "histogram",
        "How long database work waited for a connection (or SQLite's writer), by kind of work.",
    );
    for (work, name) in WORKS {
        m.db_wait[work as usize].write(&mut out, "coursed_db_wait_seconds", &format!("work=\"{name}\""));
    }
    family(
        &mut out,
        "coursed_db_query_seconds",
        "histogram",
        "How long database work ran once it had its connection, by kind of work.",
    );
    for (work, name) in WORKS {
        m.db_query[work as usize].write(&mut out, "coursed_db_query_seconds", &format!("work=\"{name}\""));
    }
    let gauge = |out: &mut String, name: &str, help: &str, v: String| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    };
    if let Some((open, idle, max)) = now.pool {
        let _ = writeln!(
            out,
            "# HELP coursed_postgres_pool_connections PostgreSQL connections of the pool, by state.\n\
         # TYPE coursed_postgres_pool_connections gauge\n\
         coursed_postgres_pool_connections{{state=\"busy\"}} {}\n\
         coursed_postgres_pool_connections{{state=\"idle\"}} {}",
            open.saturating_sub(idle),
            idle
        );
        gauge(
            &mut out,
            "coursed_postgres_pool_max_connections",
            "The most connections PostgreSQL's pool opens.",
            max.to_string(),
        );
        counter(
            &mut out,
            "coursed_search_changes_folded_total",
            "Search changes folded into the word counts.",
            m.search_folded.get(),
        );
        let folded_at = m.search_folded_at.get();
        gauge(
            &mut out,
            "coursed_search_fold_lag_seconds",
            "Time since the search changes were last folded into the word counts (0 before the first fold).",
            if folded_at == 0 { "0".into() } else { seconds(crate::time::now_ms() - folded_at) },
        );
    } else {
        gauge(
            &mut out,
            "coursed_sqlite_writer_queue",
            "Writes waiting for SQLite's writer.",
            m.sqlite_queue.get().to_string(),
        );
        family(
            &mut out,
            "coursed_sqlite_write_group_writes",
            "histogram",
            "Writes committed together by one commit of SQLite's writer.",
        );
        m.sqlite_group.0.write(&mut out, "coursed_sqlite_write_group_writes", "");
        family(
            &mut out,
            "coursed_sqlite_commit_seconds",
            "histogram",
            "Time of each group of SQLite's writer: its writes and their commit.",
        );
        m.sqlite_commit.write(&mut out, "coursed_sqlite_commit_seconds", "");
        family(
            &mut out,
            "coursed_sqlite_wal_sync_seconds",
            "histogram",
            "Time of each sync of the write-ahead log (with --durability full), for one group or more.",
        );
        m.sqlite_sync.write(&mut out, "coursed_sqlite_wal_sync_seconds", "");
        family(
            &mut out,
            "coursed_sqlite_checkpoint_seconds",
            "histogram",
            "Time of each checkpoint of SQLite's write-ahead log.",
        );
        m.sqlite_checkpoint.write(&mut out, "coursed_sqlite_checkpoint_seconds", "");
    }
    counter(&mut out, "coursed_backups_total", "Scheduled backups written.", m.backups_ok.get());
    counter(&mut out, "coursed_backup_failures_total", "Scheduled backups that failed.", m.backups_failed.get());
    gauge(
        &mut out,
        "coursed_backup_last_success_timestamp_seconds",
        "When the last scheduled backup succeeded, in seconds since the Unix epoch (0: none yet).",
        seconds(m.backup_at.get()),
    );
    counter(
        &mut out,
        "coursed_auth_throttled_total",
        "Requests refused (429) because their address failed to authenticate too often.",
        m.auth_throttled.get(),
    );
    gauge(
        &mut out,
        "coursed_auth_throttled_addresses",
        "Addresses refused now for failing to authenticate too often.",
        now.throttled_addresses.to_string(),
    );
    gauge(
        &mut out,
        "coursed_feed_streams_open",
        "Live streams of the change feed open now.",
        now.streams_open.to_string(),
    );
    counter(&mut out, "coursed_feed_stream_events_total", "Revisions sent on live streams.", m.stream_events.get());
    counter(
        &mut out,
        "coursed_webhook_deliveries_total",
        "Webhook deliveries answered 2xx.",
        m.webhook_delivered.get(),
    );
    counter(
        &mut out,
        "coursed_webhook_delivery_failures_total",
        "Webhook deliveries that failed (an answer other than 2xx, a timeout, no connection).",
        m.webhook_failed.get(),
    );
    gauge(
        &mut out,
        "coursed_webhook_deliveries_waiting",
        "1 while deliveries wait because requests saturate the machine (for up to 60 s), else 0.",
        m.webhook_waiting.get().to_string(),
    );
    counter(
        &mut out,
        "coursed_follow_revisions_applied_total",
        "Revisions of the followed catalogue applied here.",
        m.follow_applied.get(),
    );
    if let Some(lag) = now.follow_lag_seconds {
        gauge(
            &mut out,
            "coursed_follow_lag_seconds",
            "How far behind the followed catalogue this one is.",
            lag.to_string(),
        );
    }
    out
}

/// Milliseconds as seconds, in decimal.
fn seconds(ms: i64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}
