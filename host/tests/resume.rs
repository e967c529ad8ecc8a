//! An episode whose host is killed goes on from its last recorded step:
//! `mlrb bench` is SIGKILLed in the middle of a deterministic agent's
//! episode (during a script, during a model call to a loopback provider,
//! between steps with a half-written trace line), `mlrb bench --resume`
//! replays the recorded calls (no script or model run again) and goes on
//! live, and the episode's calls, workspace snapshots and score equal an
//! uninterrupted run's step for step, apart from the resume mark. Records
//! whose replay diverges (here: forged) are started again from scratch,
//! saying so. A stop whose signal reaches a script before the host does
//! (Slurm, Ctrl-C) does not record the script as killed.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::llm_server::{LlmServer, Reply};
use serde_json::Value;

/// The model's side of the episode: inspect, run, edit (the edit itself a
/// model call), run the edit after a slow answer, submit.
fn script(task: &Path) -> Vec<Reply> {
    let call = Reply::call;
    let train = std::fs::read_to_string(task.join("env/train.py")).unwrap();
    let edited = train.replace("max_depth=8", "max_depth=12");
    vec![
        call(
            "inspect_script_lines",
            r#"{"script_name": "train.py", "start_line_number": 1, "end_line_number": 12}"#,
        ),
        call("execute_script", r#"{"script_name": "train.py"}"#),
        call(
            "edit_script",
            r#"{"script_name": "train.py", "edit_instruction": "Let the tree grow to depth 12.", "save_name": "train.py"}"#,
        ),
        Reply::Text(format!("Here is the edited script:\n```python\n{edited}```\n")),
        Reply::Delayed(
            Duration::from_secs(6),
            Box::new(call("execute_script", r#"{"script_name": "train.py"}"#)),
        ),
        call("final_answer", r#"{"final_answer": "a deeper tree"}"#),
    ]
}

/// A copy of digits whose starter takes two seconds longer, so that a kill
/// can land while it runs.
fn slow_digits(dir: &Path) -> PathBuf {
    let task = dir.join("digits");
    common::copy_dir(&common::workspace_root().join("tasks/digits"), &task);
    let train = task.join("env/train.py");
    let text = std::fs::read_to_string(&train).unwrap();
    std::fs::write(&train, format!("import time\ntime.sleep(2)\n{text}")).unwrap();
    task
}

struct Bench {
    server: LlmServer,
    config: PathBuf,
    task: PathBuf,
    run: PathBuf,
    agent: PathBuf,
}

impl Bench {
    fn new(tmp: &Path, task: &Path, name: &str) -> Bench {
        let server = LlmServer::start_keyed(script(task));
        let config = tmp.join(format!("{name}.toml"));
        std::fs::write(&config, server.config("openai", "")).unwrap();
        Bench {
            server,
            config,
            task: task.to_path_buf(),
            run: tmp.join("runs").join(name),
            agent: common::agent("research-agent"),
        }
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = common::mlrb();
        command
            .env("MLRB_TEST_LLM_KEY", "sk-test-key-0123456789")
            .env("MLRB_CONFIG", &self.config)
            .args(["bench", "--quiet", "--json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    fn start(&self) -> Child {
        let agent = &self.agent;
        let out = self.run.parent().unwrap();
        std::fs::create_dir_all(out).unwrap();
        self.command(&[
            "--agent",
            agent.to_str().unwrap(),
            "--task",
            self.task.to_str().unwrap(),
            "--seeds",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--run-name",
            self.run.file_name().unwrap().to_str().unwrap(),
        ])
        .spawn()
        .unwrap()
    }

    fn resume(&self) {
        let output = self
            .command(&["--resume", self.run.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "the resume failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The one episode's folder.
    fn episode(&self) -> PathBuf {
        walkdir::WalkDir::new(&self.run)
            .into_iter()
            .filter_map(|e| e.ok())
            .find(|e| e.file_name() == "episode.json")
            .map(|e| e.path().parent().unwrap().to_path_buf())
            .unwrap_or_else(|| panic!("{}: no episode", self.run.display()))
    }
}

fn wait_for(what: &str, run: &Path, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ready() {
        if started.elapsed() > Duration::from_secs(120) {
            let episode = walkdir::WalkDir::new(run)
                .into_iter()
                .filter_map(|e| e.ok())
                .find(|e| e.file_name() == "episode.json")
                .map(|e| e.path().parent().unwrap().to_path_buf());
            let seen = episode.map(|e| steps(&e)).unwrap_or_default();
            panic!("never {what}: {seen:#?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn events_in(episode: &Path) -> Vec<Value> {
    std::fs::read_to_string(episode.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// What the episode did, step by step: each call of the agent's (the
/// model's answers, not the prompts, which quote timings), without times,
/// and the root of each workspace snapshot.
fn steps(episode: &Path) -> Vec<Value> {
    events_in(episode)
        .iter()
        .filter_map(|e| match (e["interface"].as_str(), e["function"].as_str()) {
            (Some("host"), Some("snapshot")) => Some(serde_json::json!(["snapshot", e["args"]["root"]])),
            (Some("llm"), _) => Some(serde_json::json!(["llm", e["step"], untimed(&e["result"])])),
            (Some("workspace" | "exec" | "episode"), _) => Some(serde_json::json!([
                e["function"],
                e["step"],
                e["args"],
                untimed(&e["result"])
            ])),
            _ => None,
        })
        .collect()
}

/// `value` without the fields that time things.
fn untimed(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !(k.ends_with("_ms") || k.ends_with("_us") || k.contains("seconds")))
                .map(|(k, v)| (k.clone(), untimed(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(untimed).collect()),
        other => other.clone(),
    }
}

fn score(episode: &Path) -> Value {
    let text = std::fs::read_to_string(episode.join("score.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["score"].clone()
}

/// Whether a script of the episode is running now: its log is open in
/// `exec/` and its call is not recorded yet.
fn script_running(episode: &Path, runs_recorded: usize) -> bool {
    let logs = std::fs::read_dir(episode.join("exec")).map_or(0, |d| {
        d.filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".stdout"))
            .count()
    });
    let recorded = events_in(episode)
        .iter()
        .filter(|e| e["function"] == "execute-script")
        .count();
    logs > runs_recorded && recorded == runs_recorded
}

fn has_step(episode: &Path, function: &str) -> bool {
    events_in(episode)
        .iter()
        .any(|e| e["function"] == function && e["step"].is_u64())
}

/// Whether the killed bench is where a kill point wants it.
type Ready = dyn Fn(&Bench, &Path) -> bool;

fn kill(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn an_episode_killed_mid_script_mid_model_call_or_between_steps_resumes_to_the_uninterrupted_result() {
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_digits(tmp.path());
    let reference = Bench::new(tmp.path(), &task, "reference");
    let output = reference.start().wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let expected = steps(&reference.episode());
    let asked = reference.server.received().len();
    let record = std::fs::read_to_string(reference.episode().join("episode.json")).unwrap();
    assert!(record.contains("\"reason\": \"completed\""), "{record}");
    assert_eq!(asked, 6, "the reference did not follow the script: {expected:#?}");

    let points: [(&str, &Ready); 3] = [
        ("during a script", &|_, episode| script_running(episode, 1)),
        ("during a model call", &|bench, _| bench.server.received().len() >= 5),
        ("between steps", &|_, episode| has_step(episode, "inspect-lines")),
    ];
    for (n, (point, ready)) in points.iter().enumerate() {
        let bench = Bench::new(tmp.path(), &task, &format!("killed{n}"));
        let child = bench.start();
        wait_for(point, &bench.run, || {
            bench.run.exists() && bench.run.read_dir().is_ok() && {
                let episode = walkdir::WalkDir::new(&bench.run)
                    .into_iter()
                    .filter_map(|e| e.ok())
                    .find(|e| e.file_name() == "episode.json")
                    .map(|e| e.path().parent().unwrap().to_path_buf());
                episode.is_some_and(|episode| ready(&bench, &episode))
            }
        });
        kill(child);
        let episode = bench.episode();
        let recorded_before = events_in(&episode).len();
        if *point == "between steps" {
            // The host died writing a line: half of it is on disk.
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(episode.join("events.jsonl"))
                .unwrap();
            std::io::Write::write_all(&mut file, br#"{"prev":"00","seq":99,"t_ms":1.5,"inter"#).unwrap();
        }
        let asked_before = bench.server.received().len();
        bench.resume();

        let record: Value =
            serde_json::from_str(&std::fs::read_to_string(episode.join("episode.json")).unwrap()).unwrap();
        let resumes = record["resumes"]
            .as_array()
            .unwrap_or_else(|| panic!("{point}: no resume recorded"));
        assert_eq!(resumes.len(), 1, "{point}: {resumes:?}");
        assert_eq!(resumes[0]["why"], "host killed", "{point}");
        assert!(resumes[0]["restarted"].is_null(), "{point}: {resumes:?}");
        assert_eq!(record["end"]["reason"], "completed", "{point}");
        let events = events_in(&episode);
        let marks: Vec<&Value> = events.iter().filter(|e| e["function"] == "resume").collect();
        assert_eq!(marks.len(), 1, "{point}");
        let after = marks[0]["args"]["after_step"].as_u64().unwrap();
        assert!(after >= 1, "{point}: resumed after step {after}");
        assert!(
            marks[0]["seq"].as_u64().unwrap() as usize <= recorded_before + 1,
            "{point}: more was kept than recorded"
        );
        // Every step once; none of those recorded before the kill ran again.
        let mut numbers: Vec<u64> = events.iter().filter_map(|e| e["step"].as_u64()).collect();
        let count = numbers.len();
        numbers.dedup();
        assert_eq!(numbers.len(), count, "{point}: a step recorded twice");
        let mark_at = events.iter().position(|e| e["function"] == "resume").unwrap();
        assert!(
            events[mark_at..]
                .iter()
                .filter_map(|e| e["step"].as_u64())
                .all(|s| s > after),
            "{point}: a step up to {after} ran again live"
        );
        // The model was asked again at most for the call in flight.
        let asked_total = bench.server.received().len();
        assert!(
            asked_total <= asked + 1,
            "{point}: the model was asked {asked_total} times, {asked} uninterrupted ({asked_before} before the kill)"
        );
        assert_eq!(
            steps(&episode),
            expected,
            "{point}: the episode differs from the uninterrupted one"
        );
        assert_eq!(score(&episode), score(&reference.episode()), "{point}");
        // The budgets went on from what was spent: steps, calls, tokens, money.
        let reference_record: Value =
            serde_json::from_str(&std::fs::read_to_string(reference.episode().join("episode.json")).unwrap()).unwrap();
        for field in ["steps", "llm"] {
            let (ours, theirs) = (&record["end"][field], &reference_record["end"][field]);
            assert_eq!(untimed(ours), untimed(theirs), "{point}: {field}");
        }
        assert!(record["end"]["llm"]["cost_usd"].as_f64().unwrap() > 0.0, "{point}");

        // One episode: it verifies, and replays from its records.
        let verify = common::mlrb().arg("verify").arg(&bench.run).output().unwrap();
        assert!(
            verify.status.success(),
            "{point}: {}",
            String::from_utf8_lossy(&verify.stderr)
        );
        let replay = common::mlrb().arg("replay").arg(&episode).output().unwrap();
        let said = String::from_utf8_lossy(&replay.stdout);
        assert!(
            replay.status.success() && said.starts_with("identical"),
            "{point}: {said}"
        );
    }
}

/// Rewrites the trace with the first `execute-script` call's arguments
/// changed and the hash chain recomputed, as a forger would.
fn forge_first_script(episode: &Path) {
    let path = episode.join("events.jsonl");
    let mut prev = "genesis".to_string();
    let mut out = String::new();
    let mut changed = false;
    for line in std::fs::read_to_string(&path).unwrap().lines() {
        let mut event: Value = serde_json::from_str(line).unwrap();
        if !changed && event["function"] == "execute-script" {
            event["args"]["script"] = Value::from("other.py");
            changed = true;
        }
        event["prev"] = Value::from(prev.clone());
        let text = event.to_string();
        prev = blake3::hash(text.as_bytes()).to_hex().to_string();
        out.push_str(&text);
        out.push('\n');
    }
    assert!(changed, "no script call to forge");
    std::fs::write(&path, out).unwrap();
}

#[test]
fn records_whose_replay_diverges_start_the_episode_again_saying_so() {
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_digits(tmp.path());
    let reference = Bench::new(tmp.path(), &task, "reference");
    let output = reference.start().wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let bench = Bench::new(tmp.path(), &task, "forged");
    let child = bench.start();
    wait_for("a script recorded", &bench.run, || {
        bench.run.exists()
            && walkdir::WalkDir::new(&bench.run)
                .into_iter()
                .filter_map(|e| e.ok())
                .any(|e| e.file_name() == "episode.json" && has_step(e.path().parent().unwrap(), "execute-script"))
    });
    kill(child);
    let episode = bench.episode();
    forge_first_script(&episode);
    bench.resume();

    let record: Value = serde_json::from_str(&std::fs::read_to_string(episode.join("episode.json")).unwrap()).unwrap();
    let restarted = record["resumes"][0]["restarted"].as_str().unwrap_or_default();
    assert!(
        restarted.contains("diverged") && restarted.contains("other.py"),
        "{record}"
    );
    let events = events_in(&episode);
    assert!(events.iter().all(|e| e["function"] != "resume"), "a mixed trace");
    assert!(
        events.iter().all(|e| e["args"]["script"] != "other.py"),
        "the forged call survived"
    );
    assert_eq!(steps(&episode), steps(&reference.episode()), "the restart differs");
    let verify = common::mlrb().arg("verify").arg(&bench.run).output().unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
}

#[test]
fn records_of_another_agent_component_are_never_resumed_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let task = slow_digits(tmp.path());
    let mut bench = Bench::new(tmp.path(), &task, "swapped");
    // The plan names this file; it is replaced between the kill and the resume.
    let agent = tmp.path().join("agent.wasm");
    std::fs::copy(common::agent("research-agent"), &agent).unwrap();
    bench.agent = agent.clone();
    let child = bench.start();
    wait_for("a script recorded", &bench.run, || {
        bench.run.exists()
            && walkdir::WalkDir::new(&bench.run)
                .into_iter()
                .filter_map(|e| e.ok())
                .any(|e| e.file_name() == "episode.json" && has_step(e.path().parent().unwrap(), "execute-script"))
    });
    kill(child);
    std::fs::copy(common::agent("baseline"), &agent).unwrap();
    bench.resume();

    let episode = bench.episode();
    let record: Value = serde_json::from_str(&std::fs::read_to_string(episode.join("episode.json")).unwrap()).unwrap();
    let restarted = record["resumes"][0]["restarted"].as_str().unwrap_or_default();
    assert!(restarted.contains("the agent changed"), "{record}");
    assert_eq!(record["end"]["reason"], "completed", "{record}");
    let events = events_in(&episode);
    assert!(events.iter().all(|e| e["function"] != "resume"), "a mixed trace");
    assert!(
        events.iter().all(|e| e["interface"] != "llm"),
        "the research agent's calls survived under the baseline"
    );
}

/// The pid of a process under `root` whose arguments include `arg`.
fn descendant_running(root: u32, arg: &str) -> Option<i32> {
    let parent_of = |pid: i32| -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
    };
    let pids = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok());
    pids.into_iter().find(|&pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let mut up = Some(pid);
        let under_root = std::iter::from_fn(|| {
            up = up.and_then(parent_of).filter(|&p| p > 1);
            up
        })
        .any(|p| p == root as i32);
        under_root && cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes())
    })
}

/// `mlrb bench` of the baseline on the hostile task with a 4 s train.py;
/// the script is sent SIGTERM once it runs, and the bench SIGINT
/// `host_stop_after` later (never, for `None`). Returns the run's folder.
fn stopped_from_outside(tmp: &Path, name: &str, host_stop_after: Option<Duration>) -> PathBuf {
    let task = common::cluster::slow_task(tmp, 4);
    let run = tmp.join("runs").join(name);
    let child = common::mlrb()
        .args(["bench", "--quiet", "--json", "--seeds", "1", "--agent"])
        .arg(common::agent("baseline"))
        .arg("--task")
        .arg(&task)
        .arg("--out")
        .arg(run.parent().unwrap())
        .args(["--run-name", name])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let script = loop {
        if let Some(pid) = descendant_running(child.id(), "/workspace/train.py") {
            break pid;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "train.py never ran");
        std::thread::sleep(Duration::from_millis(20));
    };
    let signal = |pid: i32, name: &str| {
        std::process::Command::new("kill")
            .args(["-s", name, &pid.to_string()])
            .status()
            .unwrap();
    };
    signal(script, "TERM");
    if let Some(after) = host_stop_after {
        std::thread::sleep(after);
        signal(child.id() as i32, "INT");
    }
    let output = child.wait_with_output().unwrap();
    if host_stop_after.is_none() {
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    run
}

/// The `execute-script` results recorded in the run's one episode.
fn script_results(run: &Path) -> Vec<Value> {
    let episode = walkdir::WalkDir::new(run)
        .into_iter()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name() == "episode.json")
        .map(|e| e.path().parent().unwrap().to_path_buf())
        .expect("no episode");
    events_in(&episode)
        .into_iter()
        .filter(|e| e["function"] == "execute-script" && e["step"].is_u64())
        .map(|e| e["result"]["ok"].clone())
        .collect()
}

/// Slurm and a terminal's Ctrl-C signal every process at once: a script can
/// die of the host's own stop before the host acts on it. Recorded as the
/// script killed, the resumed episode would go on without its output; the
/// call in flight must instead run again on resume. A script killed from
/// outside while the host goes on is still recorded as killed.
#[test]
fn a_stop_that_reaches_a_script_before_the_host_runs_the_script_again_on_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let run = stopped_from_outside(tmp.path(), "stopped", Some(Duration::from_millis(500)));
    let output = common::mlrb()
        .args(["bench", "--quiet", "--json", "--resume"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let outcomes = common::cluster::outcomes(&run);
    assert_eq!(outcomes.len(), 1);
    assert_eq!(
        (&outcomes[0].1, &outcomes[0].2),
        (&serde_json::json!(1.0), &Value::Bool(true)),
        "the resumed episode lost its script's output: {:?}",
        script_results(&run)
    );
    let results = script_results(&run);
    assert!(
        results.iter().all(|r| r["termination"] != "killed"),
        "the host's own stop was recorded as the script killed: {results:?}"
    );

    let alone = stopped_from_outside(tmp.path(), "alone", None);
    let results = script_results(&alone);
    assert!(
        results.iter().any(|r| r["termination"] == "killed"),
        "a script killed while the host went on was not recorded so: {results:?}"
    );
}
