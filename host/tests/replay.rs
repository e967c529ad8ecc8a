//! Replay, fork and verify: every shipped agent replays its recording
//! identically; a changed recorded result stops the replay at the call it
//! changes; forks begin byte for byte as their parent did; tampering with
//! any artefact of a run is found by `mlrb verify`, and a signature holds
//! only with the signer's key.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::llm_server::{LlmServer, Reply};
use serde_json::Value;

fn mlrb(args: &[&str]) -> Output {
    common::mlrb().args(args).output().unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn replay(dir: &Path) -> Output {
    mlrb(&["replay", dir.to_str().unwrap()])
}

fn assert_identical(dir: &Path, what: &str) {
    let replayed = replay(dir);
    let said = text(&replayed);
    assert!(
        replayed.status.success() && said.starts_with("identical"),
        "{what}: {said}"
    );
}

fn lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// The line of `events.jsonl` that recorded the call of step `step`.
fn line_of_step(dir: &Path, step: u64) -> usize {
    common::read_events(dir)
        .iter()
        .position(|e| e["step"].as_u64() == Some(step))
        .unwrap_or_else(|| panic!("{}: no step {step}", dir.display()))
}

#[test]
fn every_shipped_baseline_and_a_clock_reading_agent_replay_identically() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = [
        ("rust", common::agent("baseline")),
        ("python", common::built_agent("plugins/baseline-py", None)),
        ("c", common::built_agent("sdk/c/baseline", None)),
        ("observer", common::agent("observer")),
    ];
    for (name, agent) in &agents {
        let finished = common::run_episode(agent, "digits", &tmp.path().join(name), &["--seed", "5"]);
        assert_eq!(finished.end_reason(), "completed", "{name}: {}", finished.json);
        assert_identical(&finished.dir, name);
        if *name == "observer" {
            // It read clocks and drew random bytes, all recorded.
            let events = finished.events();
            assert!(
                events.iter().any(|e| e["function"] == "clocks"),
                "no clock reads recorded"
            );
            assert!(
                events.iter().any(|e| e["function"] == "random"),
                "no random summary recorded"
            );
        }
    }
}

fn research_step(thought: &str, action: &str, input: &str) -> Reply {
    Reply::Text(format!(
        "Reflection: none.\nResearch Plan and Status: 1. Read. 2. Run. 3. Submit.\n\
         Fact Check: none\nThought: {thought}\nAction: {action}\nAction Input: {input}"
    ))
}

