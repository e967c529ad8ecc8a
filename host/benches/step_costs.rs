//! What one step of an episode costs the host, in one run:
//!
//! * a cheap tool call (`list-files`, trace write included);
//! * the snapshot after a step: with a 1 GiB file in the workspace, and
//!   with 20,000 and 200,000 small files, one of them changed (time and
//!   bytes written), and the first snapshot of each;
//! * a trivial Python script's start: unsandboxed `/usr/bin/python3` (the
//!   reference), in the local sandbox (bubblewrap), and in the episode's
//!   Docker container (skipped, saying so, without the image), each through
//!   the episode's launcher, whose start the first script pays (printed
//!   apart);
//! * the host's peak resident memory, after hashing the 1 GiB file and at
//!   the end.
//!
//! Targets: one changed file ≤ 20 ms at 20k files, ≤ 100 ms at 200k; the
//! local sandbox within 1.2× of bare python3; Docker exec ≤ 30 ms over it;
//! hashing 1 GiB does not show as 1 GiB resident. Run with
//! `scripts/bench.sh` (or `cargo bench --profile dev -p mlrb-host --bench
//! step_costs [-- snapshots|scripts]`).

mod common;

use std::time::{Duration, Instant};

use mlrb::sandbox::docker::DockerSandbox;
use mlrb::sandbox::image::ImageRecipe;
use mlrb::sandbox::local::LocalSandbox;
use mlrb::sandbox::{CommandLimits, EpisodeSetup, Exec, Mount, Sandbox};

const SCRIPT_RUNS: usize = 40;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn tool_call() {
    let tmp = tempfile::tempdir().unwrap();
    let mut session = common::small_session(tmp.path());
    let mut times = Vec::new();
    for _ in 0..5000 {
        let started = Instant::now();
        common::list_files_call(&mut session);
        times.push(started.elapsed().as_secs_f64() * 1e6);
    }
    println!(
        "tool call (list-files, 10 entries, trace write included): {:.1} µs (median of 5000)",
        common::median(&mut times)
    );
}

/// Times the snapshots after `steps` steps that each change `changed` in
/// the workspace of `session`: median milliseconds and bytes written.
fn changed_steps(session: &mut common::Session, changed: &str, steps: usize) -> (f64, f64) {
    let (mut times, mut written) = (Vec::new(), Vec::new());
    for n in 0..steps {
        std::fs::write(session.files.root().join(changed), format!("changed {n}\n")).unwrap();
        let started = Instant::now();
        session
            .recorder
            .snapshot_now(session.files.handle(), "step")
            .unwrap()
            .expect("a change");
        times.push(ms(started.elapsed()));
        written.push(session.recorder.snapshots.last().unwrap().stats.written_bytes as f64);
    }
    (common::median(&mut times), common::median(&mut written))
}

fn snapshot_of_big_file() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("data")).unwrap();
    common::write_random_file(&ws.join("data/big.bin"), 1024);
    std::fs::write(ws.join("train.py"), "print(0)\n").unwrap();
    let before = common::peak_rss_mib();
    let started = Instant::now();
    let mut session = common::session(tmp.path(), &[]);
    let first = ms(started.elapsed());
    let after = common::peak_rss_mib();
    let (step, written) = changed_steps(&mut session, "train.py", 20);
    println!(
        "snapshot, 1 GiB file: first {first:.0} ms (hashing and storing it); after one small edit {step:.2} ms, \
         {written:.0} bytes written (median of 20)"
    );
    println!("peak RSS before hashing 1 GiB {before:.0} MiB, after {after:.0} MiB");
}

fn snapshot_of_many_files(files: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let dirs = (files / 200).max(1);
    for i in 0..files {
        let dir = ws.join(format!("d{:04}", i % dirs));
        if i < dirs {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("f{i}.txt")), i.to_string()).unwrap();
    }
    let started = Instant::now();
    let mut session = common::session(tmp.path(), &[]);
    let first = ms(started.elapsed());
    let (unchanged, _) = {
        let started = Instant::now();
        let none = session.recorder.snapshot_now(session.files.handle(), "step").unwrap();
        assert!(none.is_none(), "nothing changed");
        (ms(started.elapsed()), 0)
    };
    let (step, written) = changed_steps(&mut session, "d0007/f7.txt", 20);
    println!(
        "snapshot, {files} files in {dirs} folders: first {first:.0} ms; nothing changed {unchanged:.1} ms; \
         one changed file {step:.1} ms, {written:.0} bytes written (median of 20)"
    );
}

