//! The Docker sandbox's per-script overhead: one trivial script as an exec
//! in the episode's long-lived container, against the same script in a
//! fresh container per call (what `docker run` per script would cost), and
//! against the bare script on the host. Target: exec at least 3× cheaper
//! than a fresh container, and at most 150 ms over the bare script.
//!
//! Needs the runtime image (`mlrb image build`); run with `scripts/bench.sh`.

use std::time::{Duration, Instant};

use mlrb::sandbox::docker::DockerSandbox;
use mlrb::sandbox::image::ImageRecipe;
use mlrb::sandbox::{Command, CommandLimits, EpisodeSetup, Exec, Mount, Sandbox};

const RUNS: usize = 30;
const SCRIPT: &str = "import sys; sys.exit(0)";

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let workspace = tmp.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("trivial.py"), SCRIPT).unwrap();
    let argv: Vec<String> = ["python3", "/workspace/trivial.py"].map(String::from).to_vec();

    // Debian's Python, the same interpreter the image has.
    let bare = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            let status = std::process::Command::new("/usr/bin/python3")
                .arg(workspace.join("trivial.py"))
                .status()
                .unwrap();
            assert!(status.success());
            started.elapsed()
        })
        .collect();
    let bare = median(bare);

    runtime.block_on(async {
        let sandbox = DockerSandbox::connect(&ImageRecipe::standard(false).tag())
            .await
            .expect("run `mlrb image build` first");
        let limits = CommandLimits {
            memory_bytes: 1 << 30,
            max_processes: 128,
            cpus: 1.0,
            max_file_bytes: 1 << 30,
            output_kill_bytes: 1 << 20,
            ..CommandLimits::new(&mlrb::limits::Limits::default(), Duration::from_secs(60))
        };
        let setup = EpisodeSetup {
            name: tmp.path().display().to_string(),
            mounts: vec![Mount::writable(&workspace, "/workspace")],
            cwd: "/workspace".into(),
            network: mlrb::sandbox::Reach::Nothing,
            limits: limits.clone(),
            gpus: vec![],
            lifetime: Duration::from_secs(3600),
        };
        let exec = Exec {
            argv: argv.clone(),
            env: Vec::new(),
            timeout: Duration::from_secs(60),
            log_prefix: None,
            stop: Default::default(),
        };

        let episode = sandbox.open_episode(setup.clone()).await.unwrap();
        let mut in_episode = Vec::new();
        for _ in 0..RUNS {
            let started = Instant::now();
            assert!(episode.exec(exec.clone()).await.unwrap().success());
            in_episode.push(started.elapsed());
        }
        episode.close().await.unwrap();
        let in_episode = median(in_episode);

        let mut fresh = Vec::new();
        for _ in 0..RUNS {
            let command = Command {
                argv: argv.clone(),
                cwd: "/workspace".into(),
                mounts: setup.mounts.clone(),
                env: vec![],
                network: mlrb::sandbox::Reach::Nothing,
                limits: limits.clone(),
                gpus: Vec::new(),
                log_prefix: None,
                stop: Default::default(),
                meter: Default::default(),
            };
            let started = Instant::now();
            assert!(sandbox.run(command).await.unwrap().success());
            fresh.push(started.elapsed());
        }
        let fresh = median(fresh);

        println!("bare script on the host:            {bare:7.1} ms (median of {RUNS})");
        println!(
            "exec in the episode's container:    {in_episode:7.1} ms, {:+.1} ms over bare (target ≤ 150 ms)",
            in_episode - bare
        );
        println!("fresh container per call:           {fresh:7.1} ms");
        println!(
            "exec is {:.1}× cheaper than a fresh container (target ≥ 3×)",
            fresh / in_episode
        );
    });
}
