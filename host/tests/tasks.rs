//! The task suite: MLAgentBench folders run unchanged under both sandboxes,
//! `mlrb tasks check` and `mlrb tasks test`, refusal of tasks the host
//! cannot serve, and intermediate scoring through `episode.validate()`.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Training targets 1..=10 (their mean, 5.5, is what the starter predicts)
/// and the hidden answers of the three test rows.
const ANSWERS: [f64; 3] = [4.0, 6.0, 9.0];

/// Writes an MLAgentBench-layout task folder, as that project lays them
/// out: prepare.py writes into ../env and the answers next to itself;
/// eval.py defines get_score(submission_folder) and reads answer.csv beside
/// itself; read_only_files.txt holds fnmatch patterns.
fn mlagentbench_folder(root: &Path, prepare_extra: &str) -> PathBuf {
    let task = root.join("toy-regression");
    std::fs::create_dir_all(task.join("env")).unwrap();
    std::fs::create_dir_all(task.join("scripts")).unwrap();
    std::fs::write(
        task.join("env/train.py"),
        "import csv\n\
         rows = list(csv.DictReader(open('data/train.csv')))\n\
         mean = sum(float(r['y']) for r in rows) / len(rows)\n\
         test = list(csv.DictReader(open('data/test.csv')))\n\
         with open('submission.csv', 'w') as f:\n\
         \x20   f.write('id,y\\n')\n\
         \x20   for r in test:\n\
         \x20       f.write(f\"{r['id']},{mean}\\n\")\n\
         print('predicted', mean)\n",
    )
    .unwrap();
    std::fs::write(
        task.join("scripts/research_problem.txt"),
        "Predict y for test.csv as well as you can; write submission.csv (id,y). Metric: MAE.\n",
    )
    .unwrap();
    let answers: Vec<String> = ANSWERS
        .iter()
        .enumerate()
        .map(|(i, y)| format!("{},{y}", 100 + i))
        .collect();
    std::fs::write(
        task.join("scripts/prepare.py"),
        format!(
            "{prepare_extra}\n\
             download_dir = '../env/data'\n\
             import os\n\
             os.makedirs(download_dir, exist_ok=True)\n\
             with open(f'{{download_dir}}/train.csv', 'w') as f:\n\
             \x20   f.write('id,y\\n' + ''.join(f'{{i}},{{i}}\\n' for i in range(1, 11)))\n\
             with open(f'{{download_dir}}/test.csv', 'w') as f:\n\
             \x20   f.write('id\\n100\\n101\\n102\\n')\n\
             with open('answer.csv', 'w') as f:\n\
             \x20   f.write('id,y\\n{}\\n')\n",
            answers.join("\\n")
        ),
    )
    .unwrap();
    std::fs::write(
        task.join("scripts/eval.py"),
        "import sys, os\n\
         sys.path.append('../env')\n\
         import csv\n\
         \n\
         def get_score(submission_folder='../env'):\n\
         \x20   sub = {r['id']: float(r['y']) for r in csv.DictReader(open(os.path.join(submission_folder, 'submission.csv')))}\n\
         \x20   ans = {r['id']: float(r['y']) for r in csv.DictReader(open(os.path.join(os.path.dirname(__file__), 'answer.csv')))}\n\
         \x20   return sum(abs(sub[k] - v) for k, v in ans.items()) / len(ans)\n\
         \n\
         if __name__ == '__main__':\n\
         \x20   print(get_score())\n",
    )
    .unwrap();
    std::fs::write(task.join("scripts/read_only_files.txt"), "./data/*\n").unwrap();
    task
}

fn expected_mae() -> f64 {
    ANSWERS.iter().map(|y| (y - 5.5f64).abs()).sum::<f64>() / ANSWERS.len() as f64
}

