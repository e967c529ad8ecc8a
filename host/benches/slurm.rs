//! Scheduling efficiency of `mlrb bench --on slurm` on a one-node Slurm
//! started here: 8 episodes of about 5 s each run by 2 single-CPU workers.
//! Prints the bench's wall time against the episodes' total time over two
//! (what perfect packing onto two workers would take), and the same bench
//! run locally with `-j 2`. Needs root and Slurm (scripts/setup.sh).

#[path = "../tests/common/slurm.rs"]
#[allow(dead_code)]
mod slurm;

use std::path::{Path, PathBuf};
use std::time::Instant;

fn episodes_seconds(run: &Path) -> f64 {
    std::fs::read_to_string(run.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["wall_ms"]
                .as_f64()
                .unwrap()
        })
        .sum::<f64>()
        / 1000.0
}

fn bench(cluster: &slurm::Cluster, plan: &Path, out: &Path, name: &str, on: &str, root: &Path) -> f64 {
    let started = Instant::now();
    let status = cluster
        .command(env!("CARGO_BIN_EXE_mlrb"))
        .args(["bench", "--quiet", "--json", "--plan"])
        .arg(plan)
        .args(["--on", on, "-j", "2", "--cpu-slots", "2", "--out"])
        .arg(out)
        .args(["--run-name", name])
        .env("MLRB_TASKS_DIR", root.join("tasks"))
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the {on} bench failed");
    started.elapsed().as_secs_f64()
}

fn main() {
    let cluster = match slurm::Cluster::start() {
        Ok(cluster) => cluster,
        Err(why) => {
            println!("slurm: skipped, Slurm cannot start here: {why}");
            return;
        }
    };
    let root: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let target = std::env::var("CARGO_TARGET_DIR").map_or(root.join("target"), Into::into);
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("task");
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(root.join("tests/fixtures/tasks/hostile"))
        .arg(&task)
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::write(
        task.join("env/train.py"),
        "import time\ntime.sleep(5)\nwith open(\"submission.csv\", \"w\") as f:\n    f.write(\"id,label\\n1,0\\n\")\n",
    )
    .unwrap();
    let agent = target.join("wasm32-wasip2/release/baseline.wasm");
    let plan = tmp.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "agents = [{:?}]\ntasks = [{:?}]\nseeds = 8\n[cluster]\nlisten = \"127.0.0.1:0\"\nworkers = 2\nparallel = 1\n[slurm]\ncpus_per_worker = 1\n",
            agent.display().to_string(),
            task.display().to_string()
        ),
    )
    .unwrap();
    let on_slurm = bench(&cluster, &plan, tmp.path(), "slurm", "slurm", &root);
    let ideal = episodes_seconds(&tmp.path().join("slurm")) / 2.0;
    let local = bench(&cluster, &plan, tmp.path(), "local", "local", &root);
    let local_ideal = episodes_seconds(&tmp.path().join("local")) / 2.0;
    println!(
        "slurm: 8 episodes on 2 workers in {on_slurm:.1} s; their times summed over 2: {ideal:.1} s; efficiency {:.0} %",
        100.0 * ideal / on_slurm
    );
    println!(
        "slurm: the same bench locally with -j 2 in {local:.1} s (ideal {local_ideal:.1} s, {:.0} %)",
        100.0 * local_ideal / local
    );
}
