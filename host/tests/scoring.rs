//! Scores that hold: a corpus of MLAgentBench-format folders written for
//! these tests, each reproducing a way a score goes wrong (a metric
//! imported from the workspace, a sentinel for a missing submission, a
//! direction nobody declared, a preparation that "succeeds" without data,
//! an evaluator missing an import, one that fetches data when it scores),
//! and agents that try to be scored as their submission does not deserve.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The hidden answers of the corpus: three rows and a token that must
/// never reach the agent.
const ANSWERS: &str = "id,y,note\n100,4,SECRET-ANSWER-9f3\n101,6,SECRET-ANSWER-9f3\n102,9,SECRET-ANSWER-9f3\n";
const TOKEN: &str = "SECRET-ANSWER-9f3";

/// The mean absolute error of the starter's predictions (the training mean, 5.5).
const STARTER_MAE: f64 = (1.5 + 0.5 + 3.5) / 3.0;

/// The starter: predicts the training mean, and holds the task's metric
/// (as some upstream starters do) behind a main guard.
const STARTER: &str = "import csv\n\
def error_metric(truth, predicted):\n\
\x20   return sum(abs(t - p) for t, p in zip(truth, predicted)) / len(truth)\n\
if __name__ == '__main__':\n\
\x20   rows = list(csv.DictReader(open('data/train.csv')))\n\
\x20   mean = sum(float(r['y']) for r in rows) / len(rows)\n\
\x20   with open('submission.csv', 'w') as f:\n\
\x20       f.write('id,y\\n' + ''.join(f'{i},{mean}\\n' for i in (100, 101, 102)))\n";

/// An evaluator that imports the metric from the starter in ../env and
/// numpy, and whose error for unmatched rows quotes the hidden answers.
const EVAL_METRIC_IN_TRAIN: &str = "import os, sys, csv\n\
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '../env'))\n\
import numpy\n\
from train import error_metric\n\
def get_score(submission_folder='../env'):\n\
\x20   answers = {r['id']: r for r in csv.DictReader(open(os.path.join(os.path.dirname(__file__), 'answer.csv')))}\n\
\x20   sub = {r['id']: float(r['y']) for r in csv.DictReader(open(os.path.join(submission_folder, 'submission.csv')))}\n\
\x20   if set(sub) != set(answers):\n\
\x20       raise KeyError(f'rows do not match: {sorted(answers.values(), key=str)}')\n\
\x20   ids = sorted(answers)\n\
\x20   return float(numpy.float64(error_metric([float(answers[i]['y']) for i in ids], [sub[i] for i in ids])))\n";

/// Writes an MLAgentBench-layout folder `name` under `root`: the starter,
/// a research problem, a prepare step (writing the data into ../env and
/// the answers next to itself, after `prepare_extra`), `eval` as its
/// evaluator, and `task_toml` beside them when given.
fn folder(root: &Path, name: &str, eval: &str, prepare_extra: &str, task_toml: Option<&str>) -> PathBuf {
    let task = root.join(name);
    std::fs::create_dir_all(task.join("env")).unwrap();
    std::fs::create_dir_all(task.join("scripts")).unwrap();
    std::fs::write(task.join("env/train.py"), STARTER).unwrap();
    std::fs::write(
        task.join("scripts/research_problem.txt"),
        "Predict y for ids 100-102 as well as you can; write submission.csv (id,y).\n",
    )
    .unwrap();
    std::fs::write(
        task.join("scripts/prepare.py"),
        format!(
            "{prepare_extra}\nimport os\nos.makedirs('../env/data', exist_ok=True)\n\
             open('../env/data/train.csv', 'w').write('id,y\\n' + ''.join(f'{{i}},{{i}}\\n' for i in range(1, 11)))\n\
             open('answer.csv', 'w').write({ANSWERS:?})\n"
        ),
    )
    .unwrap();
    std::fs::write(task.join("scripts/eval.py"), eval).unwrap();
    std::fs::write(task.join("scripts/read_only_files.txt"), "data/*\n").unwrap();
    if let Some(toml) = task_toml {
        std::fs::write(task.join("task.toml"), toml).unwrap();
    }
    task
}

