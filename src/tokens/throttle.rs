//! Failed authentication, throttled per client address.
//!
//! Each address has an allowance of `limit` failures that refills at `limit` per `window`
//! (a token bucket): a burst of `limit` bad tokens is answered 401 one by one, and from then on
//! the address gets 429 with `Retry-After` until a failure is allowed again (every
//! `window / limit`). While an address is throttled every request from it that needs a token
//! is refused unchecked, good token or not: checking it would tell a guesser when a guess is
//! right, and would cost the hash that throttling spares. IPv6 addresses count by their /64
//! (one host's whole range). The state is per process.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures an address may make in a burst.
pub const DEFAULT_LIMIT: u32 = 20;
/// The time in which the whole allowance refills.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at most; past it, those whose allowance is whole again are forgotten.
const MAX_ADDRESSES: usize = 100_000;

pub struct Throttle {
    limit: f64,
    /// Allowance regained per second.
    rate: f64,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
    /// Until when (milliseconds since `epoch`) some address may be throttled: past it, no
    /// request needs the lock; 0 when none has been since (no request needs the clock either).
    any_until: AtomicU64,
    epoch: Instant,
}

struct Bucket {
    /// Failures still allowed.
    left: f64,
    at: Instant,
}

impl Throttle {
    /// At most `limit` failures in a burst, refilled at `limit` per `window`. A `limit` of 0
    /// turns throttling off.
    pub fn new(limit: u32, window: Duration) -> Throttle {
        let rate = if window.is_zero() { f64::INFINITY } else { f64::from(limit) / window.as_secs_f64() };
        Throttle {
            limit: f64::from(limit),
            rate,
            buckets: Mutex::default(),
            any_until: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    /// `Some(seconds to wait)` while `addr` may not try again.
    pub fn blocked(&self, addr: IpAddr) -> Option<u64> {
        if self.any_until.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.blocked_at(addr, Instant::now())
    }

    fn blocked_at(&self, addr: IpAddr, now: Instant) -> Option<u64> {
        let until = self.any_until.load(Ordering::Relaxed);
        if until == 0 {
            return None;
        }
        if self.since_epoch(now) >= until {
            let _ = self.any_until.compare_exchange(until, 0, Ordering::Relaxed, Ordering::Relaxed);
            return None;
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let b = buckets.get_mut(&key(addr))?;
        self.refill(b, now);
        // Whole seconds, rounded up, of a wait counted in whole milliseconds.
        (b.left < 1.0).then(|| (((1.0 - b.left) / self.rate * 1000.0).round() as u64).div_ceil(1000).max(1))
    }

    /// How many addresses may not try now (each address remembered is looked at: for a scrape
    /// of the metrics, not for a request).
    pub fn throttled_now(&self) -> usize {
        if self.any_until.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        buckets
            .values_mut()
            .filter_map(|b| {
                self.refill(b, now);
                (b.left < 1.0).then_some(())
            })
            .count()
    }

    /// Counts a failure of `addr`.
    pub fn failed(&self, addr: IpAddr) {
        self.failed_at(addr, Instant::now());
    }

    fn failed_at(&self, addr: IpAddr, now: Instant) {
        if self.limit == 0.0 {
            return;
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= MAX_ADDRESSES {
            buckets.retain(|_, b| {
                self.refill(b, now);
                b.left < self.limit
            });
        }
        let b = buckets.entry(key(addr)).or_insert(Bucket { left: self.limit, at: now });
        self.refill(b, now);
        b.left = (b.left - 1.0).max(0.0);
        if b.left < 1.0 {
            let wait = Duration::from_secs_f64(((1.0 - b.left) / self.rate).min(86_400.0));
            self.any_until.fetch_max(self.since_epoch(now + wait) + 1, Ordering::Relaxed);
        }
    }

    fn refill(&self, b: &mut Bucket, now: Instant) {
        let gained = now.saturating_duration_since(b.at).as_secs_f64() * self.rate;
        b.left = (b.left + gained).min(self.limit);
        b.at = now;
    }

    fn since_epoch(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_millis() as u64
    }
}

/// The address a failure counts against: an IPv6 address by its /64.
fn key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_failures_throttles_that_address_only() {
        let t = Throttle::new(3, Duration::from_secs(60));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..2 {
            t.failed(a);
            assert_eq!(t.blocked(a), None);
        }
        t.failed(a);
        let wait = t.blocked(a).expect("throttled after 3 failures");
        assert!((19..=20).contains(&wait), "one failure refills in 60/3 s: {wait}");
        assert_eq!(t.blocked(b), None);
    }

    #[test]
    fn the_allowance_refills_with_time() {
        let t = Throttle::new(2, Duration::from_secs(60));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let start = Instant::now();
        t.failed_at(a, start);
        t.failed_at(a, start);
        assert_eq!(t.blocked_at(a, start), Some(30), "one failure refills in 60/2 s");
        assert_eq!(t.blocked_at(a, start + Duration::from_secs(20)), Some(10));
        assert_eq!(t.blocked_at(a, start + Duration::from_secs(30)), None);
        // One failure allowed again, and the next throttles anew.
        t.failed_at(a, start + Duration::from_secs(30));
        assert_eq!(t.blocked_at(a, start + Duration::from_secs(31)), Some(29));
        assert_eq!(t.blocked_at(a, start + Duration::from_secs(120)), None);
    }

    #[test]
    fn ipv6_addresses_count_by_their_64_prefix() {
        let t = Throttle::new(1, Duration::from_secs(60));
        t.failed("2001:db8::1".parse().unwrap());
        assert!(t.blocked("2001:db8::ffff:2".parse().unwrap()).is_some());
        assert!(t.blocked("2001:db8:0:1::1".parse().unwrap()).is_none());
        t.failed("::ffff:10.0.0.9".parse().unwrap());
        assert!(t.blocked("10.0.0.9".parse().unwrap()).is_some(), "a mapped IPv4 address is that address");
    }

    #[test]
    fn a_limit_of_zero_never_throttles() {
        let t = Throttle::new(0, Duration::from_secs(60));
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..100 {
            t.failed(a);
        }
        assert_eq!(t.blocked(a), None);
    }
}
