//! The smoke profile (`mlrb tasks test --smoke`): every ml-research-benchmark
//! task's real preparation, starter and evaluator run on the CPU in the
//! torch image, offline, against the stand-in hub; the evaluator accepts
//! the starter's submission and refuses each invalid one with its reason.
//! A task whose sources the stand-in lacks, and an invalid case the
//! evaluator accepts, fail it.

mod common;

use common::findings;

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `mlrb tasks test --smoke --json` on `tasks`: its exit status and reports.
fn smoke(tasks: &[&str]) -> (bool, Vec<Value>) {
    let args: Vec<&str> = ["--smoke", "--sandbox", "docker"]
        .iter()
        .chain(tasks)
        .copied()
        .collect();
    common::tasks_test(&args)
}

/// A copy of the built-in task `name` in `dir`.
fn copy_of(name: &str, dir: &Path) -> PathBuf {
    let task = dir.join(name);
    common::copy_dir(&common::workspace_root().join("tasks").join(name), &task);
    task
}

#[test]
fn research_benchmark_smoke_suite_passes() {
    if !common::docker_ready() {
        return;
    }
    // Two tasks at once (more on a larger machine): each runs its scripts
    // one after another, mostly on one core, and this is the suite's longest test.
    let parallel = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    let output = common::mlrb()
        .args(["tasks", "test", "--smoke", "--sandbox", "docker", "--json"])
        .args(["--suite", "ml-research-benchmark", "-j", &parallel.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), 18, "nine tasks and their mini_ versions");
    for report in reports {
        let name = report["task"].as_str().unwrap();
        assert_eq!(report["smoke"], true, "{name}: labelled smoke");
        assert_eq!(report["passed"], true, "{name}: {report:#}");
        assert!(report["starter"]["score"].is_f64(), "{name}: the submission was scored");
        assert!(
            report["reference"].is_null(),
            "{name}: no reference in the smoke profile"
        );
        assert!(
            !findings(report, "invalid submission", "ok").is_empty(),
            "{name}: the evaluator refused no bad submission: {report:#}"
        );
        eprintln!(
            "{name}: prepare {:.0} s, starter {:.0} s",
            report["prepare_seconds"].as_f64().unwrap(),
            report["starter"]["train_seconds"].as_f64().unwrap()
        );
    }
    assert!(output.status.success());
}

/// The GPU check's three tasks (`scripts/gpu_check.sh`) as it runs them,
/// in bubblewrap with a venv's torch, on a host without a control group
/// (forced), but on the CPU: the path a GPU machine without Docker takes.
#[test]
fn the_gpu_check_tasks_pass_the_smoke_profile_in_bubblewrap_without_a_control_group() {
    let Some(venv) = common::torch_venv() else { return };
    let output = common::mlrb()
        .args([
            "tasks",
            "test",
            "--smoke",
            "--sandbox",
            "local",
            "--json",
            "-j",
            "2",
            "--python",
        ])
        .arg(&venv)
        .args(["mini_baby_lm", "mini_mini_pile", "mini_budget_model_training"])
        .env("MLRB_CGROUPS", "off")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    for report in reports.as_array().unwrap() {
        let name = report["task"].as_str().unwrap();
        assert_eq!(report["passed"], true, "{name}: {report:#}");
        assert!(report["starter"]["score"].is_f64(), "{name}: the submission was scored");
        eprintln!(
            "{name}: prepare {:.0} s, starter {:.0} s",
            report["prepare_seconds"].as_f64().unwrap(),
            report["starter"]["train_seconds"].as_f64().unwrap()
        );
    }
    assert!(output.status.success());
}

/// A copy of mini_baby_lm that also names a dataset nobody has.
fn with_unknown_source(dir: &Path) -> PathBuf {
    let task = copy_of("mini_baby_lm", dir);
    let mut toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    toml.push_str(
        "\n[[sources]]\nkind = \"dataset\"\nid = \"nobody/unheard-of\"\nconfig = \"x\"\nconfirmed = \"nowhere\"\n",
    );
    std::fs::write(task.join("task.toml"), toml).unwrap();
    task
}

/// A dataset the stand-in hub does not hold is named, before anything runs.
#[test]
fn a_source_without_a_stand_in_fails_the_smoke_test() {
    if !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let task = with_unknown_source(tmp.path());
    let (ok, reports) = smoke(&[task.to_str().unwrap()]);
    let report = &reports[0];
    assert!(!ok && report["passed"] == false, "{report:#}");
    let failed = findings(report, "stand-in", "fail");
    assert!(
        failed
            .iter()
            .any(|d| d.contains("nobody/unheard-of (config x)") && d.contains("mlrb_standin.py")),
        "{report:#}"
    );
    assert!(report["starter"].is_null(), "nothing ran: {report:#}");
}