/// A task.toml declaring what an MLAgentBench folder does not say.
const DECLARED_MAE: &str = "name = \"metric-in-train\"\nversion = \"1\"\nlayout = \"mlagentbench\"\n\
[metric]\nname = \"mae\"\nhigher_is_better = false\nbaseline = 1.8333333333333333\nrange = [0.0, inf]\n\
[validation]\nenabled = true\nmax_calls = 5\n";

/// `mlrb run` on `task` with `agent`, its own cache, into a fresh runs
/// folder; the output and, when it ran, the parsed JSON.
fn run(agent: &Path, task: &Path, tmp: &Path, extra: &[&str]) -> (std::process::Output, Option<Value>) {
    let out = tempfile::Builder::new().prefix("runs-").tempdir_in(tmp).unwrap().keep();
    let mut command = common::run_command(agent, task.to_str().unwrap(), &out, &[]);
    command
        .env("MLRB_CACHE_DIR", tmp.join("cache"))
        .arg("--json")
        .args(extra);
    let output = command.output().unwrap();
    let json = serde_json::from_slice(&output.stdout).ok();
    (output, json)
}

fn check_gaming(agent: &Path, sandbox: &str) {
    if sandbox == "docker" && !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let task = folder(
        tmp.path(),
        "metric-in-train",
        EVAL_METRIC_IN_TRAIN,
        "",
        Some(DECLARED_MAE),
    );
    let (output, json) = run(agent, &task, tmp.path(), &["--sandbox", sandbox]);
    let json = json.unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    let score = &json["score"];
    let answer = json["episode"]["end"]["answer"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The daemon lying in wait for the evaluator was started (and is gone
    // before any scoring: no process outlives its script).
    assert!(
        answer.lines().any(|l| l.starts_with("lurker:") && l.contains('0')),
        "{answer}"
    );
    // Scored as its submission deserves: the starter's predictions.
    assert_eq!(score["valid"], true, "{score}\n{answer}");
    let mae = score["score"].as_f64().unwrap();
    assert!(
        (mae - STARTER_MAE).abs() < 1e-9,
        "scored {mae}, deserved {STARTER_MAE}\n{answer}"
    );
    assert_eq!(score["success"], false, "{score}");
    // A folder without a split gets validity only: the gamed workspace is
    // valid and no number is told; the evaluator's error that quotes the
    // hidden answers never reached the agent.
    let gamed = answer.lines().find(|l| l.starts_with("gamed:")).unwrap_or_default();
    assert!(gamed.contains("valid=true") && gamed.contains("score=None"), "{answer}");
    let unmatched = answer.lines().find(|l| l.starts_with("unmatched:")).unwrap_or_default();
    assert!(
        unmatched.contains("invalid submission: the evaluator refused it; check it against the task's description")
            && !unmatched.contains("KeyError"),
        "{answer}"
    );
    assert!(
        !answer.contains(TOKEN),
        "the hidden answers reached the agent:\n{answer}"
    );
    let dir = PathBuf::from(json["dir"].as_str().unwrap());
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    for line in events.lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        if event["function"] == "validate" {
            assert!(!event["result"]["told"].to_string().contains(TOKEN), "{event}");
        }
    }
}

#[test]
fn an_agent_cannot_change_how_it_is_scored_in_bubblewrap() {
    check_gaming(&common::agent("game_score"), "local");
}

#[test]
fn an_agent_cannot_change_how_it_is_scored_in_docker() {
    check_gaming(&common::agent("game_score"), "docker");
}

#[test]
fn a_python_agent_cannot_change_how_it_is_scored() {
    check_gaming(
        &common::built_agent("tests/agents/hostile-py", Some("game_score")),
        "local",
    );
}

#[test]
fn a_python_agent_cannot_change_how_it_is_scored_in_docker() {
    check_gaming(
        &common::built_agent("tests/agents/hostile-py", Some("game_score")),
        "docker",
    );
}

/// An evaluator that marks a missing submission with 1e10, as upstream's
/// vectorization task does.
const EVAL_SENTINEL: &str = "import os\n\
def get_score(submission_folder='../env'):\n\
\x20   try:\n\
\x20       return float(open(os.path.join(submission_folder, 'submission.csv')).read().split(',')[-1])\n\
\x20   except Exception:\n\
\x20       return 1e10\n";

#[test]
fn a_sentinel_is_an_invalid_submission_and_an_unknown_direction_claims_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = common::agent("tamper");
    // The tamper agent never writes submission.csv: the evaluator's sentinel.
    let declared = "name = \"sentinel\"\nversion = \"1\"\nlayout = \"mlagentbench\"\n\
        [metric]\nname = \"seconds\"\nhigher_is_better = false\nbaseline = 2.0\nrange = [0.0, 1e6]\n";
    let task = folder(tmp.path(), "sentinel", EVAL_SENTINEL, "", Some(declared));
    let (output, json) = run(&agent, &task, tmp.path(), &[]);
    let json = json.unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    let score = &json["score"];
    assert_eq!(score["valid"], false, "{score}");
    assert!(score["score"].is_null(), "{score}");
    assert!(
        score["error"].as_str().unwrap().contains("outside its valid range"),
        "{score}"
    );
    assert_eq!(score["success"], false, "judged against its baseline: {score}");

    // The same folder with nothing declared: MLAgentBench's 1e10 ("no
    // submission") is not a score, and no improvement or success is claimed
    // in a direction nobody declared.
    std::fs::remove_file(task.join("task.toml")).unwrap();
    let (output, json) = run(&agent, &task, tmp.path(), &[]);
    let json = json.unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    let score = &json["score"];
    assert_eq!(score["valid"], false, "{score}");
    assert!(score["score"].is_null(), "{score}");
    assert!(score["success"].is_null() && score["improvement"].is_null(), "{score}");
    assert_eq!(score["direction_known"], false, "{score}");
    // Unknown everywhere: no direction in the record, no range shown as numbers.
    assert!(score["higher_is_better"].is_null(), "{score}");
    let error = score["error"].as_str().unwrap();
    assert!(
        error.contains("mark of a missing submission") && !error.contains("9999"),
        "{score}"
    );
    // Declared on the command line, the direction and the range count (no
    // baseline: no success); a range the user widens takes 1e10.
    let (output, json) = run(
        &agent,
        &task,
        tmp.path(),
        &["--direction", "lower", "--metric", "seconds", "--range", "0,1e11"],
    );
    let json = json.unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(json["score"]["score"], 1e10, "{}", json["score"]);
    assert_eq!(json["score"]["direction_known"], true);
    assert_eq!(json["score"]["metric"], "seconds");
    assert!(
        json["score"]["success"].is_null(),
        "no baseline, no success: {}",
        json["score"]
    );
}

