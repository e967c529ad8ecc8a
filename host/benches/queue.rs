//! The embedded lease queue (`bench::queue`, SQLite in WAL mode): 10 000
//! episodes leased and reported by 200 worker threads, as fast as they can.
//! Prints lease+report cycles per second, the p50/p99 latency of one cycle
//! and the database's size. (`mlrb serve` puts HTTP in front of this; its
//! load test is what the cluster sees, this is the floor under it.)

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlrb::bench::queue::{Queue, now_ms};

const EPISODES: usize = 10_000;
const WORKERS: usize = 200;

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("queue.sqlite");
    let queue = Arc::new(Queue::open(&path).unwrap());
    let specs: Vec<(String, serde_json::Value)> = (0..EPISODES)
        .map(|i| {
            let spec = serde_json::json!({"agent": "baseline.wasm", "task": "digits", "seed": i});
            (format!("digits/baseline/{i}"), spec)
        })
        .collect();
    let started = Instant::now();
    queue.enqueue(specs.iter().map(|(id, s)| (id.as_str(), s))).unwrap();
    let enqueued = started.elapsed();
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(EPISODES)));
    let started = Instant::now();
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (queue, latencies) = (queue.clone(), latencies.clone());
            std::thread::spawn(move || {
                let name = format!("worker-{w}");
                let mut mine = Vec::new();
                loop {
                    let cycle = Instant::now();
                    let Some(lease) = queue.lease(&name, Duration::from_secs(600), now_ms()).unwrap() else {
                        break;
                    };
                    let result = serde_json::json!({"score": 0.83, "episode": lease.episode});
                    queue.report(&lease.episode, &lease.token, &result).unwrap();
                    mine.push(cycle.elapsed().as_secs_f64() * 1000.0);
                }
                latencies.lock().unwrap().extend(mine);
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut latencies = latencies.lock().unwrap().clone();
    latencies.sort_by(f64::total_cmp);
    assert_eq!(latencies.len(), EPISODES);
    assert_eq!(queue.counts(now_ms()).unwrap().done, EPISODES as u64);
    let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
    let size: u64 = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum();
    println!(
        "queue: enqueue {EPISODES} episodes: {:.0} ms",
        enqueued.as_secs_f64() * 1000.0
    );
    println!(
        "queue: {WORKERS} workers, {EPISODES} lease+report cycles in {elapsed:.2} s: {:.0} cycles/s; one cycle p50 {:.2} ms, p99 {:.2} ms",
        EPISODES as f64 / elapsed,
        at(0.5),
        at(0.99)
    );
    println!("queue: database and WAL {:.1} MiB", size as f64 / (1 << 20) as f64);
}
