//! Start-up costs as distributions (n, p50, p99, max, and the goal), each
//! through the library's own entry points, as an episode uses them:
//!
//! * `agent`: the `first_call` probe agent loaded from the compile cache by
//!   a fresh host (`Runner::new` + `load_agent`, a cache hit: mapped, MAC
//!   checked, type-checked against the world), and instantiated, timed from
//!   the store's creation to its first host call (the episode's own
//!   `first_call_ms`: `instantiate_async` plus the few guest instructions
//!   before its call). One episode of the fixture task per run. Goal 1 ms.
//! * `local`: `python3 -c pass` as the first script of an episode
//!   (`open_episode` on the local sandbox, then the first `exec`, which
//!   starts the episode's bubblewrap and its launcher) and as each later
//!   script (one `exec` through the running launcher), against the bare
//!   interpreter (`/usr/bin/python3 -c pass` spawned by this process, timed
//!   the same way, before each script, so the machine's load weighs on
//!   both alike): the difference of the medians is what the sandbox adds.
//!   The episode's sandbox and launcher start in the background when it
//!   opens, so the first script is timed twice: right after the open (it
//!   waits for them) and 250 ms after it, as an agent's first script comes
//!   after its start and first snapshot (exec alone).
//!   Goal 10 ms beyond the bare interpreter, first and later. The phases
//!   are printed too: the launcher's start (first − later), and a fresh
//!   sandbox per command (`Sandbox::run`, as task steps use) running
//!   `true` (the sandbox's own exec), the launcher's interpreter with its
//!   imports, and `python3 -c pass`.
//! * `docker`: the same in the Docker sandbox with its image already built
//!   (warm): the first script creates and starts the episode's container.
//!   Goal 300 ms for the first. Skipped, saying why, when the engine or the
//!   image is missing.
//! * `eval`: an evaluation's start-up: `task::evaluate` (the final scoring
//!   an episode ends with: a scratch folder, a fresh sandbox with the hidden
//!   answers mounted, the result file read back and judged) of the fixture
//!   task, whose `eval.py` only checks that two files exist and prints a
//!   score, from the call to its result; against the same `eval.py` run
//!   bare by this process before each evaluation (the script's own work),
//!   so the difference is the start-up. No goal was set; printed for reference.
//!
//! p99 is the nearest rank: with 30 runs it is the largest. Run with
//! `scripts/bench.sh` (or `cargo bench --profile dev -p mlrb-host --bench
//! startup [-- agent|local|docker|eval]`); it needs the probe agents
//! (`cargo build --release --target wasm32-wasip2 -p probe-agents
//! --examples`) and, for `docker`, `mlrb image build`.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlrb::episode::{EndReason, EpisodeRequest, Runner};
use mlrb::sandbox::docker::DockerSandbox;
use mlrb::sandbox::image::ImageRecipe;
use mlrb::sandbox::local::LocalSandbox;
use mlrb::sandbox::{CommandLimits, EpisodeSetup, Exec, Mount, Reach, Sandbox};
use mlrb::task::overrides::Configured;

/// Runs of each figure (episodes, evaluations, bare starts).
const RUNS: usize = 30;
/// What comes between an episode's open and its agent's first script (the
/// agent's instantiation, the first snapshot, its first model call): at
/// least this, for the first script timed after a gap.
const AGENT_GAP: Duration = Duration::from_millis(250);

/// Later scripts run in each episode after its first.
const LATER_PER_EPISODE: usize = 2;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The nearest-rank quantile `q` of sorted `values`.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Prints one distribution's line; returns its median.
fn line(what: &str, samples: &[f64], goal: &str) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p50 = quantile(&sorted, 0.5);
    println!(
        "{what:<62} n={:<3} p50 {p50:8.2} ms  p99 {:8.2} ms  max {:8.2} ms  goal: {goal}",
        sorted.len(),
        quantile(&sorted, 0.99),
        sorted[sorted.len() - 1],
    );
    p50
}

/// One run of a program this process spawns directly, timed.
fn bare(argv: &[&str], cwd: &Path) -> f64 {
    let started = Instant::now();
    let status = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{argv:?}");
    ms(started.elapsed())
}

/// The bare interpreter the sandboxed scripts are compared with.
const BARE: &[&str] = &["/usr/bin/python3", "-c", "pass"];

/// What the episode's launcher (`sandbox/launcher.py`, run with `python3
/// -I -S`) imports before it says it is ready.
const LAUNCHER_IMPORTS: &str = "import json, os, select, signal, socket, sys, time, ctypes";

fn limits() -> CommandLimits {
    CommandLimits::new(&mlrb::limits::Limits::default(), Duration::from_secs(60))
}

fn exec(argv: &[&str]) -> Exec {
    Exec {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        env: Vec::new(),
        timeout: Duration::from_secs(60),
        log_prefix: None,
        stop: Default::default(),
    }
}

