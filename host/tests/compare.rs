//! `mlrb compare` on real runs: the baseline agent against the validator
//! agent on a copy of the hostile fixture whose evaluator scores the
//! validator's broken submission lower (valid, 0.5 against 1.0), so that
//! `--fail-if-worse` is tested both ways, with a margin, across two runs
//! with a pair missing, and on bad input. The evaluator is deterministic:
//! every seed scores alike, so the design cannot tell how sure a
//! difference is (no interval, no P(B > A)), and the gate stops where B
//! lost every pair beyond the margin.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// An evaluator that accepts any submission.csv, scoring 1.0 when its rows
/// are numbers and 0.5 when they are not.
const EVAL: &str = r#"import json, os, sys
workspace, hidden = sys.argv[1], sys.argv[2]
assert os.path.exists(os.path.join(hidden, "answers.csv"))
path = os.path.join(workspace, "submission.csv")
if not os.path.isfile(path):
    print(json.dumps({"score": None, "error": "no submission.csv"}))
else:
    rows = [r for r in open(path).read().splitlines()[1:] if r.strip()]
    numeric = all(c.strip().lstrip("-").replace(".", "", 1).isdigit() for r in rows for c in r.split(","))
    print(json.dumps({"score": 1.0 if numeric else 0.5}))
"#;

fn task(dir: &Path) -> PathBuf {
    let task = common::hostile_task(dir, &[]);
    std::fs::write(task.join("scripts/eval.py"), EVAL).unwrap();
    task
}

fn bench(out: &Path, name: &str, agents: &[&str], task: &Path, seeds: &str) -> PathBuf {
    let mut command = common::mlrb();
    command
        .args([
            "bench",
            "--quiet",
            "--run-name",
            name,
            "--seeds",
            seeds,
            "-j",
            "2",
            "--out",
        ])
        .arg(out);
    for agent in agents {
        command.arg("--agent").arg(common::agent(agent));
    }
    let output = command.arg("--task").arg(task).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    out.join(name)
}

fn compare(args: &[&str]) -> (Option<i32>, String, String) {
    let output = common::mlrb().arg("compare").args(args).output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn fail_if_worse_exits_four_for_a_worse_agent_and_zero_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let task = task(tmp.path());
    let run = bench(tmp.path(), "pair", &["baseline", "validator"], &task, "3");
    let run = run.to_str().unwrap();

    // B = validator scores 0.5 against the baseline's 1.0 on every seed.
    let (code, out, err) = compare(&[run, "--agents", "baseline", "validator", "--fail-if-worse"]);
    assert_eq!(code, Some(4), "{out}\n{err}");
    assert!(
        out.contains("verdict: the design cannot tell") && out.contains("--fail-if-worse stops"),
        "{out}"
    );
    assert!(
        !out.contains("± 0.0000") && !out.contains("[-0.5000, -0.5000]") && !out.contains(" 0.00 "),
        "no zero width, no zero smallest detectable, no P(B > A) of certainty: {out}"
    );
    assert!(out.starts_with("verdict: "), "the verdict first: {out}");
    assert!(out.contains("relative improvement over the baseline"), "{out}");
    // P(B > A) is among the columns of --wide.
    let (_, wide, _) = compare(&[run, "--agents", "baseline", "validator", "--wide"]);
    assert!(wide.contains("cannot tell (runs do not vary)"), "{wide}");
    assert!(out.contains("0 / 3 / 0"), "three pairs, all worse: {out}");

    let (code, json, err) = compare(&[run, "--agents", "baseline", "validator", "--json"]);
    assert_eq!(
        code,
        Some(0),
        "without --fail-if-worse the verdict does not fail: {err}"
    );
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["verdict"], "undetermined");
    assert_eq!(json["cannot_tell"], "no-spread");
    assert_eq!(json["measure"], "improvement");
    let paired = &json["tasks"][0]["paired"];
    assert_eq!(paired["pairs"], 3);
    assert!((paired["mean"].as_f64().unwrap() + 0.5).abs() < 1e-12, "{paired}");
    assert!(
        paired["interval"].is_null() && paired["min_detectable"].is_null(),
        "{paired}"
    );
    assert!(json["tasks"][0]["probability_of_improvement"].is_null(), "{json}");
    assert!(json["unpaired"].as_array().unwrap().is_empty());

    // The other way round, B is better: no failure.
    let (code, out, _) = compare(&[run, "--agents", "validator", "baseline", "--fail-if-worse"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("verdict: the design cannot tell") && !out.contains("stops"),
        "{out}"
    );

    // A margin larger than the difference lets it pass.
    let (code, out, _) = compare(&[
        run,
        "--agents",
        "baseline",
        "validator",
        "--fail-if-worse",
        "--margin",
        "0.6",
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("the design cannot tell") && !out.contains("stops"),
        "{out}"
    );

    // Two runs: seed 3 has no pair in the second run, and is named.
    let solo = bench(tmp.path(), "solo", &["baseline"], &task, "2");
    let (code, out, err) = compare(&[
        run,
        solo.to_str().unwrap(),
        "--agents",
        "validator",
        "baseline",
        "--fail-if-worse",
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        out.contains("1 (task, seed) without a pair") && out.contains("seed 3: no result in B"),
        "{out}"
    );
    assert!(out.contains("verdict: the design cannot tell"), "{out}");
    let (code, out, _) = compare(&[
        solo.to_str().unwrap(),
        run,
        "--agents",
        "baseline",
        "validator",
        "--fail-if-worse",
    ]);
    assert_eq!(code, Some(4), "{out}");
}

#[test]
fn compare_refuses_what_it_cannot_compare() {
    let tmp = tempfile::tempdir().unwrap();
    let task = task(tmp.path());
    let run = bench(tmp.path(), "pair", &["baseline", "validator"], &task, "1");
    let run = run.to_str().unwrap();
    let one_line = |err: &str| err.trim().lines().count() == 1;
    // Two agents in one run and none named.
    let (code, _, err) = compare(&[run, run]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("several agents") && err.contains("--agents") && one_line(&err),
        "{err}"
    );
    let (code, _, err) = compare(&[run, "--agents", "baseline", "nobody"]);
    assert!(
        code == Some(1) && err.contains("no agent named nobody") && err.contains("validator"),
        "{err}"
    );
    let (code, _, err) = compare(&[run, "--agents", "baseline", "baseline"]);
    assert!(code == Some(1) && err.contains("twice"), "{err}");
    let (code, _, err) = compare(&[run, "--agents", "baseline", "validator", "--margin=-1"]);
    assert!(code == Some(1) && err.contains("--margin"), "{err}");
    let missing = tmp.path().join("nothing");
    let (code, _, err) = compare(&[missing.to_str().unwrap(), run]);
    assert!(
        code == Some(1) && err.contains("results.jsonl") && one_line(&err),
        "{err}"
    );
}
