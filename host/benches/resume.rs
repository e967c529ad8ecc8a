//! Resuming a killed episode: a 101-step episode (99 small writes, a
//! five-second script, a write) has its host SIGKILLed while the script
//! (step 100) runs, and `mlrb bench --resume` goes on after step 99. Prints the time from the
//! resume command's start to the episode going live again (process start,
//! agent load from the cache, workspace restored from the snapshot after
//! step 99, the 99 recorded calls replayed), and to the whole resumed
//! bench's end. Also what a step's durability costs on this disk: the
//! trace's fdatasync after each step, and a snapshot with its new files,
//! manifest and folders synced.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn mlrb(cache: &Path) -> Command {
    let mut command = Command::new(common::target_dir().join("debug/mlrb"));
    command
        .env("MLRB_TASKS_DIR", common::root().join("tasks"))
        .env("MLRB_CACHE_DIR", cache)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

fn events(episode: &Path) -> String {
    std::fs::read_to_string(episode.join("events.jsonl")).unwrap_or_default()
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(started.elapsed() < Duration::from_secs(300), "never {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn episode_of(run: &Path) -> Option<PathBuf> {
    walkdir::WalkDir::new(run)
        .into_iter()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name() == "episode.json")
        .map(|e| e.path().parent().unwrap().to_path_buf())
}

fn resume_to_live() {
    let agent = common::probes().join("hundred_steps.wasm");
    assert!(
        agent.is_file(),
        "{}: build the probe agents first (scripts/bench.sh does)",
        agent.display()
    );
    let tmp = tempfile::tempdir().unwrap();
    let (cache, out) = (tmp.path().join("cache"), tmp.path().join("runs"));
    // Digits with room for 101 steps.
    let task = tmp.path().join("digits");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(common::root().join("tasks/digits"))
        .arg(&task)
        .status()
        .unwrap();
    assert!(copied.success());
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    std::fs::write(
        task.join("task.toml"),
        toml.replace("max_steps = 50", "max_steps = 150"),
    )
    .unwrap();
    let mut killed = mlrb(&cache)
        .args(["bench", "--quiet", "--seeds", "1", "--run-name", "r", "--task"])
        .arg(&task)
        .arg("--agent")
        .arg(&agent)
        .arg("--out")
        .arg(&out)
        .spawn()
        .unwrap();
    let run = out.join("r");
    wait_for("step 100 running", || {
        episode_of(&run).is_some_and(|e| events(&e).contains("\"step\":99,"))
    });
    std::thread::sleep(Duration::from_millis(500));
    killed.kill().unwrap();
    killed.wait().unwrap();
    let episode = episode_of(&run).unwrap();

    let started = Instant::now();
    let mut resumed = mlrb(&cache)
        .args(["bench", "--quiet", "--resume"])
        .arg(&run)
        .spawn()
        .unwrap();
    wait_for("the resume going live", || {
        events(&episode).contains("\"function\":\"resume\"")
    });
    let live = started.elapsed();
    let status = resumed.wait().unwrap();
    let whole = started.elapsed();
    assert!(status.success(), "the resumed bench failed");
    let text = events(&episode);
    let mark: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["function"] == "resume")
        .unwrap();
    println!(
        "resume of an episode killed during its step 100: live again after {:.0} ms (after step {}), the resumed bench done in {:.1} s (its 5 s script run again)",
        live.as_secs_f64() * 1000.0,
        mark["args"]["after_step"],
        whole.as_secs_f64()
    );
}

/// Median microseconds of `f` over `n` runs.
fn median_us(n: usize, mut f: impl FnMut(usize)) -> f64 {
    let mut times = Vec::new();
    for i in 0..n {
        let started = Instant::now();
        f(i);
        times.push(started.elapsed().as_secs_f64() * 1e6);
    }
    common::median(&mut times)
}

fn durability() {
    use mlrb::record::trace::{Event, Trace, raw};
    let tmp = tempfile::tempdir().unwrap();
    let (args, result) = (
        raw(&serde_json::json!({"path": "train.py"})),
        raw(&serde_json::json!({"ok": "x"})),
    );
    let event = Event {
        prev: "",
        seq: 0,
        t_ms: 0.0,
        interface: "workspace",
        function: "read-file",
        step: Some(1),
        args: &args,
        result: &result,
        duration_us: 0,
        snapshot: None,
        llm: None,
    };
    let mut trace = Trace::create(&tmp.path().join("events.jsonl"), Instant::now(), u64::MAX).unwrap();
    let line = median_us(1000, |_| trace.write(&event).unwrap());
    let synced = median_us(1000, |_| {
        trace.write(&event).unwrap();
        trace.sync().unwrap();
    });
    let file = |i: usize| tmp.path().join(format!("f{i}"));
    let written = median_us(500, |i| std::fs::write(file(i), [7u8; 1024]).unwrap());
    let file_synced = median_us(500, |i| {
        std::fs::write(file(i + 1000), [7u8; 1024]).unwrap();
        std::fs::File::open(file(i + 1000)).unwrap().sync_data().unwrap();
    });
    let mut session = common::small_session(tmp.path());
    let snapshot = median_us(200, |n| {
        std::fs::write(session.files.root().join("file0.py"), format!("print({n})\n")).unwrap();
        session
            .recorder
            .snapshot_now(session.files.handle(), "step")
            .unwrap()
            .expect("a change");
    });
    println!(
        "durability per step (medians): a step's trace line {line:.0} µs, with its fdatasync {synced:.0} µs; a new 1 KiB file {written:.0} µs, synced {file_synced:.0} µs; a one-file snapshot with its new object, trees, manifest and their folders synced {:.2} ms",
        snapshot / 1000.0
    );
}

fn main() {
    // cargo bench passes `--bench`; a plain word picks one part.
    let which = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .unwrap_or_default();
    if which.is_empty() || which == "durability" {
        durability();
    }
    if which.is_empty() || which == "resume" {
        resume_to_live();
    }
}
