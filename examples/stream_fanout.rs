//! The live stream under load: N subscribers on `GET /v1/revisions/stream` while subjects are
//! created at R per second (W4's bodies: 20-80 characters of title, 200-500 of introduction,
//! 1-5 KB of content), measuring how long each revision takes from its commit (`at`) to each
//! subscriber, how many arrive, and the server's memory. Run by `bench/stream.sh`:
//!
//! ```sh
//! cargo run --release --example stream_fanout -- ADDR TOKEN MODULE_ID SUBSCRIBERS RATE SECONDS SERVER_PID
//! ```
//!
//! Prints one line: subscribers, rate, revisions written, deliveries expected and made, latency
//! p50/p99/max in ms, and the server's peak and current anonymous memory in MiB.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Milliseconds of an RFC 3339 UTC time with milliseconds (`2026-01-01T00:00:00.000Z`).
fn parse_ms(s: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(s.get(..24)?).ok()?;
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000) + ms)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One subscriber: reads its stream and notes each revision's delay.
async fn subscribe(addr: String, token: String, latencies: Arc<Mutex<Vec<u32>>>, stop: Arc<AtomicU64>) {
    let Ok(mut s) = TcpStream::connect(&addr).await else { return };
    let req = format!(
        "GET /v1/revisions/stream HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 1 << 16];
    let mut pending: Vec<u8> = Vec::new();
    let mut mine = Vec::new();
    while stop.load(Ordering::Relaxed) == 0 {
        let n = match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => n,
            Err(_) => continue,
        };
        let got = now_ms();
        pending.extend_from_slice(&buf[..n]);
        // Each event's `at` (a revision's commit time) is the only `"at":"` in it.
        let mut used = 0;
        while let Some(i) = find(&pending[used..], b"\"at\":\"") {
            let start = used + i + 6;
            if pending.len() < start + 24 {
                break;
            }
            if let Some(at) = parse_ms(&pending[start..start + 24]) {
                mine.push((got - at).max(0) as u32);
            }
            used = start + 24;
        }
        pending.drain(..used);
    }
    latencies.lock().unwrap().extend(mine);
}

/// Creates subjects at `rate` per second for `seconds` over a few keep-alive connections;
/// returns how many were created.
async fn write(addr: String, token: String, module: String, rate: u64, seconds: u64) -> u64 {
    let made = Arc::new(AtomicU64::new(0));
    let writers = 4u64;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (addr, token, module, made) = (addr.clone(), token.clone(), module.clone(), made.clone());
        tasks.push(tokio::spawn(async move {
            let Ok(mut s) = TcpStream::connect(&addr).await else { return };
            let every = Duration::from_secs_f64(writers as f64 / rate as f64);
            let mut tick = tokio::time::interval(every);
            let end = Instant::now() + Duration::from_secs(seconds);
            let mut i = w;
            let mut buf = vec![0u8; 1 << 16];
            while Instant::now() < end {
                tick.tick().await;
                i += writers;
                let content = "lorem ipsum dolor sit amet ".repeat(40 + (i % 150) as usize);
                let body = format!(
                    r#"{{"data":{{"type":"subjects","attributes":{{"title":"Fan-out {i}","introduction":"{}","content":"{content}"}},"relationships":{{"module":{{"data":{{"type":"modules","id":"{module}"}}}}}}}}}}"#,
                    "an introduction ".repeat(20)
                );
                let req = format!(
                    "POST /v1/subjects HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
                     Content-Type: application/vnd.api+json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                if s.write_all(req.as_bytes()).await.is_err() {
                    return;
                }
                // The response: a head with Content-Length, then that many bytes.
                let mut got: Vec<u8> = Vec::new();
                loop {
                    let Ok(n) = s.read(&mut buf).await else { return };
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    if let Some(h) = find(&got, b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&got[..h]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if got.len() >= h + 4 + len {
                            if head.starts_with("http/1.1 201") {
                                made.fetch_add(1, Ordering::Relaxed);
                            }
                            break;
                        }
                    }
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    made.load(Ordering::Relaxed)
}

/// (VmHWM, RssAnon) of `pid`, in MiB.
fn memory(pid: &str) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |name: &str| {
        status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
    };
    (kb("VmHWM:").unwrap_or(0.0) / 1024.0, kb("RssAnon:").unwrap_or(0.0) / 1024.0)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, token, module, subscribers, rate, seconds, pid] = &args[..] else {
        eprintln!("usage: stream_fanout ADDR TOKEN MODULE_ID SUBSCRIBERS RATE SECONDS SERVER_PID");
        std::process::exit(2);
    };
    let (subscribers, rate, seconds): (usize, u64, u64) =
        (subscribers.parse().unwrap(), rate.parse().unwrap(), seconds.parse().unwrap());
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicU64::new(0));
    let mut subs = Vec::new();
    for _ in 0..subscribers {
        subs.push(tokio::spawn(subscribe(addr.clone(), token.clone(), latencies.clone(), stop.clone())));
    }
    // Every stream open before the first write.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let made = write(addr.clone(), token.clone(), module.clone(), rate, seconds).await;
    // Time for the last revisions to arrive.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(1, Ordering::Relaxed);
    for s in subs {
        let _ = s.await;
    }
    let mut l = std::mem::take(&mut *latencies.lock().unwrap());
    l.sort_unstable();
    let at = |q: f64| l.get(((l.len() as f64 * q) as usize).min(l.len().saturating_sub(1))).copied().unwrap_or(0);
    let (peak, now) = memory(pid);
    println!(
        "subscribers {subscribers} rate {rate}/s written {made} deliveries {}/{} latency p50 {} ms p99 {} ms max {} ms \
         server peak {peak:.1} MiB anon {now:.1} MiB",
        l.len(),
        made as usize * subscribers,
        at(0.5),
        at(0.99),
        l.last().copied().unwrap_or(0)
    );
}
