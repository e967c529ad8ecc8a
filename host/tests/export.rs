//! `mlrb export` read by the other projects' own code: the Inspect AI log
//! by `inspect_ai.log.read_eval_log` (inspect-ai from PyPI, pinned, in a
//! venv under the target folder), the Every Eval Ever records validated
//! against that project's JSON Schemas and by its own validator
//! (`python -m every_eval_ever validate`, vendored in tests/fixtures/eee);
//! and a run whose records were tampered with is refused.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The inspect-ai release the Inspect export is checked against.
const INSPECT_AI: &str = "0.3.260";

/// An evaluator that refuses a submission whose rows are not numbers.
const EVAL: &str = r#"import json, os, sys
workspace, hidden = sys.argv[1], sys.argv[2]
path = os.path.join(workspace, "submission.csv")
rows = [r for r in open(path).read().splitlines()[1:] if r.strip()] if os.path.isfile(path) else None
if rows is None or not all(c.strip().isdigit() for r in rows for c in r.split(",")):
    print(json.dumps({"score": None, "error": "submission.csv is missing or its rows are not numbers"}))
else:
    print(json.dumps({"score": 1.0}))
"#;

/// A bench of the baseline and validator agents, two seeds, on the hostile
/// fixture with a starter of 0.5 and a reference of 1.0: the baseline's
/// submissions score 1.0 (a success), the validator's (rows that are not
/// numbers) are invalid.
fn small_bench(dir: &Path) -> PathBuf {
    let task = common::hostile_task(dir, &[]);
    std::fs::write(task.join("scripts/eval.py"), EVAL).unwrap();
    common::edit_task_toml(&task, "baseline = 1.0", "baseline = 0.5\nreference = 1.0");
    let output = common::two_seed_bench(dir, &["baseline", "validator"], &task)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    dir.join("r")
}

fn export(run: &Path, format: &str, out: &Path) -> std::process::Output {
    common::mlrb()
        .arg("export")
        .arg(run)
        .args(["--format", format, "--json", "--out"])
        .arg(out)
        .output()
        .unwrap()
}