#[test]
fn a_preparation_that_produces_nothing_fails_and_is_not_cached() {
    let tmp = tempfile::tempdir().unwrap();
    // A download that fails quietly, then nothing else is written.
    let prepare = "import urllib.request\n\
        try:\n    urllib.request.urlretrieve('http://127.0.0.1:9/data.zip', '../env/data.zip')\n\
        except Exception:\n    pass\nraise SystemExit(0)\n";
    let task = folder(tmp.path(), "no-data", EVAL_SENTINEL, prepare, None);
    for _ in 0..2 {
        let (output, json) = run(&common::agent("baseline"), &task, tmp.path(), &[]);
        assert!(!output.status.success() && json.is_none());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("did not produce what the task needs") && stderr.contains("log:"),
            "{stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        let log = stderr.trim().rsplit("log: ").next().unwrap();
        assert!(Path::new(log).is_file(), "the prepare log is kept: {log}");
    }
    let prepared: Vec<_> = std::fs::read_dir(tmp.path().join("cache/prepared"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".failed") && !n.starts_with(".staging"))
        .collect();
    assert!(prepared.is_empty(), "a failed preparation was cached: {prepared:?}");
}

#[test]
fn an_evaluator_missing_an_import_is_loud_in_run_check_and_bench() {
    let tmp = tempfile::tempdir().unwrap();
    let eval = "import nonexistent_scoring_lib\ndef get_score(submission_folder='../env'):\n    return 1.0\n";
    let task = folder(tmp.path(), "missing-import", eval, "", None);
    // Refused before anything starts: no episode is spent on a folder that
    // cannot be scored.
    let (output, json) = run(&common::agent("baseline"), &task, tmp.path(), &[]);
    assert!(!output.status.success() && json.is_none());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nonexistent_scoring_lib") && stderr.contains("Nothing was started"),
        "{stderr}"
    );

    let check = common::mlrb()
        .env("MLRB_CACHE_DIR", tmp.path().join("cache"))
        .args(["tasks", "check", "--json"])
        .arg(&task)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(report["ready"], false, "{report}");
    let imports = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "imports of the evaluator")
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(imports["status"], "fail");
    assert!(
        imports["detail"].as_str().unwrap().contains("nonexistent_scoring_lib"),
        "{imports}"
    );

    // A bench refuses it before it starts too: no episode is spent on it.
    let bench = common::mlrb()
        .env("MLRB_CACHE_DIR", tmp.path().join("cache"))
        .args(["bench", "--quiet", "--json", "--run-name", "b", "--out"])
        .arg(tmp.path().join("runs"))
        .arg("--agent")
        .arg(common::agent("baseline"))
        .arg("--task")
        .arg(&task)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&bench.stderr);
    assert!(!bench.status.success() && bench.stdout.is_empty(), "{stderr}");
    assert!(
        stderr.contains("nonexistent_scoring_lib") && stderr.contains("Nothing was started"),
        "{stderr}"
    );
    assert!(!tmp.path().join("runs/b/results.jsonl").exists(), "an episode ran");
}