fn check_mlagentbench_run(sandbox: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let task = mlagentbench_folder(tmp.path(), "");
    let before: Vec<_> = walkdir::WalkDir::new(&task)
        .into_iter()
        .map(|e| e.unwrap().path().to_path_buf())
        .collect();
    let finished = common::run_episode(
        &common::agent("baseline"),
        task.to_str().unwrap(),
        &tmp.path().join("runs"),
        &["--sandbox", sandbox],
    );
    let score = &finished.json["score"];
    assert_eq!(score["valid"], true, "{score}");
    let mae = score["score"].as_f64().unwrap();
    assert!((mae - expected_mae()).abs() < 1e-9, "{mae} != {}", expected_mae());
    assert_eq!(score["metric"], "score", "an unknown MLAgentBench task reports `score`");

    // The workspace got the prepared data, not the answers; the answers
    // stayed in the prepared scripts folder the evaluator alone mounts.
    let workspace = finished.dir.join("workspace");
    assert!(workspace.join("data/train.csv").is_file() && workspace.join("data/test.csv").is_file());
    assert!(!workspace.join("answer.csv").exists());
    assert!(common::files_containing(&workspace, "id,y\n100,4.0").is_empty());
    // Read-only patterns from read_only_files.txt apply, however spelt.
    let listed = finished
        .events()
        .into_iter()
        .find(|e| e["function"] == "execute-script")
        .expect("the baseline ran train.py");
    assert_eq!(listed["result"]["ok"]["exit_code"], 0, "{listed}");
    // The folder itself is unchanged: prepare ran on a copy.
    let after: Vec<_> = walkdir::WalkDir::new(&task)
        .into_iter()
        .map(|e| e.unwrap().path().to_path_buf())
        .collect();
    assert_eq!(before, after, "mlrb changed the MLAgentBench folder");
}

#[test]
fn an_mlagentbench_folder_runs_unchanged_in_the_local_sandbox() {
    check_mlagentbench_run("local");
}

#[test]
fn an_mlagentbench_folder_runs_unchanged_in_docker() {
    if !common::docker_ready() {
        return;
    }
    check_mlagentbench_run("docker");
}

#[test]
fn mlagentbench_read_only_patterns_hold_however_a_path_is_spelt() {
    let tmp = tempfile::tempdir().unwrap();
    let task = mlagentbench_folder(tmp.path(), "");
    let finished = common::run_episode(
        &common::agent("read_only_spelling"),
        task.to_str().unwrap(),
        &tmp.path().join("runs"),
        &[],
    );
    let workspace = finished.dir.join("workspace");
    let train = std::fs::read_to_string(workspace.join("data/train.csv")).unwrap();
    assert!(train.starts_with("id,y\n1,1\n"), "data/train.csv was changed: {train}");
    let answer = finished.answer();
    assert!(!answer.contains("ESCAPED"), "{answer}");
    assert!(answer.contains("write ./data/train.csv: denied"), "{answer}");
}

#[test]
fn a_prepare_step_that_asks_for_input_fails_at_once_with_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    // MLAgentBench's Kaggle tasks ask for consent this way.
    let task = mlagentbench_folder(tmp.path(), "input('Consent to the competition rules; press any key')");
    let check = common::mlrb().args(["tasks", "check"]).arg(&task).output().unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{report}");
    assert!(report.contains("asks for input"), "{report}");

    let agent = common::agent("baseline");
    let started = Instant::now();
    let output = common::run_command(&agent, task.to_str().unwrap(), &tmp.path().join("runs"), &[])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("prepare.py asked for input"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(60), "it waited");
}

#[test]
fn tasks_check_reports_what_a_folder_lacks() {
    let tmp = tempfile::tempdir().unwrap();
    let task = mlagentbench_folder(tmp.path(), "");
    let cache = tmp.path().join("cache");
    let json = |task: &Path| -> serde_json::Value {
        let output = common::mlrb()
            .env("MLRB_CACHE_DIR", &cache)
            .args(["tasks", "check", "--json"])
            .arg(task)
            .output()
            .unwrap();
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)))
    };
    let status = |report: &serde_json::Value, check: &str| -> String {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == check)
            .map(|c| c["status"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let report = json(&task);
    assert_eq!(report["ok"], true, "{report}");
    // Ready only once the dry run scored the unchanged starter's output.
    assert_eq!(report["ready"], true, "{report}");
    assert_eq!(status(&report, "dry run"), "ok", "{report}");
    assert_eq!(status(&report, "imports of the evaluator"), "ok", "{report}");
    assert_eq!(
        status(&report, "data"),
        "warn",
        "not prepared before the dry run: {report}"
    );
    assert_eq!(status(&report, "metric"), "warn", "direction assumed: {report}");
    assert_eq!(status(&report, "baseline"), "warn", "{report}");

    std::fs::write(task.join("scripts/eval.py"), "def score(folder):\n    return 1\n").unwrap();
    let report = json(&task);
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(status(&report, "evaluator"), "fail", "{report}");

    let report = json(&common::workspace_root().join("tasks/digits"));
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["ready"], true, "{report}");
    assert_eq!(status(&report, "reference solution"), "ok", "{report}");
}

