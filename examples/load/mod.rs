#![allow(dead_code)] // Each example uses part of it.

//! What the load examples share: times, and subjects created at a steady rate over a few
//! keep-alive connections, with W4's bodies.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Milliseconds of an RFC 3339 UTC time with milliseconds (`2026-01-01T00:00:00.000Z`).
pub fn parse_ms(s: &[u8]) -> Option<i64> {
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

/// The Content-Length of an HTTP head (0 when it has none).
pub fn content_length(head: &[u8]) -> usize {
    String::from_utf8_lossy(head)
        .to_ascii_lowercase()
        .lines()
        .find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0)
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Creates subjects at `rate` per second for `seconds` over a few keep-alive connections;
/// returns how many were created.
pub async fn write(addr: String, token: String, module: String, rate: u64, seconds: u64) -> u64 {
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
                        let len = content_length(&got[..h]);
                        if got.len() >= h + 4 + len {
                            if got.starts_with(b"HTTP/1.1 201") {
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
pub fn memory(pid: &str) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |name: &str| {
        status.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
    };
    (kb("VmHWM:").unwrap_or(0.0) / 1024.0, kb("RssAnon:").unwrap_or(0.0) / 1024.0)
}