/// Serves `body` at any path on loopback until the test ends; its URL.
fn serve(body: &'static str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/answers.csv", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[test]
fn an_evaluator_that_fetches_when_it_scores_gets_its_data_during_preparation() {
    let tmp = tempfile::tempdir().unwrap();
    let url = serve("id,y\n100,4\n101,6\n102,9\n");
    let eval = format!(
        "import csv, os, urllib.request\n\
         def get_score(submission_folder='../env'):\n\
         \x20   if not os.path.exists('fetched.csv'):\n\
         \x20       urllib.request.urlretrieve('{url}', 'fetched.csv')\n\
         \x20   ans = {{r['id']: float(r['y']) for r in csv.DictReader(open('fetched.csv'))}}\n\
         \x20   sub = {{r['id']: float(r['y']) for r in csv.DictReader(open(os.path.join(submission_folder, 'submission.csv')))}}\n\
         \x20   return sum(abs(sub[k] - v) for k, v in ans.items()) / len(ans)\n"
    );
    let task = folder(tmp.path(), "fetch-at-scoring", &eval, "", None);
    let check = common::mlrb()
        .env("MLRB_CACHE_DIR", tmp.path().join("cache"))
        .args(["tasks", "check", "--json", "--no-run"])
        .arg(&task)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&check.stdout).unwrap();
    let network = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "scoring-time network");
    assert!(network.is_some_and(|c| c["status"] == "warn"), "{report}");

    // Without the network at preparation, scoring (offline) cannot fetch.
    let (output, _) = run(&common::agent("baseline"), &task, tmp.path(), &[]);
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Prepared with the network, the evaluator fetched its data then.
    let cache = tmp.path().join("cache-network");
    let mut command = common::run_command(
        &common::agent("baseline"),
        task.to_str().unwrap(),
        &tmp.path().join("runs-net"),
        &[],
    );
    command.env("MLRB_CACHE_DIR", &cache).args(["--json", "--network"]);
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mae = json["score"]["score"].as_f64().unwrap();
    assert!((mae - STARTER_MAE).abs() < 1e-9, "{}", json["score"]);
    assert_eq!(json["episode"]["limits"]["prepare_network"], true);
    assert_eq!(
        json["episode"]["limits"]["network"], false,
        "the agent's scripts never get it"
    );
}

