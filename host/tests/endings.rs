//! However an episode ends — a trap, the deadline in the middle of a script,
//! Ctrl-C — its trace, final snapshot and reason are on disk. And without
//! bubblewrap nothing runs unsandboxed.

mod common;

use std::time::{Duration, Instant};

#[test]
fn an_agent_that_traps_is_recorded_as_a_trap() {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let finished = common::run_episode(&common::agent("agent_panics"), task.to_str().unwrap(), tmp.path(), &[]);
    assert_eq!(finished.end_reason(), "trap", "{}", finished.json);
    let detail = finished.json["episode"]["end"]["detail"].as_str().unwrap();
    assert!(detail.contains("trapped"), "{detail}");
    // The cause in words, not only a wasm backtrace.
    assert!(detail.contains("Rust panic"), "{detail}");
    // The panic message went to agent.log, and the one step is in the trace.
    let log = std::fs::read_to_string(finished.dir.join("agent.log")).unwrap();
    assert!(log.contains("index out of bounds"), "{log}");
    assert_eq!(
        finished
            .events()
            .iter()
            .filter(|e| e["function"] == "list-files")
            .count(),
        1
    );
    assert!(finished.dir.join("score.json").is_file());
}

#[test]
fn the_deadline_caps_a_script_and_ends_the_episode() {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let started = Instant::now();
    let finished = common::run_episode(
        &common::agent("script_past_deadline"),
        task.to_str().unwrap(),
        tmp.path(),
        &["--wall-seconds", "4"],
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(finished.end_reason(), "timeout");
    let events = finished.events();
    let exec = events
        .iter()
        .find(|e| e["function"] == "execute-script")
        .expect("the script's call is recorded");
    assert_eq!(exec["result"]["ok"]["termination"], "timed-out", "{exec}");
    let ms = exec["result"]["ok"]["duration_ms"].as_u64().unwrap();
    assert!(ms < 4_500, "the script ran {ms} ms in a 4 s episode");
    common::assert_no_process("sleep 2000");
}

#[test]
fn ctrl_c_ends_the_episode_with_its_records() {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let out = tmp.path().join("runs");
    let mut child = common::run_command(&common::agent("infinite_loop"), task.to_str().unwrap(), &out, &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let dir = out.join("t/hostile/infinite_loop/0");
    let waited = Instant::now();
    while !dir.join("episode.json").exists() {
        assert!(waited.elapsed() < Duration::from_secs(30), "the episode never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let episode: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("episode.json")).unwrap()).unwrap();
    assert_eq!(episode["end"]["reason"], "interrupted");
    let score: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("score.json")).unwrap()).unwrap();
    assert!(score["error"].as_str().unwrap().contains("mlrb eval"));
    let final_snapshot = episode["end"]["final_snapshot"].as_u64().unwrap();
    assert!(
        dir.join(format!("snapshots/manifests/{final_snapshot:06}.json"))
            .is_file()
    );
    assert!(dir.join("events.jsonl").is_file());

    // The interrupted episode can be scored afterwards.
    let rescored = common::mlrb().arg("eval").arg(&dir).output().unwrap();
    assert!(
        rescored.status.success(),
        "{}",
        String::from_utf8_lossy(&rescored.stderr)
    );
}

#[test]
fn without_bubblewrap_nothing_runs_and_the_error_says_how_to_install_it() {
    let tmp = tempfile::tempdir().unwrap();
    let output = common::run_command(&common::agent("baseline"), "digits", &tmp.path().join("runs"), &[])
        .env("PATH", tmp.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bubblewrap") && stderr.contains("apt-get install bubblewrap"),
        "{stderr}"
    );
    assert!(stderr.contains("never runs agent scripts unsandboxed"), "{stderr}");
    assert!(!tmp.path().join("runs").exists());
}