#[test]
fn the_research_agents_replay_identically_with_their_model_answered_from_the_recording() {
    let agents = [
        ("rust", common::agent("research-agent")),
        ("python", common::built_agent("plugins/research-agent-py", None)),
    ];
    for (name, agent) in &agents {
        let server = LlmServer::start(vec![
            research_step("List the files.", "List Files", r#"{"dir_path": "."}"#),
            research_step("Run the starter.", "Execute Script", r#"{"script_name": "train.py"}"#),
            research_step("Submit.", "Final Answer", r#"{"final_answer": "ran the starter"}"#),
        ]);
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("mlrb.toml");
        std::fs::write(&config, server.config("openai", "")).unwrap();
        let mut command = common::run_command(
            agent,
            "digits",
            &tmp.path().join("runs"),
            &["--config", config.to_str().unwrap(), "--json"],
        );
        command.env("MLRB_TEST_LLM_KEY", "sk-test-key-0123456789");
        let finished = common::finish(command);
        assert_eq!(finished.end_reason(), "completed", "{name}: {}", finished.json);
        let asked = server.received().len();
        assert_identical(&finished.dir, name);
        assert_eq!(server.received().len(), asked, "{name}: the replay called the model");
    }
}

/// Rewrites `events.jsonl` of `dir` with `edit` applied to line `at`, the
/// hash chain recomputed after it (as a forger would).
fn forge(dir: &Path, at: usize, edit: impl Fn(&mut Value)) {
    let mut prev = "genesis".to_string();
    let mut out = String::new();
    for (i, line) in lines(dir).iter().enumerate() {
        let mut event: Value = serde_json::from_str(line).unwrap();
        if i == at {
            edit(&mut event);
        }
        event["prev"] = Value::String(prev.clone());
        let written = serde_json::to_string(&event).unwrap();
        prev = mlrb::record::trace::line_hash(written.as_bytes());
        out.push_str(&written);
        out.push('\n');
    }
    std::fs::write(dir.join("events.jsonl"), out).unwrap();
}

#[test]
fn a_changed_recorded_result_stops_the_replay_at_the_call_it_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let finished = common::run_episode(&common::agent("observer"), "digits", tmp.path(), &[]);
    assert_identical(&finished.dir, "observer");

    // The script of step 5 printed something else: the agent then writes
    // seen/04.txt with it, which the recording does not hold.
    let forged = tmp.path().join("forged");
    common::copy_dir(&finished.dir, &forged);
    let script = line_of_step(&forged, 5);
    assert_eq!(common::read_events(&forged)[script]["function"], "execute-script");
    forge(&forged, script, |event| {
        event["result"]["ok"]["stdout"] = "0.5\n".into()
    });
    let replayed = replay(&forged);
    let said = text(&replayed);
    assert!(!replayed.status.success(), "{said}");
    assert!(
        said.contains("differs from the recording") && said.contains("(step 6)") && said.contains("seen/04.txt"),
        "{said}"
    );

    // Changed without the chain recomputed: refused before anything runs.
    let broken = tmp.path().join("broken");
    common::copy_dir(&finished.dir, &broken);
    let text_before = std::fs::read_to_string(broken.join("events.jsonl")).unwrap();
    std::fs::write(
        broken.join("events.jsonl"),
        text_before.replacen("\"step\":3", "\"step\":33", 1),
    )
    .unwrap();
    let said = text(&replay(&broken));
    assert!(said.contains("does not chain"), "{said}");

    // Another component than the one recorded is refused, naming both.
    let other = mlrb(&[
        "replay",
        finished.dir.to_str().unwrap(),
        "--agent",
        common::agent("baseline").to_str().unwrap(),
    ]);
    let said = text(&other);
    assert!(!other.status.success() && said.contains("SHA-256"), "{said}");
}

fn fork(parent: &Path, at: u32, out: &Path, name: &str, extra: &[&str]) -> common::Finished {
    let mut command = common::mlrb();
    command
        .args([
            "fork",
            parent.to_str().unwrap(),
            "--at-step",
            &at.to_string(),
            "--json",
            "--run-name",
            name,
            "--out",
        ])
        .arg(out)
        .args(extra);
    common::finish(command)
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

#[test]
fn forks_at_steps_1_and_3_begin_byte_for_byte_as_their_parent_did() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let parent = common::run_episode(&common::agent("observer"), "digits", &runs, &[]);
    let parent_lines = lines(&parent.dir);
    for k in [1, 3] {
        let child = fork(&parent.dir, k, &runs, &format!("fork{k}"), &[]);
        assert_eq!(child.end_reason(), "completed", "{}", child.json);
        let fork_record = &child.json["episode"]["fork"];
        assert_eq!(fork_record["at_step"], k);
        assert_eq!(fork_record["new_agent"], false);
        assert_eq!(
            PathBuf::from(fork_record["parent"].as_str().unwrap()),
            std::path::absolute(&parent.dir).unwrap()
        );
        let upto = line_of_step(&parent.dir, u64::from(k));
        let child_lines = lines(&child.dir);
        assert_eq!(
            child_lines[..=upto],
            parent_lines[..=upto],
            "fork at {k}: the first steps differ"
        );
        // It went on live: the rest of its steps are its own.
        assert_eq!(
            child.json["episode"]["end"]["steps"],
            parent.json["episode"]["end"]["steps"]
        );
        // No snapshot object was copied: the child's are the parent's files.
        let objects = child.dir.join("snapshots/objects");
        let shared = std::fs::read_dir(&objects)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                let theirs = parent.dir.join("snapshots/objects").join(e.file_name());
                theirs.exists() && inode(&theirs) == inode(&e.path())
            })
            .count();
        assert!(shared > 0, "fork at {k}: no object shared with the parent");
        // A fork replays from its own recording like any episode.
        assert_identical(&child.dir, &format!("fork at {k}"));
    }

    // Another agent goes on from the snapshot after step 3, told the steps so far.
    let other = fork(
        &parent.dir,
        3,
        &runs,
        "other",
        &["--agent", common::agent("baseline").to_str().unwrap()],
    );
    assert_eq!(other.json["episode"]["fork"]["new_agent"], true);
    let events = other.events();
    assert!(
        events
            .iter()
            .any(|e| e["function"] == "fork" && e["args"]["at_step"] == 3)
    );
    let first_step = events.iter().find_map(|e| e["step"].as_u64());
    assert_eq!(
        first_step,
        Some(4),
        "the new agent's first step follows the parent's third"
    );
    // Its workspace started as the parent's after step 3.
    assert!(other.dir.join("workspace/seen/02.txt").is_file());
    assert!(!other.dir.join("workspace/seen/03.txt").exists());

    // The viewer shows the fork tree: the parent's page lists its forks.
    let (_, page) = view_page(&runs, "t/digits/observer/0");
    assert!(
        page.contains("Forks of this episode") && page.contains("fork1/digits/observer/0"),
        "{page}"
    );
    let (_, child_page) = view_page(&runs, "fork3/digits/observer/0");
    assert!(
        child_page.contains("A fork of") && child_page.contains("t/digits/observer/0"),
        "{child_page}"
    );
    let (_, index) = view_page(&runs, "");
    assert!(index.contains("└ fork after step 3"), "{index}");
}