fn agent(runtime: &tokio::runtime::Runtime) {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let probe = common::probes().join("first_call.wasm");
    let task = common::fixture_task();
    let (mut load, mut first_call) = (Vec::new(), Vec::new());
    // Run 0 compiles the agent and prepares the task: not counted.
    for run in 0..=RUNS {
        runtime.block_on(async {
            let host = Runner::new(&cache, Arc::new(LocalSandbox::detect().expect("bubblewrap"))).unwrap();
            let agent = host
                .load_agent(&probe)
                .await
                .expect("the probe agents: cargo build --release --target wasm32-wasip2 -p probe-agents --examples");
            let request = EpisodeRequest::new(
                agent.clone(),
                Configured::unchanged(task.clone()),
                run as u64,
                tmp.path().join(format!("episodes/{run}")),
            );
            let (record, _) = host.run_episode(&request, std::future::pending()).await.unwrap();
            let end = record.end.unwrap();
            assert_eq!(end.reason, EndReason::Completed, "{end:?}");
            if run > 0 {
                assert!(agent.from_cache);
                load.push(agent.load_ms);
                first_call.push(end.first_call_ms.unwrap());
            }
        });
    }
    line("agent loaded from the compile cache (fresh host)", &load, "none set");
    line("agent instantiated, to its first host call", &first_call, "1 ms");
}

/// An episode's setup over the workspace `ws`.
fn episode_setup(name: &Path, ws: &Path) -> EpisodeSetup {
    EpisodeSetup {
        name: name.display().to_string(),
        mounts: vec![Mount::writable(ws, "/workspace")],
        cwd: "/workspace".into(),
        network: Reach::Nothing,
        limits: limits(),
        gpus: vec![],
        lifetime: Duration::from_secs(3600),
    }
}

/// Times of `RUNS` episodes in `sandbox`, each one first script and
/// [`LATER_PER_EPISODE`] later ones.
struct Episodes {
    /// `open_episode`.
    open: Vec<f64>,
    /// The first script, `open_episode` included.
    first: Vec<f64>,
    /// The first script of an episode opened [`AGENT_GAP`] before (exec
    /// alone): what an agent meets, whose start and first snapshot come
    /// between the open and its first script.
    first_after_gap: Vec<f64>,
    /// Each later script.
    later: Vec<f64>,
    /// The bare interpreter, run before each script (interleaved, so
    /// that the machine's load weighs on both alike).
    bare: Vec<f64>,
}

fn episodes(runtime: &tokio::runtime::Runtime, sandbox: &dyn Sandbox, ws: &Path) -> Episodes {
    let script = exec(&["python3", "-c", "pass"]);
    let mut times = Episodes {
        open: Vec::new(),
        first: Vec::new(),
        first_after_gap: Vec::new(),
        later: Vec::new(),
        bare: Vec::new(),
    };
    runtime.block_on(async {
        for run in 0..RUNS {
            times.bare.push(bare(BARE, ws));
            let started = Instant::now();
            let episode = sandbox
                .open_episode(episode_setup(&ws.with_extension(run.to_string()), ws))
                .await
                .unwrap();
            times.open.push(ms(started.elapsed()));
            let outcome = episode.exec(script.clone()).await.unwrap();
            times.first.push(ms(started.elapsed()));
            assert!(outcome.success(), "{outcome:?}");
            for _ in 0..LATER_PER_EPISODE {
                times.bare.push(bare(BARE, ws));
                let started = Instant::now();
                let outcome = episode.exec(script.clone()).await.unwrap();
                times.later.push(ms(started.elapsed()));
                assert!(outcome.success(), "{outcome:?}");
            }
            episode.close().await.unwrap();
            let setup = episode_setup(&ws.with_extension(format!("{run}-gap")), ws);
            let episode = sandbox.open_episode(setup).await.unwrap();
            tokio::time::sleep(AGENT_GAP).await;
            times.bare.push(bare(BARE, ws));
            let started = Instant::now();
            let outcome = episode.exec(script.clone()).await.unwrap();
            times.first_after_gap.push(ms(started.elapsed()));
            assert!(outcome.success(), "{outcome:?}");
            episode.close().await.unwrap();
        }
    });
    times
}

/// A command run in a sandbox of its own (as task steps and evaluators are).
fn one_off(runtime: &tokio::runtime::Runtime, sandbox: &dyn Sandbox, ws: &Path, argv: &[&str]) -> Vec<f64> {
    let setup = episode_setup(ws, ws);
    runtime.block_on(async {
        let mut times = Vec::new();
        for _ in 0..RUNS {
            let command = setup.command(exec(argv));
            let started = Instant::now();
            let outcome = sandbox.run(command).await.unwrap();
            times.push(ms(started.elapsed()));
            assert!(outcome.success(), "{outcome:?}");
        }
        times
    })
}