#[test]
fn a_measured_baseline_is_what_success_is_judged_against() {
    let tmp = tempfile::tempdir().unwrap();
    let task = folder(
        tmp.path(),
        "metric-in-train",
        EVAL_METRIC_IN_TRAIN,
        "",
        Some(&DECLARED_MAE.replace("baseline = 1.8333333333333333\n", "")),
    );
    let cache = tmp.path().join("cache");
    let measure = common::mlrb()
        .env("MLRB_CACHE_DIR", &cache)
        .args(["tasks", "baseline", "--runs", "2", "--json"])
        .arg(&task)
        .output()
        .unwrap();
    assert!(measure.status.success(), "{}", String::from_utf8_lossy(&measure.stderr));
    let measured: Value = serde_json::from_slice(&measure.stdout).unwrap();
    assert!(
        (measured["mean"].as_f64().unwrap() - STARTER_MAE).abs() < 1e-9,
        "{measured}"
    );
    assert_eq!(measured["scores"].as_array().unwrap().len(), 2);
    let (output, json) = run(&common::agent("baseline"), &task, tmp.path(), &[]);
    let json = json.unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    let score = &json["score"];
    assert!(
        (score["baseline"].as_f64().unwrap() - STARTER_MAE).abs() < 1e-9,
        "{score}"
    );
    assert!(
        score["baseline_source"].as_str().unwrap().starts_with("measured"),
        "{score}"
    );
    assert_eq!(score["success"], false, "{score}");
}

/// A copy of vectorize whose evaluator runs submitted code that sends its
/// whole result and exits at once, twenty times, then code that promises
/// more than it sends and exits: its score is how many of the twenty
/// results were kept, and invalid if the partial one was taken.
const EVAL_RESULT_THEN_EXIT: &str = r#"import mlrb_eval
from mlrb_eval import Invalid
OPEN = "import os\nc = os.open(os.environ['MLRB_CHANNEL'], os.O_WRONLY)\n"
WHOLE = OPEN + "os.write(c, (5).to_bytes(8, 'little') + b'hello')\nos._exit(0)\n"
PARTIAL = OPEN + "os.write(c, (100).to_bytes(8, 'little') + b'hello')\nos._exit(0)\n"
def run(code):
    return mlrb_eval.run_submission(["python3", "-I", "/mlrb/in/h.py"], inputs={"h.py": code}, timeout=30)
def score(workspace, hidden):
    kept = sum(run(WHOLE).result == b"hello" for _ in range(20))
    partial = run(PARTIAL)
    if partial.result is not None:
        raise Invalid(f"a partial result was taken: {partial.result!r}", "wrong-result")
    return kept
if __name__ == "__main__":
    mlrb_eval.main(score)
"#;

/// Submitted code that sends its whole result and exits at once keeps it,
/// however the host sees the exit and the result race; a result cut short
/// by the exit is never taken. The race shows on a loaded machine: with four
/// busy loops beside it, a runner that dropped the channel when it saw the
/// exit kept 15 of the 20.
#[test]
fn a_result_sent_just_before_exit_is_kept_and_a_partial_one_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("vectorize");
    common::copy_dir(&common::workspace_root().join("tasks/vectorize"), &task);
    std::fs::write(task.join("scripts/eval.py"), EVAL_RESULT_THEN_EXIT).unwrap();
    let (output, json) = run(&common::agent("baseline"), &task, tmp.path(), &[]);
    let json = json.unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    let score = &json["score"];
    assert_eq!(score["valid"], true, "{score}");
    assert_eq!(score["score"], 20.0, "every whole result kept: {score}");
}

/// A copy of vectorize whose evaluator runs submitted code that floods its
/// output folder every way it can: two files of 150 MiB of data, 5000
/// empty files, a sparse file of 1 GiB, then a sparse file of 100 MiB
/// (within the bounds) and twelve runs printing 1 MiB on each stream. It
/// scores 1 when each flood was refused (or never got its file made) and
/// the sparse file came back sparse, and says otherwise what was not. What
/// it measured is on its stderr (the episode's `eval.stderr`).
const EVAL_OUTPUT_FLOODS: &str = r#"import os, sys
import mlrb_eval
from mlrb_eval import Invalid
DATA = """
import os
chunk = b"x" * (1 << 20)
for name in ("a", "b"):
    fd = os.open("/mlrb/output/" + name, os.O_WRONLY | os.O_CREAT)
    for _ in range(150):
        os.write(fd, chunk)
    os.close(fd)
"""
FILES = "for n in range(5000):\n    open(f'/mlrb/output/{n}', 'w').close()\n"
SPARSE_1G = """
for how in ("truncate", "write"):
    try:
        with open("/mlrb/output/sparse-" + how, "wb") as f:
            if how == "truncate":
                f.truncate(1 << 30)
            else:
                f.seek((1 << 30) - 3)
                f.write(b"end")
    except OSError as e:
        print(how, "refused:", e)
"""
SPARSE_OK = """
with open("/mlrb/output/sparse", "wb") as f:
    f.seek((100 << 20) - 3)
    f.write(b"end")
"""
LOGS = "import sys\nsys.stdout.write('o' * (1 << 20))\nsys.stderr.write('e' * (1 << 20))\n"
def run(code):
    try:
        return mlrb_eval.run_submission(["python3", "-I", "/mlrb/in/h.py"], inputs={"h.py": code}, timeout=120)
    except Invalid as refused:
        return refused
