//! What an agent observes outside the mlrb interfaces: WASI's wall and
//! monotonic clocks, and its random bytes. Every clock read is recorded (in
//! batches, as a `wasi clocks` event before the next host call's) and, in a
//! replay, answered from the recording, so that an agent that looks at the
//! time does the same thing again. Random bytes come from generators seeded
//! by the episode's seed; their count and hash are recorded at the end, and
//! a replay, seeded alike, must draw exactly the same.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock};

/// One clock read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reading {
    /// The wall clock: seconds and nanoseconds since the epoch.
    Wall(u64, u32),
    /// The monotonic clock, in nanoseconds.
    Monotonic(u64),
}

impl Reading {
    fn to_json(self) -> Value {
        match self {
            Self::Wall(s, n) => json!(["w", s, n]),
            Self::Monotonic(n) => json!(["m", n]),
        }
    }

    fn from_json(value: &Value) -> Option<Self> {
        let items = value.as_array()?;
        match items.first()?.as_str()? {
            "w" => Some(Self::Wall(
                items.get(1)?.as_u64()?,
                u32::try_from(items.get(2)?.as_u64()?).ok()?,
            )),
            "m" => Some(Self::Monotonic(items.get(1)?.as_u64()?)),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Log {
    /// Reads since the last batch was taken (live).
    pending: Vec<Reading>,
    /// Recorded reads still to be answered (replaying).
    queue: VecDeque<Reading>,
    replaying: bool,
    /// Set when the agent read a clock more often than the recording did.
    diverged: Option<String>,
    /// Added to the real clocks once live, so time goes on from the
    /// recording's last reading (a fork).
    wall_offset: i128,
    monotonic_offset: i128,
    last_wall: Option<Duration>,
    last_monotonic: Option<u64>,
    random_bytes: u64,
    random_hash: blake3::Hasher,
}

/// The shared record of an episode's clock reads and random bytes.
#[derive(Clone, Default)]
pub struct Observed {
    log: Arc<Mutex<Log>>,
}

fn real_wall() -> Duration {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
}

fn real_monotonic() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

impl Observed {
    fn with<T>(&self, f: impl FnOnce(&mut Log) -> T) -> T {
        let mut log = self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut log)
    }

    /// The reads since the last call, as the `wasi clocks` event's result;
    /// `None` when there were none.
    pub fn take_batch(&self) -> Option<Value> {
        self.with(|log| {
            let batch: Vec<Value> = log.pending.drain(..).map(Reading::to_json).collect();
            (!batch.is_empty()).then_some(Value::Array(batch))
        })
    }

    /// From now on, clock reads are answered from the recording.
    pub fn start_replay(&self) {
        self.with(|log| log.replaying = true);
    }

    /// Queues a recorded batch of reads to answer; false if it does not parse.
    pub fn queue(&self, batch: &Value) -> bool {
        let Some(readings) = batch.as_array() else { return false };
        let parsed: Option<Vec<Reading>> = readings.iter().map(Reading::from_json).collect();
        let Some(parsed) = parsed else { return false };
        self.with(|log| log.queue.extend(parsed));
        true
    }

    /// Back to the real clocks, going on from the last recorded reading.
    pub fn go_live(&self) {
        self.with(|log| {
            log.replaying = false;
            log.queue.clear();
            if let Some(wall) = log.last_wall {
                log.wall_offset = wall.as_nanos() as i128 - real_wall().as_nanos() as i128;
            }
            if let Some(monotonic) = log.last_monotonic {
                log.monotonic_offset = i128::from(monotonic) - i128::from(real_monotonic());
            }
        });
    }

    /// Why the replay diverged through a clock read, if it did.
    pub fn diverged(&self) -> Option<String> {
        self.with(|log| log.diverged.clone())
    }

    /// Marks the replay diverged for a reason found outside the clocks (an
    /// HTTP request the recording does not hold); the first reason stays.
    pub fn diverge(&self, why: String) {
        self.with(|log| {
            log.diverged.get_or_insert(why);
        });
    }

    /// Recorded reads not yet answered (a replay that ends with some left diverged).
    pub fn unanswered(&self) -> usize {
        self.with(|log| log.queue.len())
    }

    /// The random bytes drawn so far: their count and blake3.
    pub fn random_summary(&self) -> Value {
        self.with(|log| json!({ "bytes": log.random_bytes, "blake3": log.random_hash.finalize().to_hex().to_string() }))
    }

    fn read(&self, live: impl FnOnce(&Log) -> Reading, what: &str) -> Reading {
        self.with(|log| {
            let reading = if log.replaying {
                match log.queue.pop_front() {
                    Some(reading) => reading,
                    None => {
                        log.diverged.get_or_insert_with(|| {
                            format!("the agent read the {what} clock more often than the recording did")
                        });
                        live(log)
                    }
                }
            } else {
                let reading = live(log);
                log.pending.push(reading);
                reading
            };
            match reading {
                Reading::Wall(s, n) => log.last_wall = Some(Duration::new(s, n)),
                Reading::Monotonic(n) => log.last_monotonic = Some(n),
            }
            reading
        })
    }

    /// The wall clock the agent's WASI reads.
    pub fn wall_clock(&self) -> impl HostWallClock + 'static {
        ObservedWall(self.clone())
    }

    /// The monotonic clock the agent's WASI reads.
    pub fn monotonic_clock(&self) -> impl HostMonotonicClock + 'static {
        ObservedMonotonic(self.clone())
    }