fn limits() -> CommandLimits {
    CommandLimits::new(&mlrb::limits::Limits::default(), Duration::from_secs(60))
}

fn median_of(times: Vec<Duration>) -> f64 {
    let mut times: Vec<f64> = times.into_iter().map(ms).collect();
    common::median(&mut times)
}

fn script_start(runtime: &tokio::runtime::Runtime) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("trivial.py"), "import sys; sys.exit(0)\n").unwrap();
    let bare = median_of(
        (0..SCRIPT_RUNS)
            .map(|_| {
                let started = Instant::now();
                let status = std::process::Command::new("/usr/bin/python3")
                    .arg(ws.join("trivial.py"))
                    .current_dir(&ws)
                    .status()
                    .unwrap();
                assert!(status.success());
                started.elapsed()
            })
            .collect(),
    );
    println!("trivial script, unsandboxed /usr/bin/python3: {bare:.1} ms (median of {SCRIPT_RUNS})");
    let setup = EpisodeSetup {
        name: tmp.path().display().to_string(),
        mounts: vec![Mount::writable(&ws, "/workspace")],
        cwd: "/workspace".into(),
        network: mlrb::sandbox::Reach::Nothing,
        limits: limits(),
        gpus: vec![],
        lifetime: Duration::from_secs(3600),
    };
    let exec = |argv: &[&str]| Exec {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        env: Vec::new(),
        timeout: Duration::from_secs(60),
        log_prefix: None,
        stop: Default::default(),
    };
    // Medians of the trivial script and of `true` (what the sandbox itself
    // costs), and the episode's first script, which also starts its launcher.
    let in_sandbox = |sandbox: &dyn Sandbox| {
        runtime.block_on(async {
            let episode = sandbox.open_episode(setup.clone()).await.unwrap();
            let mut medians = Vec::new();
            let mut first = 0.0;
            for argv in [&["python3", "trivial.py"][..], &["true"][..]] {
                let mut times = Vec::new();
                for _ in 0..SCRIPT_RUNS {
                    let started = Instant::now();
                    let outcome = episode.exec(exec(argv)).await.unwrap();
                    assert!(outcome.success(), "{outcome:?}");
                    times.push(started.elapsed());
                }
                if medians.is_empty() {
                    first = ms(times.remove(0));
                }
                medians.push(median_of(times));
            }
            episode.close().await.unwrap();
            (medians[0], medians[1], first)
        })
    };
    let local = LocalSandbox::detect().expect("bubblewrap");
    let (local_ms, local_true, local_first) = in_sandbox(&local);
    println!(
        "trivial script, local sandbox ({}): {local_ms:.1} ms, {:.2}× bare (target ≤ 1.2×); `true`: {local_true:.1} ms; \
         the episode's first script, which starts its launcher: {local_first:.1} ms",
        local.describe(),
        local_ms / bare
    );
    let docker = runtime.block_on(DockerSandbox::connect(&ImageRecipe::standard(false).tag()));
    match docker {
        Ok(docker) => {
            let (exec_ms, exec_true, first) = in_sandbox(&docker);
            println!(
                "trivial script, in the episode's Docker container: {exec_ms:.1} ms, {:+.1} ms over bare \
                 (target ≤ 30 ms); `true`: {exec_true:.1} ms; the episode's first script, which starts its \
                 launcher: {first:.1} ms",
                exec_ms - bare
            );
        }
        Err(e) => println!("trivial script, Docker: skipped ({e:#}); `mlrb image build` makes the image"),
    }
}

fn main() {
    // `-- snapshots` or `-- scripts` runs that part alone (cargo adds `--bench`).
    let parts: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let wanted = |part: &str| parts.is_empty() || parts.iter().any(|p| p == part);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if wanted("snapshots") {
        tool_call();
        snapshot_of_big_file();
        snapshot_of_many_files(20_000);
        snapshot_of_many_files(200_000);
    }
    if wanted("scripts") {
        script_start(&runtime);
    }
    println!("host peak RSS over the whole run: {:.0} MiB", common::peak_rss_mib());
}
