//! How each gzip level and brotli quality trades CPU for bytes on real response bodies, to
//! choose the server's levels (src/http/compress.rs) from a measurement:
//!
//! ```sh
//! curl -s -H "Authorization: Bearer $TOKEN" "$API/subjects?page[size]=20" > w2.json
//! cargo run --release --example compression -- w2.json
//! ```
//!
//! For each setting: the compressed size as a share of the original, and the time per body
//! (median of repeated runs) next to the time of the fastest setting.

use std::io::Write;
use std::time::Instant;

fn gzip(level: u32, body: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    e.write_all(body).expect("write to a Vec");
    e.finish().expect("finish a Vec")
}

fn brotli(quality: u32, body: &[u8]) -> Vec<u8> {
    let mut e = brotli::CompressorWriter::new(Vec::new(), 4096, quality, 20);
    e.write_all(body).expect("write to a Vec");
    e.into_inner()
}

/// Median microseconds of `f` over enough runs to take about half a second.
fn time(f: impl Fn() -> usize) -> f64 {
    let once = Instant::now();
    f();
    let runs = ((0.5 / once.elapsed().as_secs_f64().max(1e-6)) as usize).clamp(5, 2000);
    let mut samples: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: compression FILE... (response bodies saved with curl)");
        std::process::exit(2);
    }
    for file in files {
        let body = std::fs::read(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        println!("{file}: {} bytes", body.len());
        println!("| coding | size | share | µs per body |");
        println!("|---|---:|---:|---:|");
        for level in [1, 2, 4, 6, 9] {
            let size = gzip(level, &body).len();
            let us = time(|| gzip(level, &body).len());
            println!("| gzip {level} | {size} | {:.1} % | {us:.0} |", 100.0 * size as f64 / body.len() as f64);
        }
        for quality in [0, 1, 2, 3, 4, 5, 6, 9] {
            let size = brotli(quality, &body).len();
            let us = time(|| brotli(quality, &body).len());
            println!("| br {quality} | {size} | {:.1} % | {us:.0} |", 100.0 * size as f64 / body.len() as f64);
        }
    }
}