    /// `rng`, with every byte it gives counted and hashed.
    pub fn rng<R: rand::Rng + Send + 'static>(&self, rng: R) -> ObservedRng<R> {
        ObservedRng {
            inner: rng,
            observed: self.clone(),
        }
    }

    fn drew(&self, bytes: &[u8]) {
        self.with(|log| {
            log.random_bytes += bytes.len() as u64;
            log.random_hash.update(bytes);
        });
    }
}

struct ObservedWall(Observed);

impl HostWallClock for ObservedWall {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        let live = |log: &Log| {
            let nanos = (real_wall().as_nanos() as i128 + log.wall_offset).max(0) as u128;
            Reading::Wall((nanos / 1_000_000_000) as u64, (nanos % 1_000_000_000) as u32)
        };
        match self.0.read(live, "wall") {
            Reading::Wall(s, n) => Duration::new(s, n),
            Reading::Monotonic(n) => Duration::from_nanos(n),
        }
    }
}

struct ObservedMonotonic(Observed);

impl HostMonotonicClock for ObservedMonotonic {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        let live = |log: &Log| Reading::Monotonic((i128::from(real_monotonic()) + log.monotonic_offset).max(0) as u64);
        match self.0.read(live, "monotonic") {
            Reading::Monotonic(n) => n,
            Reading::Wall(s, n) => Duration::new(s, n).as_nanos() as u64,
        }
    }
}

/// A random generator whose output is counted and hashed.
pub struct ObservedRng<R> {
    inner: R,
    observed: Observed,
}

impl<R: rand::Rng> rand::TryRng for ObservedRng<R> {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let value = self.inner.next_u32();
        self.observed.drew(&value.to_le_bytes());
        Ok(value)
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let value = self.inner.next_u64();
        self.observed.drew(&value.to_le_bytes());
        Ok(value)
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        self.inner.fill_bytes(dst);
        self.observed.drew(dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_recorded_then_answered_from_the_recording() {
        let live = Observed::default();
        let (wall, mono) = (live.wall_clock(), live.monotonic_clock());
        let readings = (wall.now(), mono.now(), mono.now());
        let batch = live.take_batch().unwrap();
        assert_eq!(batch.as_array().unwrap().len(), 3);
        assert!(live.take_batch().is_none());

        let replay = Observed::default();
        replay.start_replay();
        assert!(replay.queue(&batch));
        let (wall, mono) = (replay.wall_clock(), replay.monotonic_clock());
        assert_eq!((wall.now(), mono.now(), mono.now()), readings);
        assert!(replay.diverged().is_none());
        mono.now();
        assert!(replay.diverged().is_some(), "a read the recording has not");
        // Live again, time goes on from the last reading.
        replay.go_live();
        assert!(mono.now() >= readings.2);
    }
}
