//! coursed's storage alone: the writes of W4 (a subject created) or W5 (a subject's title
//! changed) made straight through the store, with no HTTP, no JSON and no rendering: the same
//! rows, search words and revisions, the same writer with its group commit and its flush to
//! disk, the same durability as `coursed serve` by default. It is the SQLite twin of
//! `bench/pgalone.py` (see `bench/sqlitealone.py`, which runs it in the rounds of
//! `bench/bench.py`): coursed on SQLite cannot write faster than its storage does alone.
//!
//! ```sh
//! cargo run --release --example store_alone -- DATABASE W4|W5 CLIENTS WARMUP_S SECONDS
//! ```
//!
//! `CLIENTS` tasks write as fast as they can, as wrk's connections send (each write waits for
//! its answer, as a connection waits for its response). The payloads are taken from the
//! catalogue before the clock starts, their words computed then: 4,096 subjects' texts (W4
//! links each to its module, as W4's requests do) or titles (W5, each written to a random
//! subject). Prints one JSON line: rows written in the measured seconds, the seconds, the
//! process's CPU seconds, and the writes the writer thread committed and the seconds it was busy
//! committing them (its capacity: what it would write if never idle, waiting for clients).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coursed::jsonapi::body::{self, Changes, Mode};
use coursed::resources::ResourceType;
use coursed::store::{write, Db, Durability, Options, WriteContext};
use serde_json::json;

const PAYLOADS: usize = 4096;

/// What the writer thread reports of each group it commits (its trace line `committed a group
/// of N writes in T µs`): the writes and the time it was busy, so that its capacity (writes a
/// second of busy writer, flushes to disk overlapped as they are by design) can be told apart
/// from what the clients' waiting lets through. Everything else logged is dropped.
struct WriterTrace {
    grouped: AtomicU64,
    busy_us: AtomicU64,
}

static WRITER: WriterTrace = WriterTrace { grouped: AtomicU64::new(0), busy_us: AtomicU64::new(0) };

impl log::Log for WriterTrace {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target() == "coursed::store::sqlite::writer"
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let text = record.args().to_string();
        let Some(rest) = text.strip_prefix("committed a group of ") else { return };
        let mut words = rest.split_whitespace();
        let n = words.next().and_then(|w| w.parse::<u64>().ok());
        let us = words.nth(2).and_then(|w| w.parse::<u64>().ok());
        if let (Some(n), Some(us)) = (n, us) {
            self.grouped.fetch_add(n, Ordering::Relaxed);
            self.busy_us.fetch_add(us, Ordering::Relaxed);
        }
    }

    fn flush(&self) {}
}

/// The process's user and system CPU seconds (from /proc, in clock ticks of 1/100 s).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// A small deterministic generator (xorshift), so that runs write the same.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// A subject's title, introduction, content, `available_for_courses` and module.
type Text = (String, String, String, bool, Option<String>);

/// Texts of up to [`PAYLOADS`] subjects of the catalogue, and the ids of every subject.
fn catalogue(path: &str) -> (Vec<Text>, Vec<String>) {
    let c = rusqlite::Connection::open(path).expect("open the database");
    let mut texts = c
        .prepare(
            "SELECT title, introduction, content, available_for_courses, module_id FROM subjects \
             ORDER BY substr(id, 25) LIMIT ?",
        )
        .unwrap();
    let texts = texts
        .query_map([PAYLOADS as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, i64>(3)? != 0, r.get(4)?)))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let mut ids = c.prepare("SELECT id FROM subjects").unwrap();
    let ids = ids.query_map([], |r| r.get(0)).unwrap().collect::<Result<Vec<String>, _>>().unwrap();
    (texts, ids)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [database, workload, clients, warmup, seconds] = args.as_slice() else {
        eprintln!("usage: store_alone DATABASE W4|W5 CLIENTS WARMUP_S SECONDS");
        std::process::exit(2);
    };
    let (clients, warmup, seconds): (usize, f64, f64) =
        (clients.parse().unwrap(), warmup.parse().unwrap(), seconds.parse().unwrap());
    let rt: &'static ResourceType = coursed::resources::by_name("subjects").unwrap();
    let (texts, ids) = catalogue(database);
    assert!(!texts.is_empty() && !ids.is_empty(), "the catalogue holds no subjects");
    let creating = match workload.as_str() {
        "W4" => true,
        "W5" => false,
        w => panic!("unknown workload {w}: W4 or W5"),
    };
    // What the requests' bodies become before they reach the store: words included.
    let payloads: Vec<Changes> = texts
        .iter()
        .map(|(title, introduction, content, available, module)| {
            let data = if creating {
                let module = module.as_ref().map_or(serde_json::Value::Null, |m| json!({"type": "modules", "id": m}));
                json!({"type": "subjects", "attributes": {"title": title, "introduction": introduction,
                       "content": content, "available_for_courses": available},
                       "relationships": {"module": {"data": module}}})
            } else {
                json!({"type": "subjects", "id": ids[0], "attributes": {"title": title}})
            };
            let mode = if creating { Mode::Create } else { Mode::Update(&ids[0]) };
            body::resource_data(rt, &data, mode).expect("a valid payload")
        })
        .collect();
    let (payloads, ids) = (Arc::new(payloads), Arc::new(ids));

    log::set_logger(&WRITER).expect("the only logger");
    log::set_max_level(log::LevelFilter::Trace);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async move {
        let opts = Options::new(database, Durability::Full);
        let db = tokio::task::spawn_blocking(move || Db::open(&opts)).await.unwrap().expect("open the store");
        let (written, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let mut tasks = Vec::new();
        for client in 0..clients {
            let (db, payloads, ids, written, stop) =
                (db.clone(), payloads.clone(), ids.clone(), written.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let ctx = WriteContext::system("store-alone");
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (client as u64 + 1));
                while !stop.load(Ordering::Relaxed) {
                    let (i, payloads) = (rng.below(payloads.len()), payloads.clone());
                    let done = if creating {
                        let atomicity = write::atomicity(&payloads[i]);
                        db.write_in(&ctx, atomicity, move |tx| write::create(tx, rt, &payloads[i]).map(drop)).await
                    } else {
                        let id = ids[rng.below(ids.len())].clone();
                        let atomicity = write::atomicity(&payloads[i]);
                        db.write_in(&ctx, atomicity, move |tx| write::update(tx, rt, &id, &payloads[i]).map(drop)).await
                    };
                    done.expect("a write");
                    written.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        tokio::time::sleep(Duration::from_secs_f64(warmup)).await;
        let (n0, cpu0, t0) = (written.load(Ordering::Relaxed), cpu_seconds(), Instant::now());
        let (g0, b0) = (WRITER.grouped.load(Ordering::Relaxed), WRITER.busy_us.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        let (n1, cpu1, elapsed) = (written.load(Ordering::Relaxed), cpu_seconds(), t0.elapsed().as_secs_f64());
        let (g1, b1) = (WRITER.grouped.load(Ordering::Relaxed), WRITER.busy_us.load(Ordering::Relaxed));
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        assert!(g1 > g0, "the writer reported no group (its trace message changed?)");
        println!(
            r#"{{"rows":{},"seconds":{elapsed:.3},"cpu_s":{:.3},"writer_rows":{},"writer_busy_s":{:.3}}}"#,
            n1 - n0,
            cpu1 - cpu0,
            g1 - g0,
            (b1 - b0) as f64 / 1e6
        );
    });
}
