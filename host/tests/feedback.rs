//! Feedback that never reveals the test score: a split task's validations
//! score its public part and its final score the private one, an agent that
//! climbs the public part is shown for what it is, and upstream MLAgentBench
//! folders are scored as their metric says, not as their agent reports.

mod common;

use std::path::Path;

use serde_json::Value;

/// `mlrb <args>` with the tests' cache; its output.
fn mlrb(args: &[&str]) -> std::process::Output {
    common::mlrb().args(args).output().unwrap()
}

fn text(output: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// An agent that keeps every flip `validate()` does not punish climbs the
/// public part of spaceship's test set: its records hold both parts'
/// scores, and the tables mark a public gain that did not carry over.
#[test]
fn selecting_on_the_public_part_is_shown_when_it_does_not_carry_over() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let agent = common::agent("overfit");
    let args = [
        "bench",
        "--agent",
        agent.to_str().unwrap(),
        "--task",
        "spaceship",
        "--seeds",
        "1",
        "--quiet",
        "--out",
        runs.to_str().unwrap(),
        "--run-name",
        "r",
    ];
    let bench = mlrb(&args);
    assert!(bench.status.success(), "{}", text(&bench));
    let episode = runs.join("r/spaceship/overfit/1");
    let score: Value = serde_json::from_slice(&std::fs::read(episode.join("score.json")).unwrap()).unwrap();
    let episode_json: Value = serde_json::from_slice(&std::fs::read(episode.join("episode.json")).unwrap()).unwrap();
    let answer = episode_json["end"]["answer"].as_str().unwrap_or_default();
    assert_eq!(score["feedback"], "public-score", "{score}");
    // What it was told was the public part's score, and said so.
    let public = &score["public"];
    let (best, baseline) = (public["best"].as_f64().unwrap(), public["baseline"].as_f64().unwrap());
    assert!(best > baseline, "the public score climbed: {score}\n{answer}");
    // The final score is the private part's: its gain over the starter's
    // private score is under half the public one (the flips it kept blind
    // were a coin toss), so the gain did not carry over.
    let private = score["score"].as_f64().unwrap();
    let private_gain = (private - score["baseline"].as_f64().unwrap()) / score["baseline"].as_f64().unwrap();
    let public_gain = (best - baseline) / baseline;
    assert!(private_gain < public_gain / 2.0, "{score}");
    assert_eq!(score["public_gain_lost"], true, "{score}");
    assert!(score["public_improvement"].as_f64().unwrap() > 0.0, "{score}");
    let told = std::fs::read_to_string(episode.join("events.jsonl")).unwrap();
    assert!(
        told.contains("on the public part of the test set"),
        "what validate() said"
    );
    // The run's tables and summary mark it.
    let summary: Value = serde_json::from_slice(&std::fs::read(runs.join("r/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["by_task_and_agent"][0]["public_gain_lost"], 1, "{summary}");
    let report = mlrb(&["report", runs.join("r").to_str().unwrap()]);
    assert!(text(&report).contains("public gain lost in 1/1"), "{}", text(&report));
    // And verify derives the flag: an edited one does not pass.
    let (ok, said) = verify_edited(&runs.join("r"), &episode, "public_gain_lost", Value::Bool(false));
    assert!(!ok && said.contains("score.json: public_gain_lost is"), "{said}");
    // Every score says its part: the tables, and the episode's own table
    // (as `mlrb run` prints it) with what validate() told the agent.
    let tables = text(&mlrb(&["report", runs.join("r").to_str().unwrap(), "--wide"]));
    let told = format!("{best:.4} [public]");
    assert!(
        tables.contains(&format!("{private:.4} [private]")) && tables.contains(&told),
        "{tables}"
    );
    let eval = mlrb(&["eval", episode.to_str().unwrap()]);
    let shown = text(&eval);
    assert!(
        shown.contains(&format!("{private:.4} accuracy (private part, the one ranked)")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("the public part's score: best {best:.4}")),
        "{shown}"
    );
}

/// Verifies a copy of `run` whose episode's score.json has `field` set to `value`.
fn verify_edited(run: &Path, episode: &Path, field: &str, value: Value) -> (bool, String) {
    let copy = run.with_extension("edited");
    common::copy_dir(run, &copy);
    let path = copy.join(episode.strip_prefix(run).unwrap()).join("score.json");
    let mut score: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    score[field] = value;
    std::fs::write(&path, serde_json::to_vec(&score).unwrap()).unwrap();
    let out = mlrb(&["verify", copy.to_str().unwrap(), "--no-eval"]);
    (out.status.success(), text(&out))
}

/// A split task validates on its public part with the public answers alone
/// mounted, and is scored on the private one with the private answers alone.
#[test]
fn each_part_is_scored_with_its_own_answers_only() {
    let tmp = tempfile::tempdir().unwrap();
    let finished = common::run_episode(&common::agent("validator"), "digits", &tmp.path().join("runs"), &[]);
    let answer = finished.answer();
    let trained = answer.lines().find(|l| l.starts_with("trained:")).unwrap_or_default();
    assert!(
        trained.contains("valid=true") && trained.contains("public part"),
        "{answer}"
    );
    let told: f64 = trained
        .split("score=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let score = &finished.json["score"];
    // The starter's submission scores the public baseline the task states.
    let spec = mlrb(&["tasks", "show", "digits", "--json"]);
    let spec: Value = serde_json::from_slice(&spec.stdout).unwrap();
    let split = &spec["validation"]["split"];
    assert_eq!(told, split["public_baseline"].as_f64().unwrap(), "{answer}");
    // The last valid public score is kept beside the final (private) one.
    assert_eq!(score["public"]["last"].as_f64(), Some(told), "{score}");
    assert_eq!(score["feedback"], "public-score", "{score}");
}

/// The upstream vectorization folder: its get_score would return what the
/// agent's train.py writes; mlrb measures the time instead, in runs of the
/// submission's code it times itself, and a copy whose score does come from
/// such a file is caught by `mlrb tasks check`.
#[test]
fn upstream_vectorization_is_measured_not_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("vectorization");
    common::copy_dir(
        &common::workspace_root().join("tests/fixtures/mlagentbench/vectorization"),
        &root,
    );
    let finished = common::run_episode(
        &common::agent("baseline"),
        root.to_str().unwrap(),
        &tmp.path().join("runs"),
        &[],
    );
    let score = &finished.json["score"];
    assert_eq!(score["valid"], true, "{score}");
    let measured = score["score"].as_f64().unwrap();
    let reported = std::fs::read_to_string(finished.dir.join("workspace/submission.csv")).unwrap();
    let reported: f64 = reported.lines().next().unwrap().trim().parse().unwrap();
    assert!(measured > 0.0 && reported > 0.0, "{measured} {reported}");
    let runs = std::fs::read_dir(&finished.dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("eval-run-")
        })
        .count();
    assert!(
        runs >= 8,
        "four runs of the submission's code, each logged: {runs} logs"
    );

    // tasks check says who scores it.
    let check = mlrb(&["tasks", "check", root.to_str().unwrap(), "--json"]);
    let report: Value = serde_json::from_slice(&check.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&check)));
    let layout = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "layout")
        .unwrap();
    assert!(
        layout["detail"]
            .as_str()
            .unwrap()
            .contains("mlrb's evaluator mlrb_mlab_vectorization.py"),
        "{layout}"
    );

    // A changed copy is not the upstream task: its own get_score reads the
    // number train.py writes, and the dry run finds that out.
    let changed = tmp.path().join("vectorization-copy");
    common::copy_dir(&root, &changed);
    let train = changed.join("env/train.py");
    let source = std::fs::read_to_string(&train).unwrap();
    std::fs::write(
        &train,
        source.replace(
            "batch_features = np.random.randn(32, 64, 64, 3)",
            "batch_features = np.random.randn(4, 16, 16, 3)",
        ),
    )
    .unwrap();
    let check = mlrb(&["tasks", "check", changed.to_str().unwrap(), "--json"]);
    let report: Value = serde_json::from_slice(&check.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&check)));
    let flagged = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "self-reported score")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(flagged["status"], "fail", "{flagged}");
    assert!(
        flagged["detail"].as_str().unwrap().contains("submission.csv"),
        "{flagged}"
    );
    assert_eq!(report["ready"], false);
}

