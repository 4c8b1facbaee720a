//! Response compression by `Accept-Encoding`: brotli or gzip, for bodies worth it.
//!
//! The levels were chosen by measuring pages of the benchmark's dataset (docs/performance.md,
//! "Compression", `cargo run --release --example compression`): gzip 2 takes about twice the
//! CPU of gzip 1 for a quarter fewer bytes, and past it each step saves a few bytes more for
//! much more CPU per request. At those levels gzip is as small as brotli and cheaper, so gzip
//! is sent when the client accepts both alike (browsers do); brotli when it prefers brotli.

use std::io::Write;

/// Bodies smaller than this go as they are: below a packet or two, compressing saves nothing
/// the client can feel.
pub const MIN_SIZE: usize = 1024;
/// gzip level (1 fastest, 9 smallest).
const GZIP_LEVEL: u32 = 2;
/// brotli quality (0 fastest, 11 smallest) and window (log2 bytes).
const BROTLI_QUALITY: u32 = 2;
const BROTLI_WINDOW: u32 = 20;

/// A content coding this server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Brotli,
    Gzip,
}

impl Coding {
    /// The `Content-Encoding` value.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Gzip => "gzip",
        }
    }

    /// What the response's entity tag gets appended (see `super::conditional`).
    pub fn tag_suffix(self) -> &'static str {
        match self {
            Coding::Brotli => "-br",
            Coding::Gzip => "-gz",
        }
    }

    pub fn compress(self, body: &[u8]) -> Vec<u8> {
        let out = Vec::with_capacity(body.len() / 4 + 64);
        match self {
            Coding::Gzip => {
                let mut e = flate2::write::GzEncoder::new(out, flate2::Compression::new(GZIP_LEVEL));
                // Writing to a Vec cannot fail.
                let _ = e.write_all(body);
                e.finish().unwrap_or_default()
            }
            Coding::Brotli => {
                let mut e = brotli::CompressorWriter::new(out, 4096, BROTLI_QUALITY, BROTLI_WINDOW);
                let _ = e.write_all(body);
                e.into_inner()
            }
        }
    }
}

/// The coding to send for `accept_encoding`: the one with the highest q-value (gzip on a tie),
/// `*` standing for codings not named; `None` for the body as it is.
pub fn negotiate(accept_encoding: &str) -> Option<Coding> {
    let (mut br, mut gzip, mut star) = (None, None, None);
    for item in accept_encoding.split(',') {
        let mut parts = item.split(';').map(str::trim);
        let coding = parts.next().unwrap_or("");
        let q = parts
            .filter_map(|p| p.split_once('=').filter(|(k, _)| k.trim().eq_ignore_ascii_case("q")))
            // A q-value is 0 to 1 (RFC 9110, 12.4.2); anything else (`NaN`, `inf`, `2`) counts
            // as a refusal rather than a preference.
            .map(|(_, v)| v.trim().parse::<f32>().ok().filter(|q| (0.0..=1.0).contains(q)).unwrap_or(0.0))
            .next()
            .unwrap_or(1.0);
        let is = |name: &str| coding.eq_ignore_ascii_case(name);
        if is("br") {
            br = Some(q);
        } else if is("gzip") || is("x-gzip") {
            gzip = Some(q);
        } else if coding == "*" {
            star = Some(q);
        }
    }
    let br = br.or(star).unwrap_or(0.0);
    let gzip = gzip.or(star).unwrap_or(0.0);
    if br <= 0.0 && gzip <= 0.0 {
        return None;
    }
    Some(if gzip >= br { Coding::Gzip } else { Coding::Brotli })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_values_choose_the_coding() {
        assert_eq!(negotiate("gzip, deflate, br, zstd"), Some(Coding::Gzip));
        assert_eq!(negotiate("br, gzip;q=0.9"), Some(Coding::Brotli));
        assert_eq!(negotiate("br"), Some(Coding::Brotli));
        assert_eq!(negotiate("gzip"), Some(Coding::Gzip));
        // Not q-values: refusals, never a preference for what the client did not ask for.
        assert_eq!(negotiate("gzip;q=NaN, br;q=0"), None);
        assert_eq!(negotiate("gzip;q=nan"), None);
        assert_eq!(negotiate("br;q=inf, gzip;q=0.5"), Some(Coding::Gzip));
        assert_eq!(negotiate("br;q=2, gzip;q=0.1"), Some(Coding::Gzip));
        assert_eq!(negotiate("br;q=0.5, gzip;q=0.8"), Some(Coding::Gzip));
        assert_eq!(negotiate("br;q=0, gzip;q=0"), None);
        assert_eq!(negotiate("identity"), None);
        assert_eq!(negotiate("*"), Some(Coding::Gzip));
        assert_eq!(negotiate("*;q=0.1, br;q=0"), Some(Coding::Gzip));
        assert_eq!(negotiate(""), None);
        assert_eq!(negotiate("GZIP ; Q=1"), Some(Coding::Gzip));
    }

    #[test]
    fn compressed_bodies_decompress_to_the_original() {
        use std::io::Read;
        let body = br#"{"data":[{"type":"subjects","id":"x","attributes":{"title":"Fractions"}}]}"#.repeat(40);
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&Coding::Gzip.compress(&body)[..]).read_to_end(&mut out).unwrap();
        assert_eq!(out, body);
        let mut out = Vec::new();
        brotli::Decompressor::new(&Coding::Brotli.compress(&body)[..], 4096).read_to_end(&mut out).unwrap();
        assert_eq!(out, body);
        assert!(Coding::Brotli.compress(&body).len() < body.len() / 10);
    }
}