fn scripts(runtime: &tokio::runtime::Runtime, which: &str, sandbox: &dyn Sandbox, first_goal: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    println!("{which} sandbox: {}", sandbox.describe());
    let Episodes {
        open,
        first,
        first_after_gap,
        later,
        bare,
    } = episodes(runtime, sandbox, &ws);
    let bare_p50 = line("bare `/usr/bin/python3 -c pass`, interleaved", &bare, "(baseline)");
    let first_p50 = line(
        &format!("{which}: first script of an episode (open + exec)"),
        &first,
        first_goal,
    );
    let gap_p50 = line(
        &format!(
            "{which}: first script, {} ms after the open (exec)",
            AGENT_GAP.as_millis()
        ),
        &first_after_gap,
        "10 ms beyond bare",
    );
    let later_p50 = line(
        &format!("{which}: each later script (exec)"),
        &later,
        "10 ms beyond bare",
    );
    println!(
        "  beyond bare (p50 − p50): first {:+.1} ms, first after the gap {:+.1} ms, later {:+.1} ms",
        first_p50 - bare_p50,
        gap_p50 - bare_p50,
        later_p50 - bare_p50
    );
    println!("  phases of the first script:");
    line("    open_episode", &open, "—");
    let launcher: Vec<f64> = first
        .iter()
        .zip(later.chunks(LATER_PER_EPISODE))
        .map(|(f, l)| f - l[0])
        .collect();
    line(
        "    sandbox + launcher start (first − next, per episode)",
        &launcher,
        "—",
    );
    line(
        "    fresh sandbox per command: `true`",
        &one_off(runtime, sandbox, &ws, &["true"]),
        "—",
    );
    line(
        "    fresh sandbox per command: the launcher's python, imports",
        &one_off(runtime, sandbox, &ws, &["python3", "-I", "-S", "-c", LAUNCHER_IMPORTS]),
        "—",
    );
    line(
        "    fresh sandbox per command: `python3 -c pass`",
        &one_off(runtime, sandbox, &ws, &["python3", "-c", "pass"]),
        "—",
    );
}

fn docker(runtime: &tokio::runtime::Runtime) {
    let tag = ImageRecipe::standard(false).tag();
    match runtime.block_on(DockerSandbox::connect(&tag)) {
        Ok(docker) => scripts(runtime, "docker", &docker, "300 ms"),
        Err(e) => println!("docker: skipped ({e:#}); `mlrb image build` makes the image"),
    }
}

fn eval(runtime: &tokio::runtime::Runtime) {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let task = common::fixture_task();
    let sandbox = LocalSandbox::detect().expect("bubblewrap");
    let prepared = runtime.block_on(mlrb::task::prepare(&task, &sandbox, &cache)).unwrap();
    let ws = tmp.path().join("ws");
    mlrb::task::populate(&task, &prepared, &ws).unwrap();
    std::fs::write(ws.join("submission.csv"), "id,label\n1,x\n").unwrap();
    let hidden = prepared.hidden_part(task.final_part());
    let script = task.scripts_dir().join("eval.py");
    let argv = [
        "/usr/bin/python3",
        script.to_str().unwrap(),
        ws.to_str().unwrap(),
        hidden.to_str().unwrap(),
    ];
    // The bare script and the evaluation by turns, so that the machine's
    // load weighs on both alike.
    let (mut own_work, mut times) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        own_work.push(bare(&argv, &ws));
        runtime.block_on(async {
            let request = mlrb::task::EvalRequest::final_of(&task, &ws, &prepared, &cache);
            let started = Instant::now();
            let evaluation = mlrb::task::evaluate(&task, &sandbox, request).await.unwrap();
            times.push(ms(started.elapsed()));
            assert_eq!(evaluation.score, Some(1.0), "{evaluation:?}");
        });
    }
    let bare_p50 = line(
        "bare `python3 eval.py` (the script's own work)",
        &own_work,
        "(baseline)",
    );
    let p50 = line("evaluation, call to result (local sandbox)", &times, "none set");
    println!(
        "  start-up beyond the script's own work (p50 − p50): {:+.1} ms",
        p50 - bare_p50
    );
}

fn main() {
    // `-- agent`, `-- local`, `-- docker` or `-- eval` runs that part alone
    // (cargo adds `--bench`).
    let parts: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let wanted = |part: &str| parts.is_empty() || parts.iter().any(|p| p == part);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if wanted("agent") {
        agent(&runtime);
    }
    if wanted("local") {
        scripts(
            &runtime,
            "local",
            &LocalSandbox::detect().expect("bubblewrap"),
            "10 ms beyond bare",
        );
    }
    if wanted("docker") {
        docker(&runtime);
    }
    if wanted("eval") {
        eval(&runtime);
    }
}
