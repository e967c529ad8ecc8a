//! `mlrb bench`: the agents × tasks × seeds matrix, its summary checked
//! against values computed here from each episode's own records, and
//! resume after the host is SIGKILLed at many points.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

fn bench_command(out: &Path, run: &str, agents: &[PathBuf], tasks: &[&str], extra: &[&str]) -> Command {
    let mut command = common::mlrb();
    command.args(["bench", "--out"]).arg(out).args(["--run-name", run]);
    for agent in agents {
        command.arg("--agent").arg(agent);
    }
    for task in tasks {
        command.args(["--task", task]);
    }
    command.args(extra);
    command
}

fn results(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_bench_of_two_agents_two_tasks_three_seeds_has_twelve_results_and_a_true_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = [common::agent("baseline"), common::agent("validator")];
    let output = bench_command(
        tmp.path(),
        "matrix",
        &agents,
        &["digits", "house-prices"],
        &["--seeds", "3", "-j", "2", "--cpu-slots", "2", "--json"],
    )
    .output()
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let run = tmp.path().join("matrix");
    let results = results(&run);
    assert_eq!(results.len(), 12);
    let ids: BTreeSet<String> = results.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 12, "{ids:?}");

    // Recompute every group's metrics from the episodes' own score.json.
    let mut groups: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    for task in ["digits", "house-prices"] {
        for agent in ["baseline", "validator"] {
            for seed in 1..=3 {
                let score = read_json(&run.join(task).join(agent).join(seed.to_string()).join("score.json"));
                groups.entry((task.into(), agent.into())).or_default().push(score);
            }
        }
    }
    let summary = read_json(&run.join("summary.json"));
    assert_eq!(summary, serde_json::from_slice::<Value>(&output.stdout).unwrap());
    let rows = summary["by_task_and_agent"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        let key = (
            row["task"].as_str().unwrap().to_string(),
            row["agent"].as_str().unwrap().to_string(),
        );
        let scores = &groups[&key];
        let valid: Vec<&Value> = scores.iter().filter(|s| s["valid"] == true).collect();
        let successes = scores.iter().filter(|s| s["success"] == true).count();
        assert_eq!(row["runs"], 3, "{key:?}");
        assert_eq!(row["valid"], valid.len(), "{key:?}");
        let rate = row["success_rate"].as_f64().unwrap();
        assert!((rate - successes as f64 / 3.0).abs() < 1e-12, "{key:?}");
        let improvements: Vec<f64> = valid.iter().filter_map(|s| s["improvement"].as_f64()).collect();
        if improvements.is_empty() {
            assert!(row["improvement"].is_null(), "{key:?}: {row}");
        } else {
            let mean = improvements.iter().sum::<f64>() / improvements.len() as f64;
            assert!((row["improvement"]["mean"].as_f64().unwrap() - mean).abs() < 1e-12);
            let scores: Vec<f64> = valid.iter().map(|s| s["score"].as_f64().unwrap()).collect();
            let mean_score = scores.iter().sum::<f64>() / scores.len() as f64;
            assert!((row["score"]["mean"].as_f64().unwrap() - mean_score).abs() < 1e-9);
        }
    }
    // The baseline reproduces each task's baseline; the validator agent
    // breaks its submission at the end, so none of its runs is valid.
    let baseline = rows
        .iter()
        .find(|r| r["task"] == "digits" && r["agent"] == "baseline")
        .unwrap();
    assert_eq!(baseline["valid"], 3);
    // digits splits its answers: the final score is the private part's.
    assert!((baseline["score"]["mean"].as_f64().unwrap() - 0.805112).abs() < 1e-9);
    let validator = rows
        .iter()
        .find(|r| r["task"] == "digits" && r["agent"] == "validator")
        .unwrap();
    assert_eq!(validator["valid"], 0);
    // Its intermediate scores are the public part's: not a best final
    // score; its record keeps them as public scores (the public baseline).
    assert!(validator["best_score"].is_null(), "{validator}");
    let score = read_json(&run.join("digits/validator/1/score.json"));
    assert!(
        (score["public"]["best"].as_f64().unwrap() - 0.883212).abs() < 1e-9,
        "{score}"
    );
    // What validate() told it is shown apart, labelled with its part.
    assert_eq!(validator["feedback"], "public-score", "{validator}");
    assert!(
        (validator["told_best"].as_f64().unwrap() - 0.883212).abs() < 1e-9,
        "{validator}"
    );

    // Both tasks need 2 CPUs and the bench had 2 slots: despite -j 2, no two
    // episodes ran at once.
    let mut spans: Vec<(String, String)> = ids
        .iter()
        .map(|id| {
            let record = read_json(&run.join(id).join("episode.json"));
            (
                record["started_at"].as_str().unwrap().to_string(),
                record["ended_at"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "episodes overlapped: {pair:?}");
    }

    let report = common::mlrb().args(["report"]).arg(&run).output().unwrap();
    let table = String::from_utf8_lossy(&report.stdout);
    assert!(
        report.status.success() && table.contains("validator") && table.contains("house-prices"),
        "{table}"
    );
    assert!(
        table.starts_with("validator against baseline ("),
        "the headline first: {table}"
    );
    // Every score says its part (every column: --wide): the baseline's
    // private final score, the validator's public one told by validate();
    // house-prices is an MAE.
    let wide = common::mlrb().args(["report", "--wide"]).arg(&run).output().unwrap();
    let table = String::from_utf8_lossy(&wide.stdout);
    for shown in ["0.8051 [private]", "0.8832 [public]", "house-prices (↓)"] {
        assert!(table.contains(shown), "{shown}: {table}");
    }
}

/// Episode directories under a run, as task/agent/seed.
fn episode_dirs(run: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(run).min_depth(3).max_depth(3) {
        let entry = entry.unwrap();
        if entry.file_type().is_dir() {
            let rel = entry.path().strip_prefix(run).unwrap();
            found.push(rel.to_string_lossy().into_owned());
        }
    }
    found.sort();
    found
}

fn journal_lines(run: &Path) -> usize {
    std::fs::read_to_string(run.join("journal.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_bench_killed_at_any_moment_resumes_to_the_uninterrupted_results() {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let task = task.to_str().unwrap();
    let agents = [common::agent("baseline"), common::agent("validator")];
    let args = ["--seeds", "4", "-j", "2", "--quiet"];

    let reference = bench_command(tmp.path(), "whole", &agents, &[task], &args)
        .output()
        .unwrap();
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let expected = results(&tmp.path().join("whole"));
    assert_eq!(expected.len(), 8);

    let run = tmp.path().join("killed");
    let mut kills = 0;
    // Kill after the journal grows by 1, 2, 3, ... lines: at a start, mid
    // episode, right after a result, while the plan is written.
    for wait_for in 1.. {
        let mut command = if run.join("journal.jsonl").exists() {
            let mut c = common::mlrb();
            c.args(["bench", "--quiet", "--resume"]).arg(&run);
            c
        } else {
            bench_command(tmp.path(), "killed", &agents, &[task], &args)
        };
        let before = journal_lines(&run);
        let mut child = command.spawn().unwrap();
        let started = Instant::now();
        let finished = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if journal_lines(&run) >= before + wait_for || started.elapsed() > Duration::from_secs(120) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        match finished {
            Some(status) => {
                assert!(status.success());
                break;
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
            }
        }
        assert!(wait_for < 40, "the bench never finished");
    }
    assert!(kills >= 3, "killed only {kills} times");
    // Whatever the kills left (a torn journal line, a partial episode),
    // one more resume is a no-op once everything has a result.
    let again = common::mlrb()
        .args(["bench", "--quiet", "--resume"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(String::from_utf8_lossy(&again.stdout).contains("(0 run now)"));

    let got = results(&run);
    let identity = |r: &Value| {
        (
            r["id"].clone(),
            r["score"].clone(),
            r["valid"].clone(),
            r["end_reason"].clone(),
        )
    };
    assert_eq!(
        got.iter().map(identity).collect::<Vec<_>>(),
        expected.iter().map(identity).collect::<Vec<_>>()
    );
    assert_eq!(episode_dirs(&run), episode_dirs(&tmp.path().join("whole")));
    // No episode has two final results, and every one finished cleanly.
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    let mut done = BTreeMap::new();
    for line in journal.lines() {
        if let Ok(entry) = serde_json::from_str::<Value>(line)
            && entry["event"] == "done"
        {
            *done.entry(entry["id"].as_str().unwrap().to_string()).or_insert(0) += 1;
        }
    }
    assert_eq!(done.len(), 8);
    assert!(done.values().all(|&n| n == 1), "{done:?}");
    for dir in episode_dirs(&run) {
        let record = read_json(&run.join(&dir).join("episode.json"));
        assert!(record["end"].is_object(), "{dir} was left partial");
    }
}

#[test]
fn a_plan_file_and_its_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = tmp.path().join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "agents = [{{ path = {:?}, name = \"base\" }}]\ntasks = [{:?}]\nseeds = [7]\nparallel = 1\n\
             cpus = 1.5\nmemory_mb = 300\nscript_timeout = 30\n",
            common::agent("baseline"),
            common::hostile_task(tmp.path(), &[]),
        ),
    )
    .unwrap();
    let output = common::mlrb()
        .args(["bench", "--quiet", "--run-name", "p", "--out"])
        .arg(tmp.path())
        .arg("--plan")
        .arg(&plan)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(tmp.path().join("p/hostile/base/7/score.json").is_file());
    // The plan's resources reach the episode and its record; the command line wins over the plan.
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("p/hostile/base/7/episode.json")).unwrap()).unwrap();
    let limits = &record["limits"];
    assert_eq!(limits["script_cpus"], 1.5, "{limits}");
    assert_eq!(limits["script_memory_bytes"], 300u64 << 20, "{limits}");
    assert_eq!(limits["script_timeout_seconds"], 30, "{limits}");
    let output = common::mlrb()
        .args(["bench", "--quiet", "--run-name", "q", "--script-timeout", "40", "--out"])
        .arg(tmp.path())
        .arg("--plan")
        .arg(&plan)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("q/hostile/base/7/episode.json")).unwrap()).unwrap();
    assert_eq!(record["limits"]["script_timeout_seconds"], 40);
    assert_eq!(record["limits"]["script_cpus"], 1.5);

    std::fs::write(&plan, "agents = []\ntasks = [\"digits\"]\nparalel = 2\n").unwrap();
    let output = common::mlrb().args(["bench", "--plan"]).arg(&plan).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("plan.toml") && stderr.contains("paralel"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    // The same run directory is never reused by a new bench.
    let output = common::mlrb()
        .args(["bench", "--run-name", "p", "--out"])
        .arg(tmp.path())
        .arg("--agent")
        .arg(common::agent("baseline"))
        .args(["--task", "digits"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("--resume"), "{stderr}");
}

#[test]
fn an_infrastructure_failure_is_retried_and_an_agent_failure_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    // A task whose prepare step always fails: the episode never starts.
    let broken = common::hostile_task(tmp.path(), &[]);
    std::fs::write(
        broken.join("scripts/prepare.py"),
        "raise SystemExit('the data server is down')\n",
    )
    .unwrap();
    let output = bench_command(
        tmp.path(),
        "infra",
        &[common::agent("baseline"), common::agent("agent_panics")],
        &[broken.to_str().unwrap()],
        &["--retries", "2", "--quiet"],
    )
    .output()
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let run = tmp.path().join("infra");
    for result in results(&run) {
        assert_eq!(result["attempts"], 3, "{result}");
        assert!(
            result["infra_error"]
                .as_str()
                .unwrap()
                .contains("the data server is down"),
            "{result}"
        );
    }
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    assert_eq!(journal.matches("\"event\":\"infra-failure\"").count(), 6);
    let summary = read_json(&run.join("summary.json"));
    assert_eq!(summary["by_agent"][0]["infra_failures"], 1, "{summary}");

    // An agent that panics has a result on its first attempt.
    let task = common::hostile_task(&tmp.path().join("ok"), &[]);
    let output = bench_command(
        tmp.path(),
        "agent",
        &[common::agent("agent_panics")],
        &[task.to_str().unwrap()],
        &["--quiet"],
    )
    .output()
    .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result = &results(&tmp.path().join("agent"))[0];
    assert_eq!(result["attempts"], 1, "{result}");
    assert_eq!(result["end_reason"], "trap", "{result}");
    assert!(result["infra_error"].is_null());
}
