//! The search agent, the research baseline that needs no model, end to end
//! in the local sandbox: it beats the digits starter by more than 10 %,
//! submits the best script it validated (not the last one it tried), and
//! where the task gives no score to search with it submits the starter.

mod common;

use serde_json::Value;

/// The scores `validate()` answered in an episode.
fn validated(events: &[Value]) -> Vec<f64> {
    events
        .iter()
        .filter(|e| e["function"] == "validate")
        .filter_map(|e| e["result"]["told"]["ok"]["score"].as_f64())
        .collect()
}

#[test]
fn the_search_agent_beats_the_digits_starter_and_submits_its_best() {
    let tmp = tempfile::tempdir().unwrap();
    let finished = common::run_episode(&common::agent("search-agent"), "digits", tmp.path(), &["--seed", "1"]);
    assert_eq!(finished.end_reason(), "completed", "{}", finished.json);
    let score = &finished.json["score"];
    let got = score["score"].as_f64().unwrap_or_else(|| panic!("no score: {score}"));
    let baseline = score["baseline"].as_f64().unwrap();
    assert!(got > baseline * 1.1, "search agent {got}, starter {baseline}");
    assert_eq!(score["success"], true, "{score}");

    let events = finished.events();
    let scores = validated(&events);
    assert!(
        scores.len() >= 3,
        "the starter and at least two trials are validated: {scores:?}"
    );
    // validate() scores the public part, the final score the private one:
    // the record keeps the best public score the agent was told, and the
    // private score of what it submitted is a different number.
    let best = scores.iter().copied().fold(f64::MIN, f64::max);
    assert_eq!(score["public"]["best"].as_f64(), Some(best), "{score}: {scores:?}");
    assert!(
        scores.iter().all(|s| (s - got).abs() > 1e-9),
        "the final score {got} is one the agent was told: {scores:?}"
    );
    let notes: Vec<&str> = events
        .iter()
        .filter(|e| e["function"] == "note")
        .filter_map(|e| e["args"]["text"].as_str())
        .collect();
    assert!(notes.iter().any(|n| n.contains("(kept)")), "{notes:#?}");
    let script = std::fs::read_to_string(finished.dir.join("workspace/train.py")).unwrap();
    assert!(
        !script.contains("DecisionTreeClassifier("),
        "the starter's model is still there:\n{script}"
    );
}

/// The search agent on a copy of digits whose validation hides the score,
/// after `change` to the copy's folder (the folder holding both goes with
/// the episode).
fn on_digits_without_scores(change: impl FnOnce(&std::path::Path)) -> (tempfile::TempDir, common::Finished) {
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("digits");
    common::copy_dir(&common::workspace_root().join("tasks/digits"), &task);
    common::edit_task_toml(&task, "hide_score = false", "hide_score = true");
    change(&task);
    let finished = common::run_episode(
        &common::agent("search-agent"),
        task.to_str().unwrap(),
        &tmp.path().join("runs"),
        &["--seed", "1"],
    );
    assert_eq!(finished.end_reason(), "completed", "{}", finished.json);
    (tmp, finished)
}

#[test]
fn without_a_score_to_search_with_the_search_agent_submits_the_starter() {
    let (_tmp, finished) = on_digits_without_scores(|_| {});
    let events = finished.events();
    assert!(
        !events.iter().any(|e| e["function"] == "write-file"),
        "it edited without a score to go by"
    );
    let score = &finished.json["score"];
    let got = score["score"].as_f64().unwrap();
    let baseline = score["baseline"].as_f64().unwrap();
    assert!((got - baseline).abs() <= 0.01, "scored {got}, the starter {baseline}");
}

#[test]
fn a_starter_not_named_train_py_is_found_and_run() {
    let (_tmp, finished) = on_digits_without_scores(|task| {
        std::fs::rename(task.join("env/train.py"), task.join("env/fit.py")).unwrap();
    });
    let ran: Vec<String> = finished
        .events()
        .iter()
        .filter(|e| e["function"] == "execute-script")
        .map(|e| e["args"]["script"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(ran, ["fit.py"], "the workspace's only script is the starter");
    assert!(finished.json["score"]["score"].as_f64().is_some(), "{}", finished.json);
}