def on_disk(path):
    st = os.stat(path)
    return f"{path.split('/')[-1]}: {st.st_size} bytes, {st.st_blocks * 512} on disk"
def score(workspace, hidden):
    failures = []
    for name, code, kind in (("data", DATA, "too-large"), ("files", FILES, "rules")):
        got = run(code)
        print(name, "->", got if isinstance(got, Invalid) else got.termination, file=sys.stderr)
        if not isinstance(got, Invalid) or got.kind != kind:
            failures.append(f"{name} not refused as {kind}")
    huge = run(SPARSE_1G)
    if isinstance(huge, Invalid):
        print("sparse 1 GiB ->", huge, file=sys.stderr)
    else:
        for name in sorted(os.listdir(huge.outputs)):
            path = os.path.join(huge.outputs, name)
            print("sparse 1 GiB ->", on_disk(path), file=sys.stderr)
            if os.path.getsize(path) > (256 << 20):
                failures.append("a sparse file of 1 GiB was copied back (" + on_disk(path) + ")")
    ok = run(SPARSE_OK)
    if isinstance(ok, Invalid):
        failures.append(f"a sparse file of 100 MiB was refused: {ok}")
    else:
        path = os.path.join(ok.outputs, "sparse")
        print("sparse 100 MiB ->", on_disk(path), file=sys.stderr)
        st = os.stat(path)
        if st.st_size != 100 << 20 or st.st_blocks * 512 > 1 << 20:
            failures.append("a sparse file of 100 MiB came back as " + on_disk(path))
    for _ in range(12):
        run(LOGS)
    if failures:
        raise Invalid("; ".join(failures))
    return 1.0
if __name__ == "__main__":
    mlrb_eval.main(score)
"#;

/// A run's output folder is bounded in bytes (a sparse file counted whole)
/// and entries: a run past either is refused with the fixed vocabulary
/// (`too-large`, `rules`), a sparse file of 1 GiB never reaches the
/// evaluator, one within the bounds comes back sparse, and the runs of one
/// evaluation keep at most the task's log cap of one script in all (8 MiB
/// here, where each run used to keep 8 MiB per stream). The runner's
/// record of the runs says which were refused, and `mlrb scan` flags them.
#[test]
fn a_runs_outputs_are_bounded_copied_sparse_and_its_logs_bounded_per_evaluation() {
    let tmp = tempfile::tempdir().unwrap();
    let task = tmp.path().join("vectorize");
    common::copy_dir(&common::workspace_root().join("tasks/vectorize"), &task);
    std::fs::write(task.join("scripts/eval.py"), EVAL_OUTPUT_FLOODS).unwrap();
    let (output, json) = run(&common::agent("baseline"), &task, tmp.path(), &[]);
    let json = json.unwrap_or_else(|| panic!("{}", String::from_utf8_lossy(&output.stderr)));
    let dir = PathBuf::from(json["dir"].as_str().unwrap_or_else(|| panic!("{json}")));
    let measured = std::fs::read_to_string(dir.join("eval.stderr")).unwrap_or_default();
    eprintln!("{measured}");
    let score = &json["score"];
    assert_eq!(score["valid"], true, "{score}");
    let records = std::fs::read_to_string(dir.join("eval-runs.jsonl")).unwrap();
    let runs: Vec<Value> = records.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(runs.len(), 16, "{records}");
    let refused: Vec<&str> = runs
        .iter()
        .filter(|r| r["termination"] == "outputs-too-large")
        .map(|r| r["outputs"]["over"].as_str().unwrap())
        .collect();
    assert_eq!(refused, ["bytes", "entries"], "{records}");
    let mut logged = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("eval-run-") && (name.ends_with(".stdout") || name.ends_with(".stderr")) {
            logged += entry.metadata().unwrap().len();
        }
    }
    // The budget, and a line noting what was not logged per stream.
    assert!(
        logged <= (8 << 20) + 16 * 2 * 64,
        "{logged} bytes of the runs' logs kept"
    );
    let flags = mlrb::episode::scan::scan_episode(&dir).unwrap();
    let flagged = flags
        .iter()
        .find(|f| f.kind == mlrb::episode::scan::Kind::RunOutputsPastLimit)
        .unwrap_or_else(|| panic!("{flags:#?}"));
    assert!(flagged.detail.starts_with("the final scoring:"), "{}", flagged.detail);
}

