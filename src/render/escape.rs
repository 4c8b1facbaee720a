//! JSON string escaping for documents written straight into a byte buffer.

/// Bytes that JSON strings must escape: 0 none, `u` for `\u00XX`, else the letter after `\`.
static ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = b'u';
        i += 1;
    }
    t[b'\n' as usize] = b'n';
    t[b'\r' as usize] = b'r';
    t[b'\t' as usize] = b't';
    t[0x08] = b'b';
    t[0x0c] = b'f';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// The bytes of `w` (eight, little-endian) that JSON must escape (control characters, `"`,
/// `\\`): their high bit is set. The lowest set bit is always exact (later ones may be false
/// alarms), which is all the scan below needs. Bytes of 0x80 and above are never flagged.
#[inline]
fn special(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    control | zero(w ^ (ONES * b'"' as u64)) | zero(w ^ (ONES * b'\\' as u64))
}

/// Appends `s` JSON-escaped (without quotes).
pub fn escape_into(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len());
    let (mut start, mut i) = (0, 0);
    loop {
        let from = i;
        i = plain_from(bytes, i);
        crate::search::work::add(i - from + 1);
        let Some(&b) = bytes.get(i) else { break };
        out.extend_from_slice(&bytes[start..i]);
        match ESCAPE[b as usize] {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
            }
            esc => out.extend_from_slice(&[b'\\', esc]),
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// The position of the first byte at or after `i` that JSON must escape (`bytes.len()` if
/// none): sixteen bytes at a time where the processor has SSE2 (every x86-64 does), then eight
/// at a time, then one by one.
#[inline]
fn plain_from(bytes: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        i = sse2::plain_from(bytes, i);
    }
    while let Some(chunk) = bytes.get(i..i + 8) {
        let m = special(u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])));
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && ESCAPE[bytes[i] as usize] == 0 {
        i += 1;
    }
    i
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };

    /// The position of the first byte at or after `i` that JSON must escape, looked for sixteen
    /// bytes at a time while sixteen are left; otherwise where the last whole block ended.
    #[inline]
    pub fn plain_from(bytes: &[u8], mut i: usize) -> usize {
        // SAFETY: SSE2 is part of the x86-64 baseline, so these intrinsics are always
        // available; every load reads the sixteen bytes at `i`, inside `bytes` by the loop's
        // condition, and unaligned loads are allowed.
        unsafe {
            let (quote, backslash, last_control) =
                (_mm_set1_epi8(b'"' as i8), _mm_set1_epi8(b'\\' as i8), _mm_set1_epi8(0x1f));
            while i + 16 <= bytes.len() {
                let v = _mm_loadu_si128(bytes.as_ptr().add(i).cast::<__m128i>());
                // A byte is a control character when min(byte, 0x1f) is the byte itself.
                let control = _mm_cmpeq_epi8(_mm_min_epu8(v, last_control), v);
                let found = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), control);
                let mask = _mm_movemask_epi8(found) as u32;
                if mask != 0 {
                    return i + mask.trailing_zeros() as usize;
                }
                i += 16;
            }
        }
        i
    }
}

/// Appends `bytes` JSON-escaped (without quotes) if they are UTF-8; returns false otherwise.
/// (Course text has an accented letter every few dozen bytes: a SIMD check of the whole string
/// followed by an ASCII-only escape is several times faster than checking while escaping.)
pub fn escape_utf8_into(out: &mut Vec<u8>, bytes: &[u8]) -> bool {
    match simdutf8::basic::from_utf8(bytes) {
        Ok(s) => {
            escape_into(out, s);
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_matches_serde_json() {
        let long = "0123456789abcdef\"x\\y\u{7f}é\u{1}z".repeat(9);
        for s in [
            "plain",
            "quote \" and \\ back",
            "line\nbreak\ttab\r\u{1}\u{1f}",
            "café Zürich ✓",
            "",
            &long,
            "12345678\"",
            " !#$%&'()*+,-./~",
        ] {
            let mut out = Vec::new();
            escape_into(&mut out, s);
            let ours = format!("\"{}\"", String::from_utf8(out).unwrap());
            assert_eq!(serde_json::from_str::<String>(&ours).unwrap(), s);
        }
    }

    #[test]
    fn escaping_matches_serde_json_exactly_on_mixed_text() {
        let alphabet = ["a", "bcdefgh", "\"", "\\", "\n", "é", "✓", "\u{1}", "😀", " ", "\u{7f}", "<p>"];
        let mut seed = 7u64;
        for _ in 0..2000 {
            let mut s = String::new();
            for _ in 0..(seed % 120) {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                s.push_str(alphabet[(seed >> 33) as usize % alphabet.len()]);
            }
            let mut out = Vec::new();
            escape_into(&mut out, &s);
            assert_eq!(format!("\"{}\"", String::from_utf8(out).unwrap()), serde_json::to_string(&s).unwrap());
        }
    }

    #[test]
    fn every_special_byte_is_found_at_every_position_of_a_block() {
        for special in ['"', '\\', '\n', '\u{0}', '\u{1f}'] {
            for len in [15, 16, 17, 31, 32, 33, 40] {
                for at in 0..len {
                    let mut s: String = "é".repeat(2) + &"a".repeat(len - 4);
                    // Inside the accented letters only at their starts.
                    s.insert(if at < 4 { at & !1 } else { at.min(s.len()) }, special);
                    let mut out = Vec::new();
                    escape_into(&mut out, &s);
                    assert_eq!(
                        format!("\"{}\"", String::from_utf8(out).unwrap()),
                        serde_json::to_string(&s).unwrap(),
                        "{s:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn escaping_is_linear_whatever_the_text() {
        use crate::search::work::measure;
        let work = |text: &str| measure(|| escape_into(&mut Vec::new(), text)).1;
        let mib = 1 << 20;
        let plain = work(&crate::search::linear::inputs(mib)[0].1);
        let controls = "\u{1}\"\\".repeat(mib / 3);
        for (name, text) in
            crate::search::linear::inputs(mib).iter().map(|(n, t)| (*n, t.as_str())).chain([("controls", &*controls)])
        {
            assert!(work(text) <= 4 * plain.max(mib as u64), "escaping {name}: {} steps, plain {plain}", work(text));
        }
    }

    #[test]
    fn escaping_rejects_what_is_not_utf8_like_std_does() {
        let samples: [&[u8]; 9] = [
            b"ok \xc3\xa9",
            b"\xc3",
            b"\xc0\xaf",
            b"\xed\xa0\x80",
            b"\xf4\x90\x80\x80",
            b"\xf0\x9f\x98\x80 emoji",
            b"12345678\xff",
            b"\xe2\x82",
            b"\xef\xbf\xbd",
        ];
        for bytes in samples {
            let mut out = b"x".to_vec();
            let ok = escape_utf8_into(&mut out, bytes);
            assert_eq!(ok, std::str::from_utf8(bytes).is_ok(), "{bytes:?}");
            assert_eq!(out.len() > 1, ok && !bytes.is_empty(), "{bytes:?}");
        }
    }
}