#[test]
fn a_gpu_task_is_refused_on_this_host_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("runs");
    let agent = common::agent("baseline");
    for sandbox in ["local", "docker"] {
        let started = Instant::now();
        let output = common::run_command(&agent, "llm_efficiency", &out, &["--sandbox", sandbox])
            .env("MLRB_CACHE_DIR", &cache)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(
            stderr.contains("cannot run on this host")
                && stderr.contains("GPU")
                && stderr.contains("Nothing was started"),
            "{stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(started.elapsed() < Duration::from_secs(30));
    }
    assert!(!out.exists(), "a run directory was made");
    assert!(!cache.join("prepared").exists(), "the task was prepared");
}

#[test]
fn tasks_test_fails_a_task_whose_baseline_is_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("digits");
    common::copy_dir(&common::workspace_root().join("tasks/digits"), &task);
    common::edit_task_toml(&task, "baseline = 0.805112", "baseline = 0.7");
    let output = common::mlrb()
        .args(["tasks", "test", "--json"])
        .arg(&task)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let reports: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let report = &reports[0];
    assert_eq!(report["passed"], false);
    let baseline = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "baseline")
        .unwrap();
    assert_eq!(baseline["status"], "fail", "{report}");
    assert!(baseline["detail"].as_str().unwrap().contains("0.805112"), "{report}");
    // The reference solution still ran and won.
    assert!(report["reference"]["score"].as_f64().unwrap() > 0.95, "{report}");
}

/// `tasks test --keep` keeps a log per step: the starter's training log is
/// not overwritten by its evaluation's (both once went to `starter.stdout`).
#[test]
fn tasks_test_keeps_the_training_log_beside_the_evaluation_log() {
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("digits");
    common::copy_dir(&common::workspace_root().join("tasks/digits"), &task);
    let train = std::fs::read_to_string(task.join("env/train.py")).unwrap();
    let marker = "a line only the training prints";
    std::fs::write(task.join("env/train.py"), format!("print({marker:?})\n{train}")).unwrap();
    let output = common::mlrb()
        .args(["tasks", "test", "--json", "--keep"])
        .arg(&task)
        .output()
        .unwrap();
    let reports: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let work_dir = PathBuf::from(reports[0]["work_dir"].as_str().expect("--keep names its folder"));
    let logs: Vec<_> = std::fs::read_dir(&work_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "stdout" || e == "stderr"))
        .collect();
    let names: Vec<_> = logs
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let training = std::fs::read_to_string(work_dir.join("starter-train.stdout")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&work_dir);
    assert!(training.contains(marker), "the training's log is gone: {names:?}");
    let step = |name: &str| names.iter().any(|n| n.starts_with(name));
    assert!(step("starter-train.") && step("starter-eval."), "{names:?}");
}

/// A copy of digits in `dir/folder`, with `baseline` declared, whose
/// starter waits `seconds` before it trains. Its name stays digits: the
/// hidden answers' split, and so the starter's score, follows the name.
fn slow_digits(dir: &Path, folder: &str, baseline: &str, seconds: u32) -> PathBuf {
    let task = dir.join(folder);
    common::copy_dir(&common::workspace_root().join("tasks/digits"), &task);
    common::edit_task_toml(&task, "baseline = 0.805112", &format!("baseline = {baseline}"));
    let train = std::fs::read_to_string(task.join("env/train.py")).unwrap();
    std::fs::write(
        task.join("env/train.py"),
        format!("import time\ntime.sleep({seconds})\n{train}"),
    )
    .unwrap();
    task
}