fn written(output: &std::process::Output) -> Vec<PathBuf> {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A venv with the pinned inspect-ai (made once), or None (skipped, and
/// failing under CI=true) where PyPI cannot be reached.
fn inspect_python() -> Option<PathBuf> {
    let venv = common::target_dir().join(format!("inspect-ai-{INSPECT_AI}"));
    let python = venv.join("bin/python");
    if venv.join(".installed").is_file() {
        return Some(python);
    }
    let made = Command::new("/usr/bin/python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success(), "python3 -m venv failed");
    let installed = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", &format!("inspect-ai=={INSPECT_AI}")])
        .output()
        .unwrap();
    if !installed.status.success() {
        let why = String::from_utf8_lossy(&installed.stderr);
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("installing inspect-ai {INSPECT_AI} failed under CI: {why}");
        }
        eprintln!("SKIPPED: inspect-ai {INSPECT_AI} could not be installed: {why}");
        return None;
    }
    std::fs::write(venv.join(".installed"), INSPECT_AI).unwrap();
    Some(python)
}

/// What Inspect's reader makes of the logs: per log its status, solver,
/// epochs, results and samples (id, epoch, scores, tool calls, usage).
const READ: &str = r#"
import json, sys
from inspect_ai.log import read_eval_log
out = []
for path in sys.argv[1:]:
    header = read_eval_log(path, header_only=True)
    log = read_eval_log(path)
    samples = []
    for s in log.samples:
        calls = [c.function for m in s.messages if m.role == "assistant" and m.tool_calls for c in m.tool_calls]
        results = [m.tool_call_id for m in s.messages if m.role == "tool"]
        events = [e.event for e in s.events]
        samples.append({"id": s.id, "epoch": s.epoch, "calls": calls, "results": len(results), "events": events,
                        "tool_events": [e.function for e in s.events if e.event == "tool"],
                        "scores": {k: v.value for k, v in (s.scores or {}).items()},
                        "usage": {k: v.total_tokens for k, v in s.model_usage.items()},
                        "last": s.messages[-1].text if s.messages else None,
                        "error": s.error.message if s.error else None})
    first = log.results.scores[0]
    metric = next(iter(first.metrics.values()))
    out.append({"status": log.status, "header_samples": header.samples, "solver": log.eval.solver,
                "model": log.eval.model, "model_args": log.eval.model_args,
                "headline": [first.name, metric.name, metric.value], "scorers": [sc.name for sc in log.results.scores],
                "epochs": log.eval.config.epochs,
                "results": {sc.name: {k: m.value for k, m in sc.metrics.items()} for sc in log.results.scores},
                "samples": samples})
print(json.dumps(out))
"#;

#[test]
fn the_inspect_log_is_read_by_inspect_and_the_eee_records_match_their_schemas() {
    let tmp = tempfile::tempdir().unwrap();
    let run = small_bench(tmp.path());
    let eee = check_eee(&run, &tmp.path().join("eee"));
    let Some(python) = inspect_python() else { return };
    check_eee_with_its_validator(&python, &eee);
    let files = written(&export(&run, "inspect", &tmp.path().join("inspect")));
    assert_eq!(files.len(), 2, "one log per agent: {files:?}");
    let read = Command::new(python).arg("-c").arg(READ).args(&files).output().unwrap();
    assert!(
        read.status.success(),
        "read_eval_log failed: {}",
        String::from_utf8_lossy(&read.stderr)
    );
    let logs: Vec<Value> = serde_json::from_slice(&read.stdout).unwrap();
    let log = |solver: &str| logs.iter().find(|l| l["solver"] == solver).unwrap();
    let (baseline, validator) = (log("baseline"), log("validator"));
    for l in [baseline, validator] {
        assert_eq!(l["status"], "success");
        assert!(l["header_samples"].is_null(), "a header read has no samples");
        assert_eq!(l["epochs"], 2);
        let samples = l["samples"].as_array().unwrap();
        assert_eq!(samples.len(), 2, "one sample per episode: {l}");
        let epochs: Vec<u64> = samples.iter().map(|s| s["epoch"].as_u64().unwrap()).collect();
        assert_eq!(epochs, vec![1, 2], "the seeds are epochs of the task's sample");
        // Each agent is its own model, named with its component's hash.
        assert_eq!(l["model"], format!("mlrb/{}", l["solver"].as_str().unwrap()), "{l}");
        let sha = l["model_args"]["agent_sha256"].as_str().unwrap();
        assert!(sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()), "{l}");
        // The headline is a mean; the interval is no metric.
        assert_eq!(l["headline"][1], "mean", "{l}");
        for metrics in l["results"].as_object().unwrap().values() {
            assert!(
                metrics
                    .as_object()
                    .unwrap()
                    .keys()
                    .all(|k| k == "mean" || k == "stderr"),
                "{l}"
            );
        }
        for s in samples {
            assert_eq!(s["id"], "hostile");
            // The transcript: every call a tool event, in order, then the
            // end and the scores.
            let tools: Vec<&Value> = s["calls"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| *c != "episode.note")
                .collect();
            assert_eq!(
                s["tool_events"].as_array().unwrap().iter().collect::<Vec<_>>(),
                tools,
                "{s}"
            );
            let notes = s["calls"].as_array().unwrap().len() - tools.len();
            assert!(
                notes > 0 || l["solver"] != "baseline",
                "the baseline notes what it does: {s}"
            );
            let events: Vec<&str> = s["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap())
                .collect();
            assert_eq!(
                events.iter().filter(|e| **e == "info").count(),
                notes + 1,
                "each note, then the end: {s}"
            );
            assert_eq!(events.last(), Some(&"score"), "{s}");
            assert_eq!(
                events.iter().filter(|e| **e == "score").count(),
                s["scores"].as_object().unwrap().len(),
                "{s}"
            );
            let calls = s["calls"].as_array().unwrap();
            assert!(calls.iter().any(|c| c == "exec.execute-script"), "{s}");
            assert_eq!(
                s["results"].as_u64().unwrap() as usize,
                calls.len(),
                "each call has its result: {s}"
            );
        }
    }
    // The baseline succeeds (1.0 against the starter's 0.5); the validator's
    // invalid submissions count as the starter and as failures.
    let scores = &baseline["samples"][0]["scores"];
    assert_eq!(
        (
            scores["score"].as_f64(),
            scores["normalized"].as_f64(),
            scores["success"].as_f64()
        ),
        (Some(1.0), Some(1.0), Some(1.0)),
        "{scores}"
    );
    let failed = &validator["samples"][0]["scores"];
    assert!(
        failed["score"].is_null() && failed["normalized"] == 0.0 && failed["success"] == 0.0,
        "{failed}"
    );
    assert!(
        validator["samples"][0]["calls"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "episode.validate")
    );
    assert_ne!(
        baseline["model_args"]["agent_sha256"],
        validator["model_args"]["agent_sha256"]
    );
    // One task: the headline is its own score; where no seed's submission
    // was valid there is none, and the normalised score leads.
    assert_eq!(
        baseline["headline"],
        serde_json::json!(["score", "mean", 1.0]),
        "{baseline}"
    );
    assert_eq!(
        validator["headline"],
        serde_json::json!(["normalized", "mean", 0.0]),
        "{validator}"
    );
    assert_eq!(baseline["results"]["success"]["mean"], 1.0, "{baseline}");
    assert_eq!(validator["results"]["normalized"]["mean"], 0.0, "{validator}");
}

/// The EEE aggregate and every instance line valid against the vendored
/// schemas, with the figures and checksum they should carry.
fn check_eee(run: &Path, out: &Path) -> Vec<PathBuf> {
    let files = written(&export(run, "eee", out));
    assert_eq!(files.len(), 4, "a record and its samples per agent: {files:?}");
    let schema = |name: &str| {
        let text = std::fs::read_to_string(eee_root().join("every_eval_ever/schemas").join(name)).unwrap();
        jsonschema::draft7::new(&serde_json::from_str::<Value>(&text).unwrap()).unwrap()
    };
    let (aggregate, instance) = (schema("eval.schema.json"), schema("instance_level_eval.schema.json"));
    let records: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "json"))
        .collect();
    for path in records {
        let record: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let errors: Vec<String> = aggregate
            .iter_errors(&record)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        let details = &record["detailed_evaluation_results"];
        // Where EEE's datastore keeps it: data/<collection>/<developer>/<model>/<uuid>_samples.jsonl.
        let relative = details["file_path"].as_str().unwrap();
        assert!(relative.starts_with("data/mlrb-r/mlrb-agent/"), "{relative}");
        let samples = out.join(relative);
        assert_eq!(samples.parent(), path.parent());
        let bytes = std::fs::read(&samples).unwrap();
        use sha2::Digest;
        assert_eq!(details["checksum"], hex::encode(sha2::Sha256::digest(&bytes)));
        let lines: Vec<Value> = String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{}", samples.display());
        for line in &lines {
            let errors: Vec<String> = instance
                .iter_errors(line)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{}: {errors:#?}", samples.display());
            assert_eq!(line["evaluation_id"], record["evaluation_id"]);
        }
        let agent = record["model_info"]["name"].as_str().unwrap();
        let normalized = record["evaluation_results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["evaluation_result_id"] == "mlrb.normalized")
            .unwrap();
        let expected = if agent == "baseline" { 1.0 } else { 0.0 };
        assert_eq!(normalized["score_details"]["score"], expected, "{agent}: {normalized}");
        assert_eq!(normalized["score_details"]["uncertainty"]["num_samples"], 2);
    }
    files
}

fn eee_root() -> PathBuf {
    common::workspace_root().join("tests/fixtures/eee")
}

/// Every Eval Ever's own validator on `files`: its JSON report.
fn eee_validate(python: &Path, files: &[PathBuf]) -> (bool, Vec<Value>) {
    let output = Command::new(python)
        .args(["-m", "every_eval_ever", "validate", "--format", "json"])
        .args(files)
        .env("PYTHONPATH", eee_root())
        .output()
        .unwrap();
    let reports: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "every_eval_ever validate printed no report ({e}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), reports)
}

/// The validator accepts every file of the export, and (so that its
/// verdict means something) rejects an aggregate without a continuous
/// metric's bounds.
fn check_eee_with_its_validator(python: &Path, files: &[PathBuf]) {
    let (ok, reports) = eee_validate(python, files);
    assert_eq!(reports.len(), files.len(), "{reports:#?}");
    for r in &reports {
        assert!(
            r["valid"] == true && r["errors"].as_array().unwrap().is_empty(),
            "{r:#}"
        );
    }
    assert!(ok, "{reports:#?}");
    let aggregate = files
        .iter()
        .find(|f| f.extension().is_some_and(|x| x == "json"))
        .unwrap();
    let mut record: Value = serde_json::from_str(&std::fs::read_to_string(aggregate).unwrap()).unwrap();
    record["evaluation_results"][0]["metric_config"]["min_score"] = Value::Null;
    std::fs::write(aggregate, serde_json::to_vec(&record).unwrap()).unwrap();
    let (ok, reports) = eee_validate(python, std::slice::from_ref(aggregate));
    assert!(!ok && reports[0]["valid"] == false, "{reports:#?}");
    assert!(reports[0]["errors"].to_string().contains("min_score"), "{reports:#?}");
}

#[test]
fn a_run_whose_records_do_not_verify_is_not_exported() {
    let tmp = tempfile::tempdir().unwrap();
    let run = small_bench(tmp.path());
    let events = run.join("hostile/baseline/1/events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    std::fs::write(&events, text.replacen("train.py", "trains.py", 1)).unwrap();
    for format in ["inspect", "eee"] {
        let out = tmp.path().join(format);
        let output = export(&run, format, &out);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("do not verify") && stderr.contains("hostile/baseline/1"),
            "{stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(!out.exists(), "nothing is written");
    }
    // A folder that is no run.
    let output = export(tmp.path(), "inspect", &tmp.path().join("x"));
    assert!(String::from_utf8_lossy(&output.stderr).contains("results.jsonl"));
}
