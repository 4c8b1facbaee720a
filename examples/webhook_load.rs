//! Webhooks under load: RECEIVERS local HTTP receivers, each registered as a webhook of the
//! database a running coursed serves (`coursed webhook add`), then subjects created at RATE per
//! second for SECONDS (W4's bodies; RATE 0: none, the receivers only take what comes, as while
//! bench/webhooks.py runs wrk, answering `took N` to each line on stdin). Measures each delivery's lag from its revision's commit (`at`)
//! to its receipt. Run by bench/webhooks.py:
//!
//! ```sh
//! cargo run --release --example webhook_load -- BIN DATABASE ADDR TOKEN MODULE_ID RECEIVERS RATE SECONDS
//! ```
//!
//! Prints one line: receivers, rate, revisions written, deliveries expected and made, lag
//! p50/p99/max in ms, and how long the deliveries took to drain after the last write.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[path = "load/mod.rs"]
mod load;
use load::{content_length, find, now_ms, parse_ms, write};

/// What the receivers took: the lag of each delivery, in ms.
type Lags = Arc<Mutex<Vec<u32>>>;

/// One keep-alive connection of a receiver: each request's body read, its `at` noted, 204.
async fn receive(mut s: TcpStream, lags: Lags) {
    let mut buf = vec![0u8; 1 << 16];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        // A head, then the body its Content-Length says.
        let (head_end, length) = loop {
            if let Some(h) = find(&pending, b"\r\n\r\n") {
                break (h + 4, content_length(&pending[..h]));
            }
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
            }
        };
        while pending.len() < head_end + length {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
            }
        }
        let got = now_ms();
        let body = &pending[head_end..head_end + length];
        if let Some(i) = find(body, b"\"at\":\"") {
            if let Some(at) = body.get(i + 6..).and_then(parse_ms) {
                lags.lock().unwrap().push((got - at).max(0) as u32);
            }
        }
        pending.drain(..head_end + length);
        if s.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await.is_err() {
            return;
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, bin, database, addr, token, module, receivers, rate, seconds] = &args[..] else {
        eprintln!("usage: webhook_load BIN DATABASE ADDR TOKEN MODULE_ID RECEIVERS RATE SECONDS");
        std::process::exit(2);
    };
    let (receivers, rate, seconds): (usize, u64, u64) =
        (receivers.parse().unwrap(), rate.parse().unwrap(), seconds.parse().unwrap());
    let lags: Lags = Arc::default();
    for _ in 0..receivers {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        let added = std::process::Command::new(bin)
            .args(["webhook", "add", "--database", database, "--url", &url])
            .output()
            .unwrap();
        assert!(added.status.success(), "webhook add: {}", String::from_utf8_lossy(&added.stderr));
        let lags = lags.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let _ = s.set_nodelay(true);
                tokio::spawn(receive(s, lags.clone()));
            }
        });
    }
    println!("ready: {receivers} receivers");
    if rate == 0 {
        // Each line read on stdin is answered with how many deliveries were taken so far.
        let taken = lags.clone();
        std::thread::spawn(move || {
            for _ in std::io::stdin().lines().map_while(Result::ok) {
                println!("took {}", taken.lock().unwrap().len());
            }
        });
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let n = lags.lock().unwrap().len();
        println!("receivers {receivers} took {n} deliveries in {seconds} s");
        return;
    }
    let made = write(addr.clone(), token.clone(), module.clone(), rate, seconds).await;
    let expected = made as usize * receivers;
    let last_write = Instant::now();
    while lags.lock().unwrap().len() < expected && last_write.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let drained = last_write.elapsed();
    let mut l = std::mem::take(&mut *lags.lock().unwrap());
    l.sort_unstable();
    let at = |q: f64| l.get(((l.len() as f64 * q) as usize).min(l.len().saturating_sub(1))).copied().unwrap_or(0);
    println!(
        "receivers {receivers} rate {rate}/s written {made} ({:.0}/s) deliveries {}/{expected} lag p50 {} ms p99 {} ms \
         max {} ms drained {:.1} s after the last write",
        made as f64 / seconds as f64,
        l.len(),
        at(0.5),
        at(0.99),
        l.last().copied().unwrap_or(0),
        drained.as_secs_f64()
    );
}