/// How many Python processes below `pid` run a `train.py`: Python itself,
/// not the sandbox's processes that carry its command line, nor a child
/// Python forks on its way to another program (scikit-learn asks `lscpu`),
/// which carries its parent's command line until it execs.
fn training_below(pid: u32) -> usize {
    let python_training = |args: &[&[u8]]| {
        args[0]
            .rsplit(|&b| b == b'/')
            .next()
            .is_some_and(|a| a.starts_with(b"python"))
            && args.iter().any(|arg| arg.ends_with(b"train.py"))
    };
    let training = common::processes_under(pid, 8, python_training);
    training
        .iter()
        .filter(|&&p| common::parent_of(p).is_none_or(|parent| !training.contains(&parent)))
        .count()
}

/// `mlrb tasks test -j 2` tests two tasks at once (both starters are seen
/// training together), reports them in the order given (the first, slower,
/// ends last), and fails when one of them fails.
#[test]
fn tasks_test_tests_tasks_at_once_and_reports_them_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let wrong = slow_digits(tmp.path(), "wrong", "0.7", 6);
    let right = slow_digits(tmp.path(), "right", "0.805112", 3);
    let mut child = common::mlrb()
        .args(["tasks", "test", "-j", "2", "--json"])
        .args([&wrong, &right])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let mut together = 0;
    while child.try_wait().unwrap().is_none() {
        together = together.max(training_below(child.id()));
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let stdout = reader.join().unwrap();
    assert_eq!(together, 2, "two starters training at once");
    assert!(!status.success(), "one task failed: {stdout}");
    let reports: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let baseline_of = |r: &serde_json::Value| {
        let findings = r["findings"].as_array().unwrap();
        let baseline = findings.iter().find(|f| f["check"] == "baseline").unwrap();
        (
            baseline["status"].clone(),
            baseline["detail"].as_str().unwrap().to_string(),
        )
    };
    let (status, detail) = baseline_of(&reports[0]);
    assert!(
        status == "fail" && detail.contains("0.7 "),
        "the first given first: {reports:#}"
    );
    assert_eq!(baseline_of(&reports[1]).0, "ok", "{reports:#}");
    assert_eq!(reports[0]["passed"], false, "{reports:#}");
    assert_eq!(reports[1]["passed"], true, "{reports:#}");

    let refused = common::mlrb()
        .args(["tasks", "test", "-j", "0"])
        .arg(&right)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("--parallel"), "{stderr}");
    assert_eq!(
        stderr.trim().lines().next().map(|l| l.starts_with("error:")),
        Some(true),
        "{stderr}"
    );
}

