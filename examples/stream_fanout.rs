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
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "load/mod.rs"]
mod load;
use load::{find, memory, now_ms, parse_ms, write};

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
