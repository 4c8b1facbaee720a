//! Timestamps: RFC 3339 UTC with milliseconds (`2026-11-21T20:53:31.123Z`), the one form the
//! API shows and SQLite stores; milliseconds since the Unix epoch in between.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    ms_of(SystemTime::now())
}

pub fn ms_of(at: SystemTime) -> i64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

/// `at` as RFC 3339 UTC with milliseconds.
pub fn timestamp(at: SystemTime) -> String {
    format_ms(ms_of(at))
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn format_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60,
        ms.rem_euclid(1000)
    )
}

/// Milliseconds since the epoch as a UTC time fit for a file name, to the second:
/// `20261123T061500Z`.
pub fn file_stamp(ms: i64) -> String {
    let stamp: String = format_ms(ms)[..19].chars().filter(|c| *c != '-' && *c != ':').collect();
    format!("{stamp}Z")
}

/// Parses the form [`format_ms`] writes (the fraction may have 0 to 9 digits; `Z` only).
pub fn parse_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok()).flatten()
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = s.get(19..)?.strip_suffix('Z')?;
    let millis = match rest.strip_prefix('.') {
        None if rest.is_empty() => 0,
        Some(frac) if !frac.is_empty() && frac.len() <= 9 => {
            let digits = format!("{frac:0<3}");
            num_str(&digits[..3])?
        }
        _ => return None,
    };
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    // A civil date to days since 1970-01-01 (H. Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000) + millis)
}

fn num_str(s: &str) -> Option<i64> {
    s.bytes().all(|c| c.is_ascii_digit()).then(|| s.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for ms in [0, 1, 999, 1_767_225_600_123, 951_782_400_000, 4_102_444_799_999] {
            let s = format_ms(ms);
            assert_eq!(parse_ms(&s), Some(ms), "{s}");
        }
        assert_eq!(format_ms(1_767_225_600_123), "2026-01-01T00:00:00.123Z");
        assert_eq!(parse_ms("2026-01-01T00:00:00Z"), Some(1_767_225_600_000));
        assert_eq!(parse_ms("2026-01-01T00:00:00.5Z"), Some(1_767_225_600_500));
        assert_eq!(parse_ms("2026-01-01 00:00:00Z"), None);
        assert_eq!(parse_ms("2026-13-01T00:00:00Z"), None);
    }
}