/// A page of `mlrb view <root>`: `/` for an empty id, else the episode's.
fn view_page(root: &Path, id: &str) -> (String, String) {
    let served = common::viewer::serve(root);
    let path = if id.is_empty() {
        String::new()
    } else {
        format!("e/{id}")
    };
    common::viewer::http_get(&format!("{}{path}", served.url))
}

/// A bench of the baseline on digits, one seed: its run directory.
fn small_run(root: &Path) -> PathBuf {
    let out = mlrb(&[
        "bench",
        "--agent",
        common::agent("baseline").to_str().unwrap(),
        "--task",
        "digits",
        "--seeds",
        "1",
        "--quiet",
        "--out",
        root.to_str().unwrap(),
        "--run-name",
        "run",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    root.join("run")
}

fn verify(dir: &Path, extra: &[&str]) -> (bool, String) {
    let mut args = vec!["verify", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = mlrb(&args);
    (out.status.success(), text(&out))
}

/// Changes one byte of `path`: in a JSON file, the first digit after
/// `after` (so it still parses); elsewhere the middle byte.
fn flip_one_byte(path: &Path, after: &str) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = if after.is_empty() {
        bytes.len() / 2
    } else {
        let text = String::from_utf8_lossy(&bytes);
        let start = text
            .find(after)
            .unwrap_or_else(|| panic!("{}: no {after}", path.display()))
            + after.len();
        start + bytes[start..].iter().position(u8::is_ascii_digit).unwrap()
    };
    bytes[at] = match bytes[at] {
        b'9' => b'8',
        b if b.is_ascii_digit() => b + 1,
        b => b ^ 1,
    };
    let mut permissions = std::fs::metadata(path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(path, permissions).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn first_file(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files.into_iter().next().unwrap()
}

#[test]
fn verify_finds_one_changed_byte_in_any_artefact_and_a_signature_holds_only_with_its_key() {
    let tmp = tempfile::tempdir().unwrap();
    let run = small_run(&tmp.path().join("runs"));
    let episode = run.join("digits/baseline/1");
    let (ok, said) = verify(&run, &["--replay"]);
    assert!(ok, "{said}");
    assert!(said.contains("verified  digits/baseline/1"), "{said}");

    let artefacts: Vec<(&str, PathBuf, &str)> = vec![
        ("events", episode.join("events.jsonl"), "\"t_ms\":"),
        ("object", first_file(&episode.join("snapshots/objects")), ""),
        ("tree", first_file(&episode.join("snapshots/trees")), ""),
        (
            "manifest",
            first_file(&episode.join("snapshots/manifests")),
            "\"entries\":",
        ),
        ("score", episode.join("score.json"), "\"score\":"),
        ("episode", episode.join("episode.json"), "\"steps\":"),
        ("results", run.join("results.jsonl"), "\"score\":"),
        ("summary", run.join("summary.json"), "\"runs\":"),
    ];
    let keys = tmp.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let (secret, other) = (keys.join("signer"), keys.join("other"));
    for key in [&secret, &other] {
        assert!(mlrb(&["keygen", "-o", key.to_str().unwrap()]).status.success());
    }
    let public = format!("{}.pub", secret.display());
    let other_public = format!("{}.pub", other.display());
    let signed = mlrb(&["sign", run.to_str().unwrap(), "--key", secret.to_str().unwrap()]);
    assert!(signed.status.success(), "{}", text(&signed));
    let (ok, said) = verify(&run, &["--key", &public, "--no-eval"]);
    assert!(ok && said.contains("signature by the key given"), "{said}");
    let (ok, said) = verify(&run, &["--key", &other_public, "--no-eval"]);
    assert!(!ok && said.contains("not by the key given"), "{said}");

    for (name, path, after) in &artefacts {
        let copy = tmp.path().join(format!("copy-{name}"));
        common::copy_dir(&run, &copy);
        let target = copy.join(path.strip_prefix(&run).unwrap());
        flip_one_byte(&target, after);
        // Signed: the signature names the changed file (objects and trees
        // are named by their hashes, which say it).
        let (ok, said) = verify(&copy, &["--key", &public, "--no-eval"]);
        let named = said.contains("changed since it was signed") || said.contains("does not hash to its name");
        assert!(!ok && named, "{name} (signed): {said}");
        // Unsigned: the records themselves give it away.
        std::fs::remove_file(copy.join("SIGNATURE.json")).unwrap();
        let (ok, said) = verify(&copy, &[]);
        assert!(!ok && said.contains("FAILED"), "{name} (unsigned): {said}");
    }

    // A score moved to another episode's snapshot does not verify either.
    let moved = tmp.path().join("moved");
    common::copy_dir(&run, &moved);
    let score_path = moved.join("digits/baseline/1/score.json");
    let mut score: Value = serde_json::from_slice(&std::fs::read(&score_path).unwrap()).unwrap();
    score["binding"]["snapshot_root"] = "0".repeat(64).into();
    std::fs::write(&score_path, serde_json::to_vec(&score).unwrap()).unwrap();
    let (ok, said) = verify(&moved, &["--no-eval"]);
    assert!(!ok && said.contains("score.json: binds snapshot"), "{said}");

    // A success claimed by editing only what follows from the score: the
    // score, the baseline and the metric say otherwise.
    let edited = tmp.path().join("edited");
    common::copy_dir(&run, &edited);
    let score_path = edited.join("digits/baseline/1/score.json");
    let mut score: Value = serde_json::from_slice(&std::fs::read(&score_path).unwrap()).unwrap();
    assert_eq!(score["success"], false, "{score}");
    score["success"] = true.into();
    score["improvement"] = 0.5.into();
    score["normalized"] = 0.9.into();
    std::fs::write(&score_path, serde_json::to_vec(&score).unwrap()).unwrap();
    let (ok, said) = verify(&edited, &["--no-eval"]);
    for field in ["success", "improvement", "normalized"] {
        assert!(
            !ok && said.contains(&format!("score.json: {field} is")),
            "{field}: {said}"
        );
    }
    // The run's tables are derived from the score too: results.jsonl still
    // holds what the score says, and verify finds no difference there.
    assert!(
        !said
            .lines()
            .any(|l| l.trim_start().starts_with("FAILED") && l.contains("results.jsonl")),
        "{said}"
    );
    assert!(said.contains("verified  run (results.jsonl"), "{said}");

    // A baseline edited with everything that follows from it made
    // consistent: the task the episode names declares another baseline.
    let rebased = tmp.path().join("rebased");
    common::copy_dir(&run, &rebased);
    let score_path = rebased.join("digits/baseline/1/score.json");
    let mut score: Value = serde_json::from_slice(&std::fs::read(&score_path).unwrap()).unwrap();
    let (value, reference) = (score["score"].as_f64().unwrap(), score["reference"].as_f64());
    let improvement = (value - 0.5) / 0.5;
    score["baseline"] = 0.5.into();
    score["improvement"] = improvement.into();
    score["success"] = (improvement > 0.1).into();
    score["normalized"] = reference.map(|r| (value - 0.5) / (r - 0.5)).into();
    std::fs::write(&score_path, serde_json::to_vec(&score).unwrap()).unwrap();
    let (ok, said) = verify(&rebased, &["--no-eval"]);
    assert!(!ok && said.contains("score.json: baseline 5.000000000000e-1"), "{said}");
    assert!(
        !said.contains("score.json: improvement is"),
        "consistent, as edited: {said}"
    );
    // So is a metric turned round, or named otherwise.
    for (field, to) in [("higher_is_better", Value::from(false)), ("metric", "loss".into())] {
        let mut turned =
            serde_json::from_slice::<Value>(&std::fs::read(run.join("digits/baseline/1/score.json")).unwrap()).unwrap();
        turned[field] = to;
        std::fs::write(&score_path, serde_json::to_vec(&turned).unwrap()).unwrap();
        let (ok, said) = verify(&rebased, &["--no-eval"]);
        assert!(
            !ok && said.contains(&format!("score.json: {field} is")),
            "{field}: {said}"
        );
    }
}

/// Processes that keep the CPUs busy (`while :; do :; done`), each ended
/// by its own pid when dropped.
struct BusyLoops(Vec<std::process::Child>);

impl BusyLoops {
    fn start(n: usize) -> Self {
        let spin = || {
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        };
        Self((0..n).map(|_| spin()).collect())
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A timed score with what follows from it made consistent, as a forger
/// who edits `score.json` would: the score (and its rounds) divided by
/// `by`, the improvement, normalised score, success and best score derived
/// again.
fn forge_timing(score_path: &Path, by: f64, spread_low: Option<f64>) {
    let mut score: Value = serde_json::from_slice(&std::fs::read(score_path).unwrap()).unwrap();
    let value = score["score"].as_f64().unwrap() / by;
    let baseline = score["baseline"].as_f64().unwrap();
    let reference = score["reference"].as_f64().unwrap();
    let improvement = (baseline - value) / baseline;
    score["score"] = value.into();
    score["best_score"] = value.into();
    score["improvement"] = improvement.into();
    score["normalized"] = ((value - baseline) / (reference - baseline)).into();
    score["success"] = (improvement > 0.1).into();
    for end in ["low", "high"] {
        let edge = score["spread"][end].as_f64().unwrap() / by;
        score["spread"][end] = edge.into();
    }
    if let Some(low) = spread_low {
        score["spread"]["low"] = low.into();
    }
    std::fs::write(score_path, serde_json::to_vec(&score).unwrap()).unwrap();
}

/// A timed score (vectorize's: CPU time against the reference solution's,
/// in rounds) re-verifies with four busy loops beside `mlrb verify`, where
/// a time on the wall clock would have grown several times over; a score
/// edited better, with everything that follows from it, does not, nor one
/// whose spread was also widened to reach the re-scoring.
fn check_timed_score_under_load(sandbox: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let finished = common::run_episode(
        &common::agent("baseline"),
        "vectorize",
        &tmp.path().join("runs"),
        sandbox,
    );
    let score = &finished.json["score"];
    assert_eq!(score["valid"], true, "{score}");
    let spread = &score["spread"];
    assert!(spread["rounds"].as_u64().unwrap() >= 5, "{score}");
    assert!(score["measures"]["seconds"].as_f64().unwrap() > 0.0, "{score}");
    let recorded = score["score"].as_f64().unwrap();
    assert!(
        spread["low"].as_f64().unwrap() <= recorded && recorded <= spread["high"].as_f64().unwrap(),
        "{score}"
    );
    let load = BusyLoops::start(4);
    let (ok, said) = verify(&finished.dir, sandbox);
    drop(load);
    assert!(ok, "an honest timing did not re-verify under load: {said}");

    let forged = tmp.path().join("forged");
    common::copy_dir(&finished.dir, &forged);
    forge_timing(&forged.join("score.json"), 3.0, None);
    let (ok, said) = verify(&forged, sandbox);
    assert!(!ok && said.contains("score.json says"), "{said}");
    assert!(!said.contains("improvement is"), "consistent, as forged: {said}");
    // A spread widened down to anything: trusted no wider than the re-scoring's.
    forge_timing(&forged.join("score.json"), 1.0, Some(0.0));
    let (ok, said) = verify(&forged, sandbox);
    assert!(!ok && said.contains("score.json says"), "{said}");
}

#[test]
fn a_timed_score_verifies_under_load_and_a_forged_one_does_not() {
    check_timed_score_under_load(&[]);
}

#[test]
fn a_timed_score_verifies_under_load_and_a_forged_one_does_not_in_docker() {
    if common::docker_ready() {
        check_timed_score_under_load(&["--sandbox", "docker"]);
    }
}

#[test]
fn an_episode_whose_task_folder_is_gone_does_not_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("digits-gone");
    common::copy_dir(&common::workspace_root().join("tasks/digits"), &task);
    common::edit_task_toml(&task, "name = \"digits\"", "name = \"digits-gone\"");
    let out = mlrb(&[
        "bench",
        "--agent",
        common::agent("baseline").to_str().unwrap(),
        "--task",
        task.to_str().unwrap(),
        "--seeds",
        "1",
        "--quiet",
        "--out",
        tmp.path().join("runs").to_str().unwrap(),
        "--run-name",
        "run",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let run = tmp.path().join("runs/run");
    let (ok, said) = verify(&run, &["--no-eval"]);
    assert!(ok, "{said}");
    std::fs::remove_dir_all(&task).unwrap();
    let (ok, said) = verify(&run, &["--no-eval"]);
    assert!(!ok && said.contains("its score cannot be checked"), "{said}");
}

#[test]
fn an_invalidated_task_makes_its_results_stale_and_a_resume_runs_them_again() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("runs");
    let run = small_run(&root);
    let invalidate = |more: &[&str]| {
        let mut args = vec!["runs", "invalidate", "--runs", root.to_str().unwrap(), "--task"];
        args.extend_from_slice(more);
        let out = mlrb(&args);
        (out.status.success(), text(&out))
    };
    let (ok, said) = invalidate(&["digits@0.0.0"]);
    assert!(
        ok && said.contains("0 results"),
        "another version matches nothing: {said}"
    );
    let version = serde_json::from_slice::<Value>(&std::fs::read(run.join("digits/baseline/1/episode.json")).unwrap())
        .unwrap()["task"]["version"]
        .as_str()
        .unwrap()
        .to_string();
    let (ok, said) = invalidate(&[&format!("digits@{version}"), "--reason", "its labels leaked"]);
    assert!(ok && said.contains("1 results"), "{said}");
    let results = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    assert!(results.contains("its labels leaked"), "{results}");
    let summary: Value = serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["by_task_and_agent"][0]["stale"], 1, "{summary}");
    assert_eq!(
        summary["by_task_and_agent"][0]["runs"], 0,
        "a stale result counts in no figure: {summary}"
    );
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("class=\"stale\""), "the report strikes it out");
    // Still verifiable: invalidation changes no record of the episode.
    let (ok, said) = verify(&run, &["--no-eval"]);
    assert!(ok, "{said}");

    let resumed = mlrb(&["bench", "--resume", run.to_str().unwrap(), "--rerun-stale", "--quiet"]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert!(
        run.join("digits/baseline/1.stale-1/episode.json").is_file(),
        "the stale episode is kept"
    );
    let results = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    assert!(!results.contains("its labels leaked"), "{results}");
    assert!(run.join("digits/baseline/1/score.json").is_file());
}

/// Runs `mlrb <args>`, failing the test if it has not ended within a minute.
fn mlrb_within_a_minute(args: &[&str]) -> (bool, String) {
    let mut child = common::mlrb()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("mlrb {args:?} stalled");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    (output.status.success(), text(&output))
}

#[test]
fn verify_and_replay_never_follow_or_stall_on_what_a_hostile_run_directory_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let run = small_run(&tmp.path().join("runs"));
    let episode = run.join("digits/baseline/1");
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "host secret 7f3a").unwrap();
    let mkfifo = |path: &Path| {
        let _ = std::fs::remove_file(path);
        assert!(
            std::process::Command::new("mkfifo")
                .arg(path)
                .status()
                .unwrap()
                .success()
        );
    };
    // An object that is a link to a device, another that is a FIFO, a
    // manifest that links out of the run, the signature a FIFO.
    let objects = episode.join("snapshots/objects");
    let object = first_file(&objects);
    let _ = std::fs::remove_file(&object);
    std::os::unix::fs::symlink("/dev/zero", &object).unwrap();
    mkfifo(&objects.join("f".repeat(64)));
    let manifest = first_file(&episode.join("snapshots/manifests"));
    std::fs::remove_file(&manifest).unwrap();
    std::os::unix::fs::symlink(&secret, &manifest).unwrap();
    mkfifo(&run.join("SIGNATURE.json"));
    let (ok, said) = mlrb_within_a_minute(&["verify", run.to_str().unwrap(), "--no-eval"]);
    assert!(!ok && said.contains("does not hash to its name"), "{said}");
    assert!(!said.contains("host secret"), "{said}");

    // The trace a FIFO, then a link to a host file: refused, never read.
    mkfifo(&episode.join("events.jsonl"));
    let (ok, said) = mlrb_within_a_minute(&["replay", episode.to_str().unwrap()]);
    assert!(!ok && said.contains("not a regular file"), "{said}");
    std::fs::remove_file(episode.join("events.jsonl")).unwrap();
    std::os::unix::fs::symlink(&secret, episode.join("events.jsonl")).unwrap();
    let (ok, said) = mlrb_within_a_minute(&["replay", episode.to_str().unwrap()]);
    assert!(!ok && !said.contains("host secret"), "{said}");
}
