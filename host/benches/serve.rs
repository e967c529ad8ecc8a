//! `mlrb serve` under load: a served bench of 10 000 episodes drained by
//! 1 000 simulated workers over HTTP on loopback, as a cluster of that size
//! would: each leases an episode, holds it for a simulated episode of 1–3 s
//! renewing its lease every second (the lease is 3 s), then uploads its
//! result with a small episode folder (a real archive, hash-checked and
//! unpacked into the run). Prints the server's CPU use in cores (while the
//! workers drain the queue, and until it exits with every folder placed),
//! p50/p99 of each request kind, and that no episode was lost or recorded
//! twice and every folder is in place.
//! Client and server share this machine's cores.
//!
//! `MLRB_BENCH_WORKERS` and `MLRB_BENCH_EPISODES` change the sizes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlrb::bench::result_line::ResultLine;

/// The lease a worker holds; it renews every third of it, as `mlrb worker` does.
const LEASE_SECONDS: u64 = 3;

fn size(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The CPU seconds (user + system) a process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// Waits for the process `pid` to exit; whether it succeeded, and the CPU
/// seconds it used in all (user + system).
fn wait_with_cpu(pid: u32) -> (bool, f64) {
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child, not yet waited for; status and usage outlive the call.
    let waited = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid as i32, "wait4");
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let success = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (success, seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

/// Each request's latency, by kind.
#[derive(Default)]
struct Latencies {
    /// Each worker's first lease: all of them at the same moment.
    first_lease: Vec<Duration>,
    lease: Vec<Duration>,
    renew: Vec<Duration>,
    report: Vec<Duration>,
}

type Shared = Arc<Mutex<Latencies>>;

/// A served bench of `episodes`; the server process, its run folder, URL and token.
fn serve(root: &Path, tmp: &Path, episodes: usize) -> (std::process::Child, std::path::PathBuf, String, String) {
    let target = std::env::var("CARGO_TARGET_DIR").map_or(root.join("target"), Into::into);
    let agent = target.join("wasm32-wasip2/release/baseline.wasm");
    assert!(
        agent.exists(),
        "{}: build the agents first (scripts/build.sh)",
        agent.display()
    );
    let plan = tmp.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "agents = [{:?}]\ntasks = [\"digits\"]\nseeds = {episodes}\non = \"server\"\n[cluster]\nlisten = \"127.0.0.1:0\"\nlease_seconds = {LEASE_SECONDS}\n",
            agent.display().to_string()
        ),
    )
    .unwrap();
    let server = Command::new(env!("CARGO_BIN_EXE_mlrb"))
        .args(["bench", "--quiet", "--json", "--plan"])
        .arg(&plan)
        .arg("--out")
        .arg(tmp)
        .args(["--run-name", "load"])
        .env("MLRB_TASKS_DIR", root.join("tasks"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let run = tmp.join("load");
    let served = loop {
        if let Ok(text) = std::fs::read_to_string(run.join("cluster/server.json")) {
            break serde_json::from_str::<serde_json::Value>(&text).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let url = served["url"].as_str().unwrap().to_string();
    let token = std::fs::read_to_string(run.join("cluster/token"))
        .unwrap()
        .trim()
        .to_string();
    (server, run, url, token)
}

fn main() {
    let (workers, episodes) = (size("MLRB_BENCH_WORKERS", 1000), size("MLRB_BENCH_EPISODES", 10_000));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (server, run, url, token) = serve(&root, tmp.path(), episodes);
    println!(
        "serve: {episodes} episodes enqueued and served in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let folder = small_episode(tmp.path());

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let latencies: Shared = Arc::default();
    let pid = server.id();
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let cpu_at_start = cpu_seconds(pid);
    let started = Instant::now();
    runtime.block_on(async {
        let watcher = {
            let peak = peak.clone();
            tokio::spawn(async move {
                loop {
                    peak.fetch_max(peak_kib(pid), std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let tasks: Vec<_> = (0..workers)
            .map(|w| {
                let client = Worker {
                    name: format!("load-{w}"),
                    http: node_client(w),
                    url: url.clone(),
                    token: token.clone(),
                    folder: folder.clone(),
                    latencies: latencies.clone(),
                };
                tokio::spawn(async move { client.drain(w as u64).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        watcher.abort();
    });
    let elapsed = started.elapsed();
    let server_cpu = cpu_seconds(pid) - cpu_at_start;
    // Not through `server.wait()`: wait4 gives its CPU to the end.
    let (success, cpu_in_all) = wait_with_cpu(pid);
    let exited = started.elapsed();
    drop(server);
    assert!(success, "the served bench failed");
    let latencies = std::mem::take(&mut *latencies.lock().unwrap());
    println!(
        "serve: {workers} workers drained {episodes} episodes in {:.1} s; the server used {server_cpu:.1} CPU seconds, \
         {:.2} cores on average; peak memory {:.1} MiB",
        elapsed.as_secs_f64(),
        server_cpu / elapsed.as_secs_f64(),
        peak.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1024.0
    );
    let to_exit = cpu_in_all - cpu_at_start;
    println!(
        "serve: from the first request to its exit ({:.1} s: folders placed, lingering for late workers), \
         {to_exit:.1} CPU seconds, {:.2} cores on average",
        exited.as_secs_f64(),
        to_exit / exited.as_secs_f64()
    );
    let mut all = Vec::new();
    for (kind, times) in [
        ("first lease (all workers at once)", latencies.first_lease),
        ("later lease", latencies.lease),
        ("renew", latencies.renew),
        ("report", latencies.report),
    ] {
        print_percentiles(kind, &times);
        all.extend(times);
    }
    print_percentiles("every request", &all);
    check_nothing_lost(&run, episodes);
}

fn print_percentiles(kind: &str, times: &[Duration]) {
    let mut sorted = times.to_vec();
    sorted.sort();
    let pct = |p: f64| sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)].as_secs_f64() * 1e3;
    println!(
        "serve: {kind}: {} requests, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        sorted.len(),
        pct(0.50),
        pct(0.99),
        pct(1.0)
    );
}

/// Every episode's result recorded exactly once, with its folder in place.
fn check_nothing_lost(run: &Path, episodes: usize) {
    let text = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    let ids: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    let folders = ids
        .iter()
        .filter(|id| run.join(id).join("episode.json").exists())
        .count();
    println!(
        "serve: {} results recorded, {} distinct, {} lost, {} duplicated, {folders} episode folders in place",
        ids.len(),
        distinct.len(),
        episodes - distinct.len(),
        ids.len() - distinct.len()
    );
    assert_eq!(
        (ids.len(), distinct.len()),
        (episodes, episodes),
        "an episode was lost or recorded twice"
    );
    assert_eq!(folders, episodes, "an episode's folder is not in place");
}

/// A small episode folder to upload with each result (the records a worker sends).
fn small_episode(tmp: &Path) -> Arc<std::path::PathBuf> {
    let dir = tmp.join("small-episode");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("episode.json"), "{\"agent\": \"load\"}\n").unwrap();
    let line = "{\"seq\":0,\"interface\":\"exec\",\"function\":\"execute-script\",\"result\":{\"ok\":{}}}\n";
    std::fs::write(dir.join("events.jsonl"), line.repeat(40)).unwrap();
    Arc::new(dir)
}

/// Worker `w`'s HTTP client, from a loopback address of its own as from
/// a node of its own (the server caps connections per address).
fn node_client(w: usize) -> reqwest::Client {
    let address = std::net::Ipv4Addr::new(127, 1, (w / 250) as u8, (w % 250 + 1) as u8);
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::V4(address))
        .build()
        .unwrap()
}

/// One simulated `mlrb worker`.
struct Worker {
    name: String,
    http: reqwest::Client,
    url: String,
    token: String,
    folder: Arc<std::path::PathBuf>,
    latencies: Shared,
}

impl Worker {
    /// Leases, holds (renewing) and reports episodes until none is left.
    async fn drain(&self, seed: u64) {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut first = true;
        while let Some((episode, lease)) = self.lease(std::mem::take(&mut first)).await {
            // A simulated episode of 1 to 3 s, renewed every second.
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let hold = Duration::from_millis(1000 + (state >> 33) % 2000);
            let held = Instant::now();
            while held.elapsed() + Duration::from_secs(1) < hold {
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.renew(&lease).await;
            }
            tokio::time::sleep(hold.saturating_sub(held.elapsed())).await;
            self.report(&episode, &lease).await;
        }
    }

    async fn lease(&self, first: bool) -> Option<(String, String)> {
        let asked = Instant::now();
        let answer: serde_json::Value = self
            .http
            .post(format!("{}/v1/lease", self.url))
            .bearer_auth(&self.token)
            .json(&serde_json::json!({"worker": self.name}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mut latencies = self.latencies.lock().unwrap();
        match first {
            true => latencies.first_lease.push(asked.elapsed()),
            false => latencies.lease.push(asked.elapsed()),
        }
        drop(latencies);
        let lease = answer["lease"].as_object()?;
        Some((
            lease["episode"].as_str()?.to_string(),
            lease["token"].as_str()?.to_string(),
        ))
    }

    async fn renew(&self, lease: &str) {
        let asked = Instant::now();
        let renewed = self
            .http
            .post(format!("{}/v1/renew", self.url))
            .bearer_auth(&self.token)
            .json(&serde_json::json!({"token": lease}))
            .send()
            .await
            .unwrap();
        assert!(
            renewed.status().is_success(),
            "renew: {}",
            renewed.text().await.unwrap()
        );
        self.latencies.lock().unwrap().renew.push(asked.elapsed());
    }

    async fn report(&self, episode: &str, lease: &str) {
        let seed = episode.rsplit('/').next().unwrap().parse().unwrap();
        let result = ResultLine::infra_failed(episode, "digits", "baseline", seed, episode, 1, "load test");
        let mut body = Vec::new();
        mlrb::cluster::upload::pack(Some(&result), Some(&self.folder), &mut body).unwrap();
        let hash = blake3::hash(&body).to_hex().to_string();
        let asked = Instant::now();
        let reported = self
            .http
            .post(format!("{}/v1/report", self.url))
            .bearer_auth(&self.token)
            .header("x-mlrb-episode", episode)
            .header("x-mlrb-lease", lease)
            .header("x-mlrb-blake3", hash)
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(reported.status().is_success(), "{}", reported.text().await.unwrap());
        self.latencies.lock().unwrap().report.push(asked.elapsed());
    }
}
