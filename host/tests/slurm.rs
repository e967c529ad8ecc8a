//! `mlrb bench --on slurm` on a real one-node Slurm started by the test:
//! the same results as the same bench run locally while a worker job is
//! cancelled mid-episode (`scancel`), another requeued (`scontrol
//! requeue`), and the submitting process itself is killed and resumed.
//! The stopped workers' episodes go on from their last recorded step on
//! the next worker: no recorded step runs twice.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{done_lines, outcomes, plan, served, slow_task, wait_for};
use common::gpu::{FakeGpus, gpu_task, gpus_seen, probes};
use common::slurm::{Cluster, cluster_or_skip};
use serde_json::Value;

const PLAN: &str = "on = \"slurm\"\n[cluster]\nlisten = \"127.0.0.1:0\"\nlease_seconds = 4\nworkers = 2\nparallel = 1\n[slurm]\ncpus_per_worker = 1\n";

/// `mlrb bench --quiet --json ARGS` against the cluster.
fn mlrb_bench(cluster: &Cluster, args: &[&std::ffi::OsStr]) -> Child {
    common::mlrb()
        .env("SLURM_CONF", cluster.conf())
        .args(["bench", "--quiet", "--json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A new bench in `run` with `args`.
fn bench(cluster: &Cluster, args: &[&str], run: &Path) -> Child {
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
    all.extend([
        "--out".as_ref(),
        run.parent().unwrap().as_os_str(),
        "--run-name".as_ref(),
        run.file_name().unwrap(),
    ]);
    mlrb_bench(cluster, &all)
}

/// Waits for a bench to succeed, or fails with its output and the workers' logs.
fn succeeded(child: Child, run: &Path) {
    let output = finish(child, Duration::from_secs(300));
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        logs(run)
    );
}

fn finish(child: Child, within: Duration) -> std::process::Output {
    let started = Instant::now();
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !waiter.is_finished() {
        if started.elapsed() > within {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            let output = waiter.join().unwrap();
            panic!(
                "the bench did not finish within {within:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    waiter.join().unwrap()
}

fn job_of(run: &Path) -> String {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(run.join("cluster/slurm.json")) {
            let jobs: Value = serde_json::from_str(&text).unwrap();
            if let Some(job) = jobs["jobs"][0].as_str() {
                return job.to_string();
            }
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no job submitted");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn logs(run: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(run.join("cluster/slurm")).into_iter().flatten() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            text.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
    text
}

fn check_against(run: &Path, reference: &[(Value, Value, Value, Value)]) {
    assert_eq!(
        outcomes(run),
        reference,
        "results on Slurm differ from the local bench's"
    );
    let done = done_lines(run);
    assert_eq!(done.len(), reference.len());
    assert!(done.values().all(|&n| n == 1), "{done:?}");
}

/// Over the run's episodes: steps recorded more than once, and steps at or
/// before a resume's point that ran again after it. Each episode that was
/// resumed must say so, with the step it went on after.
fn steps_run_twice(run: &Path) -> usize {
    let mut twice = 0;
    let mut resumed = 0;
    for entry in walkdir::WalkDir::new(run).into_iter().filter_map(|e| e.ok()) {
        if entry.file_name() != "episode.json" || entry.path().to_string_lossy().contains("/cluster/") {
            continue;
        }
        let dir = entry.path().parent().unwrap();
        let events = common::read_events(dir);
        let steps: Vec<u64> = events.iter().filter_map(|e| e["step"].as_u64()).collect();
        let mut distinct = steps.clone();
        distinct.sort();
        distinct.dedup();
        twice += steps.len() - distinct.len();
        if let Some(at) = events.iter().position(|e| e["function"] == "resume") {
            resumed += 1;
            let after = events[at]["args"]["after_step"].as_u64().unwrap();
            twice += events[at..]
                .iter()
                .filter_map(|e| e["step"].as_u64())
                .filter(|s| *s <= after)
                .count();
        }
    }
    assert!(resumed >= 1, "no episode of {} holds a resume mark", run.display());
    twice
}

#[test]
fn a_bench_on_slurm_loses_and_duplicates_nothing_through_scancel_requeue_and_a_killed_submitter() {
    let Some(cluster) = cluster_or_skip("slurm") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_task(tmp.path(), 4);
    let agents = [common::agent("baseline"), common::agent("validator")];
    let plan_path: PathBuf = plan(tmp.path(), &agents, &task, 2, PLAN);
    let local = tmp.path().join("local");
    let on_local = ["--on", "local", "--plan", plan_path.to_str().unwrap()];
    succeeded(bench(&cluster, &on_local, &local), &local);
    let reference = outcomes(&local);
    assert_eq!(reference.len(), 4);

    // scancel of one array task and requeue of the other, both mid-episode.
    let run = tmp.path().join("slurm");
    let started = Instant::now();
    let mut child = bench(&cluster, &["--plan", plan_path.to_str().unwrap()], &run);
    let (url, token) = served(&run, &mut child);
    let job = job_of(&run);
    wait_for(&url, &token, "leased by both workers", |s| s["leased"] == 2);
    // Into their 4 s scripts, past their first recorded call: what a stop
    // suspends and the next worker resumes from.
    std::thread::sleep(Duration::from_secs(2));
    let cancel = cluster.command("scancel").arg(format!("{job}_0")).status().unwrap();
    assert!(cancel.success());
    let requeue = cluster
        .command("scontrol")
        .args(["requeue", &format!("{job}_1")])
        .status()
        .unwrap();
    assert!(requeue.success());
    succeeded(child, &run);
    let wall = started.elapsed();
    check_against(&run, &reference);
    let worker_logs = logs(&run);
    assert!(
        worker_logs.contains("stopped: told to stop"),
        "no worker gave its leases back:\n{worker_logs}"
    );
    let db = rusqlite::Connection::open(run.join("cluster/queue.sqlite")).unwrap();
    let requeued: i64 = db
        .query_row("SELECT COUNT(*) FROM leases WHERE worker LIKE '%-r1#%'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(requeued >= 1, "the requeued job never leased again:\n{worker_logs}");
    let resumed: i64 = db.query_row("SELECT COUNT(*) FROM resumes", [], |r| r.get(0)).unwrap();
    assert!(resumed >= 1, "no stopped episode was resumed:\n{worker_logs}");
    assert_eq!(steps_run_twice(&run), 0, "a recorded step ran again after a resume");
    assert!(
        cluster
            .jobs()
            .iter()
            .all(|(_, state)| state != "RUNNING" && state != "PENDING"),
        "workers left behind: {:?}",
        cluster.jobs()
    );
    let episodes_ms: u64 = std::fs::read_to_string(run.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["wall_ms"].as_u64().unwrap())
        .sum();
    eprintln!(
        "slurm: bench wall {:.1} s with 2 workers; episodes' sum / 2 = {:.1} s",
        wall.as_secs_f64(),
        episodes_ms as f64 / 2000.0
    );

    // The submitting process killed after the first result; resumed.
    let run = tmp.path().join("resumed");
    let mut child = bench(&cluster, &["--plan", plan_path.to_str().unwrap()], &run);
    let (url, token) = served(&run, &mut child);
    wait_for(&url, &token, "one result in", |s| s["done"].as_u64() >= Some(1));
    child.kill().unwrap();
    child.wait().unwrap();
    succeeded(mlrb_bench(&cluster, &["--resume".as_ref(), run.as_os_str()]), &run);
    check_against(&run, &reference);
}

/// A GPU task on Slurm nodes without Docker: the plan names the node's GPU
/// and no sandbox; the worker runs the episode in the local sandbox, its
/// script seeing the device it leased and no other.
#[test]
fn a_gpu_task_on_slurm_runs_in_the_local_sandbox_with_its_leased_device() {
    let Some(host) = FakeGpus::new(true) else {
        return;
    };
    let Some(cluster) = cluster_or_skip("slurm gpu") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let task = gpu_task(tmp.path(), 0);
    let plan_path = plan(
        tmp.path(),
        &[common::agent("baseline")],
        &task,
        1,
        &format!("gpus = [\"1\"]\n{PLAN}"),
    );
    let run = tmp.path().join("gpu");
    let mut command = common::mlrb();
    command
        .env("SLURM_CONF", cluster.conf())
        .args([
            "bench",
            "--quiet",
            "--json",
            "--plan",
            plan_path.to_str().unwrap(),
            "--out",
        ])
        .arg(tmp.path())
        .args(["--run-name", "gpu"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The fake host's settings reach the workers as Slurm exports them.
    host.apply(&mut command);
    succeeded(command.spawn().unwrap(), &run);
    let dir = run.join("hostile/baseline/1");
    let episode: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("episode.json")).unwrap()).unwrap();
    assert_eq!(episode["gpus"], serde_json::json!(["1"]));
    let sandbox = episode["host"]["sandbox"].as_str().unwrap();
    assert!(sandbox.starts_with("local (bubblewrap"), "{sandbox}");
    let db = rusqlite::Connection::open(run.join("cluster/queue.sqlite")).unwrap();
    let by_slurm: i64 = db
        .query_row("SELECT COUNT(*) FROM leases WHERE worker LIKE 'slurm-%'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(by_slurm, 1, "leased by a Slurm worker:\n{}", logs(&run));
    let seen = probes(&dir.join("exec"));
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(gpus_seen(&seen[0]), ["nvidia1"], "{}", seen[0]);
    assert_eq!(seen[0]["cuda"], "GPU-11111111-fake");
}
