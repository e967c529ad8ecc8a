//! Replay and fork: a 50-step episode whose ten scripts work three seconds
//! each, on a task whose workspace holds 1 GiB, is run once; then replayed
//! (`mlrb replay`, hermetic: no script, no model, no clock) and forked after
//! step 10 with another agent that makes one call (`mlrb fork --agent`).
//! Prints the episode's wall time, the replay's, and the fork's start:
//! materializing the 1 GiB snapshot after step 10, and the whole fork
//! command to a scored one-call episode.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

fn mlrb() -> Command {
    let mut command = Command::new(common::target_dir().join("debug/mlrb"));
    command.env("MLRB_TASKS_DIR", common::root().join("tasks"));
    command
}

fn probe(name: &str) -> PathBuf {
    let path = common::probes().join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{}: build the probe agents first (scripts/bench.sh does)",
        path.display()
    );
    path
}

fn run(command: &mut Command) -> (f64, serde_json::Value) {
    let started = Instant::now();
    let output = command.output().unwrap();
    let seconds = started.elapsed().as_secs_f64();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json = serde_json::from_slice(&output.stdout).unwrap_or_default();
    (seconds, json)
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    // A task like digits, with 1 GiB more in its workspace.
    let task = tmp.path().join("digits-1g");
    let digits = common::root().join("tasks/digits");
    let copied = Command::new("cp").arg("-r").arg(&digits).arg(&task).status().unwrap();
    assert!(copied.success());
    // Real bytes (not a sparse file), so copies and hashes cost what they would.
    let mut big = std::io::BufWriter::new(std::fs::File::create(task.join("env/big.bin")).unwrap());
    let mut block: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for i in 0..1024u64 {
        block[..8].copy_from_slice(&i.to_le_bytes());
        std::io::Write::write_all(&mut big, &block).unwrap();
    }
    drop(big);
    let out = tmp.path().join("runs");
    let cache = tmp.path().join("cache");

    let (_, recorded) = run(mlrb()
        .env("MLRB_CACHE_DIR", &cache)
        .args(["run", "--json", "--run-name", "parent", "--agent"])
        .arg(probe("long_episode"))
        .arg("--task")
        .arg(&task)
        .arg("--out")
        .arg(&out));
    let dir = PathBuf::from(recorded["dir"].as_str().unwrap());
    let episode_ms = recorded["episode"]["end"]["wall_ms"].as_u64().unwrap();
    let steps = &recorded["episode"]["end"]["steps"];

    let (replay_s, replayed) = run(mlrb()
        .env("MLRB_CACHE_DIR", &cache)
        .args(["replay", "--json"])
        .arg(&dir));
    assert!(replayed["differences"].as_array().unwrap().is_empty(), "{replayed}");

    let snapshots = dir.join("snapshots");
    // The last snapshot a step up to 10 took ("step N: ...").
    let step_of = |label: &str| label.strip_prefix("step ")?.split(':').next()?.parse::<u32>().ok();
    let after_10 = mlrb::record::snapshot::list_manifests(&snapshots)
        .unwrap()
        .into_iter()
        .rfind(|m| step_of(&m.label).is_some_and(|n| n <= 10))
        .unwrap();
    let manifest = mlrb::record::snapshot::read_manifest(&snapshots, after_10.id).unwrap();
    let started = Instant::now();
    mlrb::record::snapshot::materialize_writable(&snapshots, &manifest, &tmp.path().join("materialized")).unwrap();
    let materialize_s = started.elapsed().as_secs_f64();

    let (fork_s, forked) = run(mlrb()
        .env("MLRB_CACHE_DIR", &cache)
        .arg("fork")
        .arg(&dir)
        .args(["--at-step", "10", "--json", "--run-name", "fork", "--agent"])
        .arg(probe("first_call"))
        .arg("--out")
        .arg(&out));
    assert_eq!(forked["episode"]["fork"]["at_step"], 10);

    println!(
        "episode: {steps} steps, ten 3 s scripts, 1 GiB workspace: {:.1} s",
        episode_ms as f64 / 1000.0
    );
    println!(
        "replay: {:.3} s for the command, {:.1} ms in the agent's replay ({}x faster than the episode)",
        replay_s,
        replayed["wall_ms"].as_f64().unwrap(),
        (episode_ms as f64 / 1000.0 / replay_s).round()
    );
    println!("fork after step 10, 1 GiB workspace: materializing the snapshot {materialize_s:.3} s");
    println!("fork after step 10 with a one-call agent, to its score: {fork_s:.2} s for the command");
}
