//! The baseline agent on both built-in tasks, end to end, in the local
//! sandbox: the score lands within the task's tolerance of its declared
//! baseline, and the episode directory holds every record.

mod common;

use std::path::Path;

fn check_task(task: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let finished = common::run_episode(&common::agent("baseline"), task, tmp.path(), &["--seed", "7"]);
    let dir = &finished.dir;
    assert_eq!(dir, &tmp.path().join("t").join(task).join("baseline").join("7"));
    assert_eq!(finished.end_reason(), "completed", "{}", finished.json);

    let score = &finished.json["score"];
    let declared = score["baseline"].as_f64().unwrap();
    let got = score["score"].as_f64().unwrap_or_else(|| panic!("no score: {score}"));
    let toml: toml::Value = toml::from_str(
        &std::fs::read_to_string(common::workspace_root().join("tasks").join(task).join("task.toml")).unwrap(),
    )
    .unwrap();
    let tolerance = toml["metric"]["tolerance"].as_float().unwrap();
    assert!(
        (got - declared).abs() <= tolerance,
        "{task}: baseline agent scored {got}, declared baseline {declared} ± {tolerance}"
    );
    assert_eq!(
        score["success"], false,
        "the unmodified starter must not count as a success"
    );

    for file in [
        "episode.json",
        "events.jsonl",
        "agent.log",
        "score.json",
        "snapshots/manifests/000000.json",
    ] {
        assert!(dir.join(file).is_file(), "{task}: missing {file}");
    }
    for folder in ["snapshots/objects", "exec", "workspace"] {
        assert!(dir.join(folder).is_dir(), "{task}: missing {folder}/");
    }
    assert!(dir.join("exec/0001.stdout").is_file());
    assert!(dir.join("workspace/submission.csv").is_file());

    // The trace has the script run, with a snapshot that holds the submission.
    let events = finished.events();
    let exec = events
        .iter()
        .find(|e| e["function"] == "execute-script")
        .expect("execute-script in the trace");
    assert_eq!(exec["result"]["ok"]["termination"], "exited");
    assert_eq!(exec["result"]["ok"]["exit_code"], 0);
    let snapshot = exec["snapshot"].as_u64().expect("a snapshot after the script");
    let manifest = mlrb::record::snapshot::read_manifest(&dir.join("snapshots"), snapshot).unwrap();
    assert!(manifest.entries.contains_key("submission.csv"));
    assert!(events.iter().any(|e| e["function"] == "note"));

    // Provenance.
    let episode: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("episode.json")).unwrap()).unwrap();
    assert_eq!(episode["host"]["wit"], "mlrb:agent@0.3.0");
    assert_eq!(episode["agent"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(episode["task"]["name"], task);
    assert!(episode["end"]["final_snapshot"].is_u64());

    // Re-scoring from the final snapshot gives the same score.
    let rescored = common::mlrb().args(["eval", "--json"]).arg(dir).output().unwrap();
    assert!(
        rescored.status.success(),
        "{}",
        String::from_utf8_lossy(&rescored.stderr)
    );
    let rescored: serde_json::Value = serde_json::from_slice(&rescored.stdout).unwrap();
    assert_eq!(rescored["score"], score["score"]);
    let _ = Path::new(dir);
}

#[test]
fn baseline_on_digits_scores_its_baseline() {
    check_task("digits");
}

#[test]
fn baseline_on_house_prices_scores_its_baseline() {
    check_task("house-prices");
}

#[test]
fn evaluation_of_a_workspace_without_submission_is_invalid_not_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    // The path-traversal agent never runs train.py, so nothing is submitted.
    let finished = common::run_episode(
        &common::agent("path_traversal"),
        task.to_str().unwrap(),
        tmp.path(),
        &[],
    );
    let score = &finished.json["score"];
    assert_eq!(score["valid"], false);
    assert_eq!(score["error"], "no submission.csv");
    assert_eq!(score["evaluator_failed"], false);
}
