//! mlrb's core performance targets, measured:
//!
//! * host overhead of one workspace tool call (`list-files` on a small
//!   folder, trace write included): criterion, and from inside an agent;
//! * starting a Rust agent from the compile cache, to its first host call;
//! * a snapshot after a step that changed one small file, with a 1 GiB
//!   read-only data file in the workspace.
//!
//! Run with `scripts/bench.sh` (the dev profile, whose dependencies are
//! optimised; it needs the probe agents built for wasm32-wasip2).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use mlrb::capability::exec::{ScriptLimits, ScriptRunner, episode_setup};
use mlrb::capability::workspace::{Workspace, WorkspaceLimits};
use mlrb::capability::{Session, TaskInfoRecord};
use mlrb::episode::{AgentLimits, EpisodeSpec, Host};
use mlrb::record::snapshot::SnapshotStore;
use mlrb::record::trace::Trace;
use mlrb::sandbox::Sandbox;
use mlrb::sandbox::local::LocalSandbox;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn task_info() -> TaskInfoRecord {
    TaskInfoRecord {
        name: "bench".into(),
        version: "1".into(),
        research_problem: "measure".into(),
        metric: "x".into(),
        higher_is_better: true,
        baseline: None,
        max_steps: u32::MAX,
        wall_seconds: 3600,
        llm_tokens: 0,
        llm_cost_usd: 0.0,
    }
}

fn session(dir: &Path, read_only: &[String]) -> Session {
    let workspace = Workspace::open(
        &dir.join("ws"),
        &dir.join("history"),
        read_only,
        WorkspaceLimits::default(),
    )
    .unwrap();
    let limits = ScriptLimits {
        max_timeout: Duration::from_secs(60),
        memory_bytes: 1 << 30,
        max_processes: 64,
        cpus: 1.0,
        network: false,
        output_cap: 32 << 10,
        output_kill_bytes: 1 << 28,
        max_args: 16,
        max_arg_bytes: 64 << 10,
        max_total_arg_bytes: 256 << 10,
        workspace: mlrb::record::walk::Usage {
            entries: 1_000_000,
            bytes: 10 << 30,
            allocated_bytes: 10 << 30,
        },
    };
    let started = Instant::now();
    let sandbox = LocalSandbox::detect().unwrap();
    let setup = episode_setup("bench", &workspace, &limits, Vec::new());
    let episode_sandbox = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(sandbox.open_episode(setup))
        .unwrap();
    let mut session = Session::new(
        workspace,
        ScriptRunner::new(episode_sandbox, limits, dir.join("exec")),
        Trace::create(&dir.join("events.jsonl"), started, u64::MAX).unwrap(),
        SnapshotStore::create(&dir.join("snapshots")).unwrap(),
        task_info(),
        started,
        started + Duration::from_secs(3600),
    );
    session.initial_snapshot().unwrap();
    session
}

fn tool_call(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("ws")).unwrap();
    for i in 0..10 {
        std::fs::write(tmp.path().join(format!("ws/file{i}.py")), "print('hello')\n").unwrap();
    }
    let mut session = session(tmp.path(), &[]);
    c.bench_function("list-files alone, 10 entries (the file system's share)", |b| {
        b.iter(|| session.workspace.list_files("").unwrap())
    });
    c.bench_function("tool call: list-files, 10 entries, trace write included", |b| {
        b.iter(|| {
            session
                .tool_call(
                    "workspace",
                    "list-files",
                    serde_json::json!({ "dir": "" }),
                    false,
                    |s| s.workspace.list_files(""),
                )
                .unwrap()
                .unwrap()
        })
    });
}

fn snapshot_with_big_read_only_file(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("data")).unwrap();
    // 1 GiB of real (non-sparse, incompressible) data.
    {
        use std::io::Write;
        let mut file = std::io::BufWriter::new(std::fs::File::create(ws.join("data/big.bin")).unwrap());
        let mut block = vec![0u8; 1 << 20];
        for i in 0..1024u32 {
            let seed = blake3::hash(&i.to_le_bytes());
            let mut reader = blake3::Hasher::new().update(seed.as_bytes()).finalize_xof();
            reader.fill(&mut block);
            file.write_all(&block).unwrap();
        }
    }
    std::fs::write(ws.join("train.py"), "print(0)\n").unwrap();
    let setup = Instant::now();
    let mut session = session(tmp.path(), &["data/**".to_string()]);
    println!(
        "first snapshot, hashing and storing the 1 GiB file: {:.0} ms",
        setup.elapsed().as_secs_f64() * 1000.0
    );
    let mut n = 0u64;
    c.bench_function("snapshot after one small edit, 1 GiB read-only file present", |b| {
        b.iter(|| {
            n += 1;
            std::fs::write(session.workspace.root().join("train.py"), format!("print({n})\n")).unwrap();
            session.snapshot_now("bench").unwrap().expect("a change was made")
        })
    });
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

/// Whole episodes with the probe agents, read back from their records.
fn agent_level() {
    let target = std::env::current_exe()
        .unwrap()
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf();
    let probes = target.join("wasm32-wasip2/release/examples");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let host = Host::new(&cache, Arc::new(LocalSandbox::detect().unwrap())).unwrap();
    let task = mlrb::task::Task::load(&root().join("tests/fixtures/tasks/hostile")).unwrap();

    runtime.block_on(async {
        let agent_path = probes.join("first_call.wasm");
        let cold = host.load_agent(&agent_path).await.expect("build the probes: scripts/bench.sh does");
        assert!(!cold.from_cache);
        let mut load = Vec::new();
        let mut first_call = Vec::new();
        for seed in 0..30 {
            let agent = host.load_agent(&agent_path).await.unwrap();
            assert!(agent.from_cache);
            let spec = EpisodeSpec { agent: agent_path.clone(), task: task.clone(), seed, dir: tmp.path().join(format!("start/{seed}")), limits: AgentLimits::default(), progress: None };
            let (record, _) = host.run_episode(&agent, &spec, std::future::pending()).await.unwrap();
            load.push(agent.load_ms);
            first_call.push(record.end.unwrap().first_call_ms.unwrap());
        }
        let (load, first) = (median(&mut load), median(&mut first_call));
        println!("agent start, cold compile of first_call.wasm: {:.1} ms", cold.load_ms);
        println!("agent start from the compile cache: load {load:.2} ms + instantiate to first host call {first:.2} ms = {:.2} ms (median of 30; target ≤ 10 ms)", load + first);

        let agent_path = probes.join("tool_call_latency.wasm");
        let agent = host.load_agent(&agent_path).await.unwrap();
        let spec = EpisodeSpec {
            agent: agent_path.clone(),
            task: task.clone(),
            seed: 0,
            dir: tmp.path().join("latency"),
            limits: AgentLimits { max_steps: Some(20_000), ..AgentLimits::default() },
            progress: None,
        };
        let (record, _) = host.run_episode(&agent, &spec, std::future::pending()).await.unwrap();
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