/// An invalid case the evaluator accepts, and a task without any, fail the
/// smoke test; the starter's arguments come from `[smoke]`.
#[test]
fn an_accepted_invalid_submission_fails_the_smoke_test() {
    if !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let task = copy_of("mini_baby_lm", tmp.path());
    std::fs::write(
        task.join("scripts/invalid/changes_nothing.py"),
        "\"\"\"Leaves the good submission as it is.\n\nexpect: refused\n\"\"\"\n",
    )
    .unwrap();
    let (ok, reports) = smoke(&[task.to_str().unwrap()]);
    let report = &reports[0];
    assert!(!ok && report["passed"] == false, "{report:#}");
    let failed = findings(report, "invalid submission", "fail");
    assert!(
        failed
            .iter()
            .any(|d| d.starts_with("changes_nothing: accepted with the score")),
        "{report:#}"
    );
    assert!(
        !findings(report, "invalid submission", "ok").is_empty(),
        "the task's own cases are still refused: {report:#}"
    );

    std::fs::remove_dir_all(task.join("scripts/invalid")).unwrap();
    let (ok, reports) = smoke(&[task.to_str().unwrap()]);
    let report = &reports[0];
    assert!(!ok, "{report:#}");
    let failed = findings(report, "invalid submission", "fail");
    assert!(
        failed.iter().any(|d| d.contains("no scripts/invalid/ case")),
        "{report:#}"
    );
}

/// The stand-in hub of the shared test cache, built (once) by a smoke test
/// that stops right after it: its task names a source no stand-in has.
fn stand_in_dir() -> PathBuf {
    let tmp = tempfile::tempdir().unwrap();
    let (_, reports) = smoke(&[with_unknown_source(tmp.path()).to_str().unwrap()]);
    assert!(!findings(&reports[0], "stand-in", "fail").is_empty(), "{reports:#?}");
    // The hub of this build's helpers: a cache kept across builds also
    // holds older hubs, and the bare ones of tasks that read no hub.
    let lib = mlrb::task::pylib::install(&common::cache_dir()).unwrap();
    let dir = common::cache_dir().join("standin").join(lib.file_name().unwrap());
    assert!(dir.join("complete").is_file(), "no stand-in hub at {}", dir.display());
    dir
}

/// `mlrb tasks prepare <task> --from <from> --json` with a cache of its own.
fn prepare_from(task: &str, from: &Path, cache: &Path) -> std::process::Output {
    common::mlrb()
        .env("MLRB_CACHE_DIR", cache)
        .args(["tasks", "prepare", task, "--sandbox", "docker", "--json", "--from"])
        .arg(from)
        .output()
        .unwrap()
}

/// Files brought for an air-gapped host, in the forms users have: a
/// Hugging Face cache (models, and datasets as load_dataset caches them)
/// and a plain `save_pretrained` folder named by hub id. Preparation reads
/// them offline and makes the task's real prepared data; a dataset not
/// brought, or a model at another revision than the one pinned, is named
/// in one line and nothing is prepared.
#[test]
fn a_task_is_prepared_offline_from_files_a_user_brought() {
    if !common::docker_ready() {
        return;
    }
    let stand_in = stand_in_dir();
    let tmp = tempfile::tempdir().unwrap();
    let from = tmp.path().join("brought");
    common::copy_dir(&stand_in.join("hub"), &from.join("hub"));
    common::copy_dir(&stand_in.join("datasets"), &from.join("datasets"));
    // GPT-2 as save_pretrained left it, under its hub id.
    let gpt2 = from.join("hub/models--openai-community--gpt2");
    let snapshot = std::fs::read_dir(gpt2.join("snapshots"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    common::copy_dir(&snapshot, &from.join("openai-community/gpt2"));
    std::fs::remove_dir_all(&gpt2).unwrap();
    std::fs::remove_dir_all(from.join("hub/models--gpt2")).unwrap();

    let cache = tmp.path().join("cache");
    let output = prepare_from("mini_baby_lm", &from, &cache);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let said: Value = serde_json::from_slice(&output.stdout).unwrap();
    let dir = PathBuf::from(said["dir"].as_str().unwrap());
    assert!(!said["key"].as_str().unwrap().starts_with("smoke-"), "{said}");
    assert!(
        !dir.join("smoke").exists(),
        "real prepared data, not the smoke profile's"
    );
    let blimp = std::fs::read_to_string(dir.join("hidden/blimp.jsonl")).unwrap();
    assert!(
        blimp.lines().count() >= 67,
        "every BLiMP paradigm: {}",
        blimp.lines().count()
    );
    assert!(
        std::fs::read_dir(cache.join("offline-hub")).unwrap().next().is_none(),
        "the hub is removed"
    );
    let again = prepare_from("mini_baby_lm", &from, &cache);
    assert!(again.status.success());
    assert_eq!(
        serde_json::from_slice::<Value>(&again.stdout).unwrap()["from_cache"],
        true
    );

    std::fs::remove_dir_all(from.join("datasets/nyu-mll___blimp")).unwrap();
    let output = prepare_from("mini_baby_lm", &from, &tmp.path().join("cache2"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("dataset nyu-mll/blimp: not in the folder"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        !tmp.path().join("cache2/prepared").exists()
            || std::fs::read_dir(tmp.path().join("cache2/prepared"))
                .unwrap()
                .all(|e| !e.unwrap().path().join("complete").exists())
    );

    let task = copy_of("mini_baby_lm", tmp.path());
    common::edit_task_toml(
        &task,
        "id = \"AlgorithmicResearchGroup/gpt2-xs\"\n",
        "id = \"AlgorithmicResearchGroup/gpt2-xs\"\nrevision = \"deadbeef\"\n",
    );
    let output = prepare_from(task.to_str().unwrap(), &from, &tmp.path().join("cache3"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("AlgorithmicResearchGroup/gpt2-xs is pinned to revision deadbeef"),
        "{stderr}"
    );
}
