//! `mlrb run --smoke` and `mlrb bench --smoke`: an agent on a task in its
//! smoke profile (as `mlrb tasks test --smoke` runs it), every record and
//! output marked smoke, the mark bound so that `mlrb verify` sees it edited
//! away, and no smoke result ever beside a real one: not in a bench, a
//! comparison or a benchmark of the submission service. A task without a
//! stand-in is refused before anything starts.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

const BANNER: &str = "SMOKE PROFILE: stand-in data and toy models; these scores measure nothing";

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `mlrb verify` (without re-scoring when `no_eval`) of `dir`.
fn verify(dir: &Path, no_eval: bool) -> Output {
    let mut command = common::mlrb();
    command.arg("verify").arg(dir);
    if no_eval {
        command.arg("--no-eval");
    }
    command.output().unwrap()
}

/// `path` (a JSON record) without its `smoke` field.
fn drop_smoke(path: &Path) {
    let mut record = read_json(path);
    assert_eq!(record["smoke"], true, "{}: {record}", path.display());
    record.as_object_mut().unwrap().remove("smoke");
    std::fs::write(path, serde_json::to_vec_pretty(&record).unwrap()).unwrap();
}

#[test]
fn a_smoke_run_is_marked_in_every_record_and_verify_catches_the_mark_edited_away() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let output = common::run_command(&common::agent("baseline"), "digits", &runs, &["--smoke"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.starts_with(BANNER), "the banner first: {stdout}");
    let dir = runs.join("t/digits/baseline/0");
    let (record, score) = (read_json(&dir.join("episode.json")), read_json(&dir.join("score.json")));
    assert_eq!(
        (&record["smoke"], &score["smoke"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
    // As `tasks test --smoke` runs it: data prepared apart, one CPU, offline.
    let key = record["task"]["prepare_key"].as_str().unwrap();
    assert!(key.starts_with("smoke-digits-"), "{key}");
    assert_eq!(record["limits"]["script_cpus"], 1.0, "{}", record["limits"]);
    assert!(score["score"].is_f64() && score["valid"] == true, "{score}");
    let run = common::read_events(&dir)
        .into_iter()
        .find(|e| e["interface"] == "host" && e["function"] == "run")
        .unwrap();
    assert_eq!(run["args"]["smoke"], true, "the trace binds the mark: {run}");

    // Verified (scored again in the profile), and said to be smoke.
    let verified = verify(&dir, false);
    let (out, err) = text(&verified);
    assert!(verified.status.success(), "{out}{err}");
    assert!(out.starts_with(BANNER) && out.contains("(smoke profile"), "{out}");

    // The mark edited out of either record fails verification.
    for file in ["score.json", "episode.json"] {
        let path = dir.join(file);
        let kept = std::fs::read(&path).unwrap();
        drop_smoke(&path);
        let failed = verify(&dir, true);
        let (out, err) = text(&failed);
        assert!(!failed.status.success(), "{file}: {out}{err}");
        assert!(
            out.contains(&format!("{file}: smoke is false, the hash chain bound true")),
            "{file}: {out}"
        );
        std::fs::write(&path, kept).unwrap();
    }
}

/// `mlrb bench` of the baseline on digits, one seed, as run `name` in `out`.
fn bench(out: &Path, name: &str, extra: &[&str]) -> Output {
    common::mlrb()
        .args(["bench", "--quiet", "--seeds", "1", "--task", "digits", "--agent"])
        .arg(common::agent("baseline"))
        .arg("--out")
        .arg(out)
        .args(["--run-name", name])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_smoke_bench_is_marked_everywhere_and_never_meets_a_real_one() {
    let tmp = tempfile::tempdir().unwrap();
    let smoke = bench(tmp.path(), "smoke", &["--smoke"]);
    let (stdout, stderr) = text(&smoke);
    assert!(smoke.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.starts_with(BANNER), "the table's first line: {stdout}");
    let run = tmp.path().join("smoke");
    assert_eq!(read_json(&run.join("summary.json"))["smoke"], true);
    let lines = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    let lines: Vec<Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() == 1 && lines[0]["smoke"] == true, "{lines:?}");
    let page = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(page.contains(BANNER), "report.html has no banner");
    assert_eq!(read_json(&run.join("plan.json"))["smoke"], true);
    let report = common::mlrb().arg("report").arg(&run).output().unwrap();
    assert!(text(&report).0.starts_with(BANNER), "{}", text(&report).0);

    let real = bench(tmp.path(), "real", &[]);
    assert!(real.status.success(), "{}", text(&real).1);
    let real_run = tmp.path().join("real");
    assert!(read_json(&real_run.join("summary.json")).get("smoke").is_none());

    // Never compared, never resumed or merged across the profiles.
    let compared = common::mlrb().arg("compare").arg(&run).arg(&real_run).output().unwrap();
    let (_, err) = text(&compared);
    assert!(!compared.status.success() && err.contains("smoke profile"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let resumed = common::mlrb()
        .args(["bench", "--quiet", "--smoke", "--resume"])
        .arg(&real_run)
        .output()
        .unwrap();
    let (_, err) = text(&resumed);
    assert!(
        !resumed.status.success() && err.contains("resume it without --smoke"),
        "{err}"
    );
    let exported = common::mlrb()
        .arg("export")
        .arg(&run)
        .args(["--format", "eee", "--out"])
        .arg(tmp.path().join("eee"))
        .output()
        .unwrap();
    let (_, err) = text(&exported);
    assert!(
        !exported.status.success() && err.contains("smoke profile") && err.contains("nothing was exported"),
        "{err}"
    );
    // Results of both in one table are refused.
    let mixed = tmp.path().join("mixed");
    std::fs::create_dir_all(&mixed).unwrap();
    let both = [&real_run, &run].map(|r| std::fs::read_to_string(r.join("results.jsonl")).unwrap());
    std::fs::write(mixed.join("results.jsonl"), both.concat()).unwrap();
    let reported = common::mlrb().arg("report").arg(&mixed).output().unwrap();
    let (_, err) = text(&reported);
    assert!(
        !reported.status.success() && err.contains("mixes episodes of the smoke profile"),
        "{err}"
    );
    // A smoke episode left where a real bench runs is not taken into it.
    common::copy_dir(&run.join("digits"), &tmp.path().join("merged/digits"));
    let merged = bench(tmp.path(), "merged", &[]);
    let (_, err) = text(&merged);
    assert!(
        !merged.status.success() && err.contains("smoke and real episodes never share a run"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// A copy of the fixture's upstream MLAgentBench `house-price` folder, its
/// evaluator changed: no longer one mlrb has stand-in data for.
fn changed_upstream_folder(dir: &Path) -> PathBuf {
    let folder = dir.join("house-price");
    common::copy_dir(
        &common::workspace_root().join("tests/fixtures/mlagentbench/house-price"),
        &folder,
    );
    let eval = folder.join("scripts/eval.py");
    let text = std::fs::read_to_string(&eval).unwrap().replace("abs(", "-abs(");
    std::fs::write(&eval, text).unwrap();
    folder
}

#[test]
fn a_task_without_a_stand_in_is_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = changed_upstream_folder(tmp.path());
    let out = tmp.path().join("runs");
    let task = folder.to_str().unwrap();
    let agent = common::agent("baseline");
    let ran = common::run_command(&agent, task, &out, &["--smoke"]).output().unwrap();
    let benched = common::mlrb()
        .args(["bench", "--quiet", "--smoke", "--task", task, "--agent"])
        .arg(&agent)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    for refused in [ran, benched] {
        let (_, err) = text(&refused);
        assert!(!refused.status.success(), "{err}");
        assert!(
            err.contains("task house-price has no smoke profile")
                && err.contains("not an unchanged upstream MLAgentBench folder"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    assert!(!out.exists(), "nothing started");
    // The offline profile never takes --network either.
    let network = common::run_command(&agent, "digits", &out, &["--smoke", "--network"])
        .output()
        .unwrap();
    let (_, err) = text(&network);
    assert!(!network.status.success() && err.contains("drop --network"), "{err}");
}

#[test]
fn the_submission_service_refuses_a_smoke_benchmark() {
    let tmp = tempfile::tempdir().unwrap();
    let service = common::service::folder(tmp.path(), "digits", common::service::OPEN_UNTIL);
    let benchmark = service.join("benchmarks/cpu-mini.toml");
    let text_of = std::fs::read_to_string(&benchmark).unwrap();
    std::fs::write(&benchmark, text_of.replace("seeds = 1\n", "seeds = 1\nsmoke = true\n")).unwrap();
    let served = common::mlrb()
        .args(["serve", "--submissions"])
        .arg(&service)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let (_, err) = text(&served);
    assert!(!served.status.success(), "{err}");
    assert!(
        err.contains("cpu-mini.toml") && err.contains("`plan.smoke`") && err.contains("measure nothing"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
