//! Big agents, measured: the Python baseline (an ~18 MB component) built
//! with `mlrb agent build`,
//!
//! * started cold (compiled, then to its first host call) and from the
//!   compile cache by a fresh host, as after a restart (loaded, then to its
//!   first host call);
//! * 100 Python agents running concurrently in one host, each idle on the
//!   host's clock after its first call: peak resident memory and time.
//!
//! Run with `scripts/bench.sh` (it needs componentize-py: scripts/setup.sh).

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mlrb::agent_build::{Project, build};
use mlrb::episode::{EndReason, EpisodeRequest, LoadedAgent, Runner};
use mlrb::sandbox::local::LocalSandbox;
use mlrb::task::Task;
use mlrb::task::overrides::Configured;

fn build_python(dir: &str, entry: Option<&str>, out: &Path) -> PathBuf {
    let mut project = Project::open(&common::root().join(dir)).unwrap();
    if let Some(entry) = entry {
        project.entry = entry.to_string();
    }
    let started = Instant::now();
    let built = build(&project, Some(out)).expect("componentize-py is installed by scripts/setup.sh");
    println!(
        "built {} with mlrb agent build in {:.1} s ({:.1} MB)",
        built.display(),
        started.elapsed().as_secs_f64(),
        std::fs::metadata(&built).unwrap().len() as f64 / 1e6
    );
    built
}

/// This process's resident set size, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

fn spec(agent: &Arc<LoadedAgent>, task: &Task, dir: PathBuf, seed: u64) -> EpisodeRequest {
    EpisodeRequest::new(agent.clone(), Configured::unchanged(task.clone()), seed, dir)
}

async fn first_call_ms(host: &Runner, agent: &Arc<LoadedAgent>, task: &Task, dir: PathBuf) -> f64 {
    let (record, _) = host
        .run_episode(&spec(agent, task, dir, 0), std::future::pending())
        .await
        .unwrap();
    let end = record.end.unwrap();
    assert_eq!(end.reason, EndReason::Completed, "{end:?}");
    end.first_call_ms.unwrap()
}

fn start_times(tmp: &Path, task: &Task, baseline: &Path, runtime: &tokio::runtime::Runtime) {
    let cache = tmp.join("cache");
    runtime.block_on(async {
        let host = Runner::new(&cache, Arc::new(LocalSandbox::detect().unwrap())).unwrap();
        let cold = host.load_agent(baseline).await.unwrap();
        assert!(!cold.from_cache);
        let cold_first = first_call_ms(&host, &cold, task, tmp.join("cold")).await;
        println!(
            "Python baseline, cold start: compile {:.0} ms + instantiate to first host call {:.1} ms = {:.2} s (target ≥ 5 s is what the cache saves)",
            cold.load_ms,
            cold_first,
            (cold.load_ms + cold_first) / 1000.0
        );
    });
    let (mut load, mut first, mut total) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..10 {
        // A fresh host each time: the cache survives a restart.
        runtime.block_on(async {
            let host = Runner::new(&cache, Arc::new(LocalSandbox::detect().unwrap())).unwrap();
            let agent = host.load_agent(baseline).await.unwrap();
            assert!(agent.from_cache);
            let first_call = first_call_ms(&host, &agent, task, tmp.join(format!("warm/{round}"))).await;
            load.push(agent.load_ms);
            first.push(first_call);
            total.push(agent.load_ms + first_call);
        });
    }
    println!(
        "Python baseline, second start (cache hit, fresh host): load {:.1} ms + instantiate to first host call {:.1} ms = {:.1} ms (median of 10; target ≤ 100 ms)",
        common::median(&mut load),
        common::median(&mut first),
        common::median(&mut total)
    );
}

fn concurrent_idle_agents(tmp: &Path, task: &Task, idle: &Path, runtime: &tokio::runtime::Runtime, n: u64) {
    runtime.block_on(async {
        let host = Runner::new(&tmp.join("cache"), Arc::new(LocalSandbox::detect().unwrap())).unwrap();
        let agent = host.load_agent(idle).await.unwrap();
        // One episode first: the task's data is prepared and cached.
        first_call_ms(&host, &agent, task, tmp.join("idle-warmup")).await;
        let before = rss();
        let peak = Arc::new(AtomicU64::new(before));
        let done = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (peak, done) = (peak.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    peak.fetch_max(rss(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let started = Instant::now();
        let episodes = (0..n).map(|seed| {
            let spec = spec(&agent, task, tmp.join(format!("idle/{seed}")), seed);
            let host = &host;
            async move { host.run_episode(&spec, std::future::pending()).await.unwrap() }
        });
        let records = futures_util::future::join_all(episodes).await;
        let elapsed = started.elapsed();
        done.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        let completed = records
            .iter()
            .filter(|(r, _)| r.end.as_ref().is_some_and(|e| e.reason == EndReason::Completed))
            .count();
        let last_first_call = records
            .iter()
            .filter_map(|(r, _)| r.end.as_ref().and_then(|e| e.first_call_ms))
            .fold(0.0f64, f64::max);
        let peak = peak.load(Ordering::Relaxed);
        println!(
            "{n} Python agents at once in one host ({completed} completed; each idle 3 s after its first call): \
             {:.1} s in all, slowest first host call {:.0} ms",
            elapsed.as_secs_f64(),
            last_first_call
        );
        println!(
            "  resident memory: {:.0} MB before, {:.0} MB at peak: {:.1} MB per agent (target ≤ 60 MB)",
            before as f64 / 1e6,
            peak as f64 / 1e6,
            (peak - before) as f64 / 1e6 / n as f64
        );
    });
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let baseline = build_python("plugins/baseline-py", None, &tmp.path().join("baseline-py.wasm"));
    let idle = build_python("tests/agents/probes-py", Some("idle"), &tmp.path().join("idle.wasm"));
    let task = common::fixture_task();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    start_times(tmp.path(), &task, &baseline, &runtime);
    concurrent_idle_agents(tmp.path(), &task, &idle, &runtime, 100);
}
