//! Requests are counted before anything is done for them: each client
//! address has a bucket of requests that refills at a steady rate. A flood
//! gets 429s with `Retry-After` and costs the service next to nothing.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many requests a client may make.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    /// Requests it may make at once.
    pub burst: f64,
    /// Requests a second it may go on with.
    pub per_second: f64,
}

impl Default for Rate {
    fn default() -> Self {
        Self {
            burst: 30.0,
            per_second: 5.0,
        }
    }
}

/// Most addresses remembered; past this the fullest buckets are forgotten.
const MAX_CLIENTS: usize = 100_000;

/// The buckets of every client seen.
pub struct Limiter {
    rate: Rate,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl Limiter {
    /// A limiter at `rate`.
    pub fn new(rate: Rate) -> Self {
        Self {
            rate,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request from `client`'s bucket, or says how long until
    /// one is there.
    pub fn admit(&self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_CLIENTS && !buckets.contains_key(&client) {
            let rate = self.rate;
            buckets.retain(|_, (tokens, at)| refill(rate, *tokens, *at, now) < rate.burst);
        }
        let (tokens, at) = buckets.entry(client).or_insert((self.rate.burst, now));
        let available = refill(self.rate, *tokens, *at, now);
        *at = now;
        if available >= 1.0 {
            *tokens = available - 1.0;
            return Ok(());
        }
        *tokens = available;
        let wait = (1.0 - available) / self.rate.per_second.max(1e-9);
        Err(Duration::from_secs_f64(wait))
    }
}

fn refill(rate: Rate, tokens: f64, at: Instant, now: Instant) -> f64 {
    (tokens + now.saturating_duration_since(at).as_secs_f64() * rate.per_second).min(rate.burst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_taken_then_refused_until_the_bucket_refills() {
        let limiter = Limiter::new(Rate {
            burst: 3.0,
            per_second: 2.0,
        });
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "::1".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.admit(a, t0).is_ok());
        }
        let wait = limiter.admit(a, t0).unwrap_err();
        assert!(
            wait > Duration::from_millis(400) && wait <= Duration::from_millis(500),
            "{wait:?}"
        );
        // Another client has a bucket of its own.
        assert!(limiter.admit(b, t0).is_ok());
        // Half a second refills one request, and only one.
        let later = t0 + Duration::from_millis(500);
        assert!(limiter.admit(a, later).is_ok());
        assert!(limiter.admit(a, later).is_err());
    }
}