/// fathomnet's overlay range is the one upstream's own metric reaches: run
/// on a perfect and on the worst submission, its score() gives 1 and -0.5.
#[test]
fn fathomnets_range_is_what_its_own_metric_reaches() {
    let env = common::workspace_root().join("tests/fixtures/mlagentbench/fathomnet/env");
    let probe = r#"
import sys
sys.path.insert(0, sys.argv[1])
import pandas as pd
from metric import score
ids = list(range(8))
categories = ["1 2", "3", "4 5", "6", "7", "8 9", "10", "11"]
osd = [0, 1, 0, 1, 0, 1, 0, 1]
solution = pd.DataFrame({"id": ids, "categories": categories, "osd": osd})
def submission(cats, scores):
    return pd.DataFrame({"id": ids, "categories": cats, "osd": scores})
best = score(solution.copy(), submission(categories, [float(o) for o in osd]), "id")
worst = score(solution.copy(), submission(["99"] * 8, [1.0 - o for o in osd]), "id")
print(best, worst)
"#;
    let out = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(probe)
        .arg(&env)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let values: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(values, vec![1.0, -0.5], "upstream's score() at its extremes");
    let shown = mlrb(&[
        "tasks",
        "show",
        common::workspace_root()
            .join("tests/fixtures/mlagentbench/fathomnet")
            .to_str()
            .unwrap(),
        "--json",
    ]);
    let spec: Value = serde_json::from_slice(&shown.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&shown)));
    assert_eq!(spec["metric"]["range"], serde_json::json!([-0.5, 1.0]), "{spec}");
}
