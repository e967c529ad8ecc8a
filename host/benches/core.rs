//! mlrb's core performance targets, measured:
//!
//! * host overhead of one workspace tool call (`list-files` on a small
//!   folder, trace write included): criterion, and from inside an agent;
//! * starting a Rust agent from the compile cache, to its first host call;
//! * a snapshot after a step that changed one small file, with a 1 GiB
//!   read-only data file in the workspace (`step_costs` has the rest of a
//!   step's costs).
//!
//! Run with `scripts/bench.sh` (the dev profile, whose dependencies are
//! optimised; it needs the probe agents built for wasm32-wasip2).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use mlrb::episode::{EpisodeRequest, Runner};
use mlrb::limits::Overrides;
use mlrb::sandbox::local::LocalSandbox;
use mlrb::task::overrides::Configured;

fn tool_call(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let mut session = common::small_session(tmp.path());
    c.bench_function("list-files alone, 10 entries (the file system's share)", |b| {
        b.iter(|| session.files.list_files("").unwrap())
    });
    c.bench_function("tool call: list-files, 10 entries, trace write included", |b| {
        b.iter(|| common::list_files_call(&mut session))
    });
}

fn snapshot_with_big_read_only_file(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("data")).unwrap();
    common::write_random_file(&ws.join("data/big.bin"), 1024);
    std::fs::write(ws.join("train.py"), "print(0)\n").unwrap();
    let setup = Instant::now();
    let mut session = common::session(tmp.path(), &["data/**".to_string()]);
    println!(
        "first snapshot, hashing and storing the 1 GiB file: {:.0} ms",
        setup.elapsed().as_secs_f64() * 1000.0
    );
    let mut n = 0u64;
    c.bench_function("snapshot after one small edit, 1 GiB read-only file present", |b| {
        b.iter(|| {
            n += 1;
            std::fs::write(session.files.root().join("train.py"), format!("print({n})\n")).unwrap();
            session
                .recorder
                .snapshot_now(session.files.handle(), "bench")
                .unwrap()
                .expect("a change was made")
        })
    });
}

/// Whole episodes with the probe agents, read back from their records.
fn agent_level() {
    let probes = common::probes();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let host = Runner::new(&cache, Arc::new(LocalSandbox::detect().unwrap())).unwrap();
    let task = common::fixture_task();

    runtime.block_on(async {
        let agent_path = probes.join("first_call.wasm");
        let cold = host.load_agent(&agent_path).await.expect("build the probes: scripts/bench.sh does");
        assert!(!cold.from_cache);
        let mut load = Vec::new();
        let mut first_call = Vec::new();
        for seed in 0..30 {
            let agent = host.load_agent(&agent_path).await.unwrap();
            assert!(agent.from_cache);
            let dir = tmp.path().join(format!("start/{seed}"));
            let spec = EpisodeRequest::new(agent.clone(), Configured::unchanged(task.clone()), seed, dir);
            let (record, _) = host.run_episode(&spec, std::future::pending()).await.unwrap();
            load.push(agent.load_ms);
            first_call.push(record.end.unwrap().first_call_ms.unwrap());
        }
        let (load, first) = (common::median(&mut load), common::median(&mut first_call));
        println!("agent start, cold compile of first_call.wasm: {:.1} ms", cold.load_ms);
        println!("agent start from the compile cache: load {load:.2} ms + instantiate to first host call {first:.2} ms = {:.2} ms (median of 30; target ≤ 10 ms)", load + first);

        let agent_path = probes.join("tool_call_latency.wasm");
        let agent = host.load_agent(&agent_path).await.unwrap();
        let overrides = Overrides { max_steps: Some(20_000), ..Overrides::default() };
        let configured = Configured::new(task.clone(), &overrides).unwrap();
        let spec = EpisodeRequest::new(agent.clone(), configured, 0, tmp.path().join("latency"));
        let (record, _) = host.run_episode(&spec, std::future::pending()).await.unwrap();
        let answer = record.end.unwrap().answer.unwrap_or_default();
        println!("tool call as the agent sees it (list-files, wasm → host → trace → wasm): {answer}");
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(200).measurement_time(Duration::from_secs(5));
    targets = tool_call, snapshot_with_big_read_only_file
}

fn main() {
    benches();
    agent_level();
    Criterion::default().configure_from_args().final_summary();
}
