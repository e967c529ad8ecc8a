//! `mlrb serve` under load: a served bench of 10 000 episodes, 200
//! simulated workers over HTTP on loopback, each leasing an episode and
//! uploading its result (a real archive, hash-checked and unpacked) as
//! fast as it can. Prints lease+report cycles per second, the p50/p99 of
//! one cycle and the server process's peak memory. Client and server share
//! this machine's cores.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlrb::bench::result_line::ResultLine;

const EPISODES: usize = 10_000;
const WORKERS: usize = 200;

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

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let target = std::env::var("CARGO_TARGET_DIR").map_or(root.join("target"), Into::into);
    let agent = target.join("wasm32-wasip2/release/baseline.wasm");
    assert!(
        agent.exists(),
        "{}: build the agents first (scripts/build.sh)",
        agent.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "agents = [{:?}]\ntasks = [\"digits\"]\nseeds = {EPISODES}\non = \"server\"\n[cluster]\nlisten = \"127.0.0.1:0\"\n",
            agent.display().to_string()
        ),
    )
    .unwrap();
    let started = Instant::now();
    let mut server = Command::new(env!("CARGO_BIN_EXE_mlrb"))
        .args(["bench", "--quiet", "--json", "--plan"])
        .arg(&plan)
        .arg("--out")
        .arg(tmp.path())
        .args(["--run-name", "load"])
        .env("MLRB_TASKS_DIR", root.join("tasks"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let run = tmp.path().join("load");
    let served = loop {
        if let Ok(text) = std::fs::read_to_string(run.join("cluster/server.json")) {
            break serde_json::from_str::<serde_json::Value>(&text).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let url = served["url"].as_str().unwrap().to_string();
    let token = std::fs::read_to_string(run.join("cluster/token")).unwrap();
    println!(
        "serve: {EPISODES} episodes enqueued and served in {:.2} s",
        started.elapsed().as_secs_f64()
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(EPISODES)));
    let pid = server.id();
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let cpu = Arc::new(Mutex::new(0.0f64));
    let started = Instant::now();
    runtime.block_on(async {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(WORKERS)
            .build()
            .unwrap();
        let watcher = {
            let (peak, cpu) = (peak.clone(), cpu.clone());
            tokio::spawn(async move {
                loop {
                    peak.fetch_max(peak_kib(pid), std::sync::atomic::Ordering::Relaxed);
                    let used = cpu_seconds(pid);
                    {
                        let mut cpu = cpu.lock().unwrap();
                        *cpu = cpu.max(used);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (http, url, token, latencies) = (http.clone(), url.clone(), token.clone(), latencies.clone());
                tokio::spawn(async move { worker(w, http, url, token, latencies).await })
            })
            .collect();
        for worker in workers {
            worker.await.unwrap();
        }
        watcher.abort();
    });
    let elapsed = started.elapsed();
    let status = server.wait().unwrap();
    assert!(status.success(), "the served bench failed");
    let mut latencies = latencies.lock().unwrap().clone();
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    let server_cpu = *cpu.lock().unwrap();
    println!(
        "serve: the server used {server_cpu:.1} CPU seconds ({:.0} µs a cycle); the {WORKERS} clients the rest of the 2 cores",
        server_cpu * 1e6 / EPISODES as f64
    );
    println!(
        "serve: {} lease+report cycles by {WORKERS} workers in {:.2} s: {:.0} cycles/s, p50 {:.1} ms, p99 {:.1} ms; server peak memory {:.1} MiB",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        peak.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1024.0
    );
    let results = std::fs::read_to_string(run.join("results.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(results, EPISODES, "every result was recorded once");
}

async fn worker(w: usize, http: reqwest::Client, url: String, token: String, latencies: Arc<Mutex<Vec<Duration>>>) {
    let token = token.trim().to_string();
    loop {
        let cycle = Instant::now();
        let answer: serde_json::Value = http
            .post(format!("{url}/v1/lease"))
            .bearer_auth(&token)
            .json(&serde_json::json!({"worker": format!("load-{w}")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let Some(lease) = answer["lease"].as_object() else {
            return;
        };
        let episode = lease["episode"].as_str().unwrap();
        let seed = episode.rsplit('/').next().unwrap().parse().unwrap();
        let result = ResultLine::infra_failed(episode, "digits", "baseline", seed, episode, 1, "load test");
        let mut body = Vec::new();
        mlrb::cluster::upload::pack(Some(&result), None, &mut body).unwrap();
        let hash = blake3::hash(&body).to_hex().to_string();
        let reported = http
            .post(format!("{url}/v1/report"))
            .bearer_auth(&token)
            .header("x-mlrb-episode", episode)
            .header("x-mlrb-lease", lease["token"].as_str().unwrap())
            .header("x-mlrb-blake3", hash)
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(reported.status().is_success(), "{}", reported.text().await.unwrap());
        latencies.lock().unwrap().push(cycle.elapsed());
    }
}