/// Feeds `mlrb_eval.cpu_ratio` runs whose CPU times model this kind of
/// machine: the same work costs 1.0 s (subject 0.5 s), the second run of a
/// round pays 60 % more (the first one's sandbox torn down beside it), and
/// one run in three a burst of 40 % (another tenant); or, `drifting`, the
/// subject's every run 20 % slower than its last, so that its quickest two
/// never agree. Prints the score, its spread and the order each round ran in.
const CPU_RATIO_UNDER_BURSTS: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import mlrb_eval
drifting = sys.argv[2] == "drifting"
class Run:
    def __init__(self, cpu): self.cpu_seconds, self.seconds = cpu, cpu
orders, n = [], [0]
def cost(who, place):
    n[0] += 1
    if drifting:
        return 0.5 * 1.2 ** (len(orders) - 1) if who == "s" else 1.0
    work = 0.5 if who == "s" else 1.0
    return work * (1.6 if place == 1 else 1.0) * (1.4 if n[0] % 3 == 0 else 1.0)
def one_round():
    ran = []  # the sides run so far this round, in order
    def side(who):
        def go():
            if not ran:
                orders.append(who == "s")
            ran.append(who)
            return Run(cost(who, len(ran) - 1))
        return go
    return side("s"), side("r")
t = mlrb_eval.cpu_ratio(one_round, 5)
print(json.dumps({"score": float(t), "low": t.low, "high": t.high, "rounds": t.rounds, "orders": orders}))
"#;

fn cpu_ratio_on(machine: &str) -> Value {
    let python = common::workspace_root().join("host/python");
    let out = std::process::Command::new("python3")
        .args(["-c", CPU_RATIO_UNDER_BURSTS, python.to_str().unwrap(), machine])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A timed score is each side's quickest run against the other's: bursts
/// and the place of a run in its round, which move the median of round
/// ratios to 0.8 (reference always first) or 0.57 (alternating), leave it
/// at the true 0.5; which side runs first alternates, and the spread holds
/// the score. Rounds go on past the 5 asked while the quickest runs
/// disagree by more than 10 %, and stop at twice as many.
#[test]
fn a_timed_score_is_not_moved_by_bursts_or_by_which_run_goes_first() {
    let json = cpu_ratio_on("bursts");
    assert_eq!(
        json["rounds"], 6,
        "one more round, until the quickest runs agree: {json}"
    );
    let alternating = serde_json::json!([false, true, false, true, false, true]);
    assert_eq!(json["orders"], alternating, "{json}");
    let score = json["score"].as_f64().unwrap();
    assert!((score - 0.5).abs() < 1e-9, "{json}");
    let (low, high) = (json["low"].as_f64().unwrap(), json["high"].as_f64().unwrap());
    assert!(low <= score && score <= high && high - score <= 0.05 + 1e-9, "{json}");

    let json = cpu_ratio_on("drifting");
    assert_eq!(json["rounds"], 10, "never settled, stopped at twice the rounds: {json}");
    assert!((json["score"].as_f64().unwrap() - 0.5).abs() < 1e-9, "{json}");
    assert!((json["high"].as_f64().unwrap() - 0.6).abs() < 1e-9, "{json}");
}