#[test]
fn tasks_test_passes_for_every_task_of_the_cpu_suite() {
    let output = common::mlrb()
        .args(["tasks", "test", "--suite", "cpu", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    let reports = reports.as_array().unwrap();
    assert!(
        reports.len() >= 7,
        "the CPU suite has the core tasks and at least five more"
    );
    for report in reports {
        assert_eq!(report["passed"], true, "{report:#}");
        let gain = report["reference_improvement"].as_f64().unwrap();
        assert!(
            gain > 0.10,
            "{}: the reference beats the baseline by only {gain}",
            report["task"]
        );
    }
    assert!(output.status.success());
}

/// A copy of the digits task with intermediate scoring configured.
fn digits_with_validation(dir: &Path, enabled: bool, hide_score: bool, max_calls: u32) -> PathBuf {
    let task = dir.join("digits");
    common::copy_dir(&common::workspace_root().join("tasks/digits"), &task);
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    // Replace [validation]'s own keys, keep its split.
    let (head, rest) = toml.split_once("[validation]\n").expect("digits has [validation]");
    let split = &rest[rest.find("[validation.split]").expect("digits splits its answers")..];
    let toml = format!(
        "{head}[validation]\nenabled = {enabled}\nhide_score = {hide_score}\nmax_calls = {max_calls}\n\n{split}"
    );
    std::fs::write(task.join("task.toml"), toml).unwrap();
    task
}

fn answer_line(answer: &str, label: &str) -> String {
    answer
        .lines()
        .find(|l| l.starts_with(&format!("{label}:")))
        .unwrap_or_else(|| panic!("no `{label}` line in {answer}"))
        .to_string()
}

/// The validator probe on digits with validation set as given.
fn validator_episode(dir: &std::path::Path, enabled: bool, hide: bool, max_calls: u32) -> common::Finished {
    let task = digits_with_validation(dir, enabled, hide, max_calls);
    common::run_episode(
        &common::agent("validator"),
        task.to_str().unwrap(),
        &dir.join("runs"),
        &[],
    )
}

#[test]
fn validate_scores_the_current_workspace_and_records_each_validation() {
    let tmp = tempfile::tempdir().unwrap();
    let finished = validator_episode(tmp.path(), true, false, 3);
    let answer = finished.answer();
    assert!(answer_line(&answer, "start").contains("valid=false"), "{answer}");
    assert!(
        answer_line(&answer, "start").contains("a file the task asks for is missing"),
        "{answer}"
    );
    assert!(
        answer_line(&answer, "trained").contains("valid=true score=0.883212"),
        "validate() scores the public part: {answer}"
    );
    assert!(answer_line(&answer, "trained").contains("public part"), "{answer}");
    assert!(answer_line(&answer, "broken").contains("valid=false"), "{answer}");
    assert!(
        answer_line(&answer, "extra").contains("error budget-exhausted"),
        "{answer}"
    );

    // Each validation is a step in the trace and a record in episode.json.
    let validations: Vec<_> = finished
        .events()
        .into_iter()
        .filter(|e| e["function"] == "validate")
        .collect();
    assert_eq!(validations.len(), 4);
    assert!(validations.iter().all(|e| e["step"].is_u64()));
    let kept = finished.json["episode"]["end"]["validations"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert_eq!(kept[1]["score"], 0.883212);
    // The final score is of the final (broken) workspace, on the private
    // part; the public scores are kept apart, never taken as its best.
    let score = &finished.json["score"];
    assert_eq!(score["valid"], false, "{score}");
    assert!(score["best_score"].is_null(), "{score}");
    assert_eq!(score["public"]["best"], 0.883212, "{score}");
    // The hidden answers never entered the workspace or its snapshots.
    let answers = std::fs::read_to_string(
        walkdir::WalkDir::new(common::cache_dir().join("prepared"))
            .into_iter()
            .filter_map(|e| e.ok())
            .find(|e| e.path().ends_with("hidden/answers.csv") && e.path().to_string_lossy().contains("digits-"))
            .expect("digits was prepared")
            .path(),
    )
    .unwrap();
    let sample: String = answers.lines().skip(1).take(20).collect::<Vec<_>>().join("\n");
    assert!(common::files_containing(&finished.dir.join("workspace"), &sample).is_empty());
    assert!(common::files_containing(&finished.dir.join("snapshots"), &sample).is_empty());
}

#[test]
fn a_task_can_hide_intermediate_scores() {
    let tmp = tempfile::tempdir().unwrap();
    let finished = validator_episode(tmp.path(), true, true, 10);
    let answer = finished.answer();
    let trained = answer_line(&answer, "trained");
    assert!(trained.contains("valid=true score=none"), "{answer}");
    assert!(!answer.contains("0.8832"), "the number leaked: {answer}");
    // The host still keeps the number for the records.
    let kept = &finished.json["episode"]["end"]["validations"];
    assert_eq!(kept[1]["score"], 0.883212, "{kept}");
}

#[test]
fn validate_is_unavailable_where_the_task_does_not_offer_it() {
    let tmp = tempfile::tempdir().unwrap();
    let finished = validator_episode(tmp.path(), false, false, 1);
    let answer = finished.answer();
    assert!(
        answer_line(&answer, "trained").contains("error unavailable"),
        "{answer}"
    );
}

#[test]
fn an_agent_link_to_the_hidden_answers_is_never_followed_by_the_evaluator() {
    let (_tmp, finished) = common::run_on_hostile_task("answers_by_symlink", &[], &[]);
    let answer = finished.answer();
    assert!(answer.contains("links made"), "{answer}");
    // The fixture's evaluator accepts any submission.csv it can open: had it
    // followed the link to /hidden/answers.csv, the submission would be valid.
    assert!(answer.contains("validate: valid=false"), "{answer}");
    let score = &finished.json["score"];
    assert_eq!(score["valid"], false, "{score}");
    assert!(!common::hidden_token().is_empty());
    assert!(common::files_containing(&finished.dir, &common::hidden_token()).is_empty());
}
