//! Hostile agents, each built from source in tests/agents/hostile: every one
//! must end with the right recorded reason, and nothing may escape.

mod common;

use std::path::Path;

use serde_json::Value;

struct Attack {
    tmp: tempfile::TempDir,
    finished: common::Finished,
}

fn attack(agent: &str, extra_env: &[(&str, &str)], extra_args: &[&str]) -> Attack {
    let (tmp, finished) = common::run_on_hostile_task(agent, extra_env, extra_args);
    Attack { tmp, finished }
}

/// The same attack by the agent of that name in tests/agents/hostile-py.
fn python_attack(agent: &str, extra_args: &[&str]) -> Attack {
    let path = common::built_agent("tests/agents/hostile-py", Some(agent));
    let (tmp, finished) = common::run_on_hostile_task_with(&path, &[], extra_args);
    Attack { tmp, finished }
}

impl Attack {
    fn answer_lines(&self) -> Vec<String> {
        self.finished.answer().lines().map(String::from).collect()
    }

    fn assert_nothing_escaped(&self) {
        let answer = self.finished.answer();
        assert!(!answer.contains("ESCAPED"), "an attempt succeeded:\n{answer}");
        let token = common::hidden_token();
        let leaks = common::files_containing(self.tmp.path(), &token);
        assert!(leaks.is_empty(), "the hidden answer leaked into {leaks:?}");
    }

    fn script_results(&self) -> Vec<Value> {
        self.finished.script_results()
    }

    fn episode_dir(&self) -> &Path {
        &self.finished.dir
    }
}

/// Errors the trace recorded for workspace calls, by kind.
fn error_kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e["result"]["error"]["kind"].as_str().map(String::from))
        .collect()
}

#[test]
fn path_traversal_with_dot_dot_is_denied() {
    check_path_traversal(attack("path_traversal", &[], &[]));
}

#[test]
fn path_traversal_from_python_is_denied() {
    check_path_traversal(python_attack("path_traversal", &[]));
}

fn check_path_traversal(attack: Attack) {
    assert_eq!(attack.finished.end_reason(), "completed");
    attack.assert_nothing_escaped();
    let lines = attack.answer_lines();
    assert!(
        lines.iter().filter(|l| l.ends_with(": denied")).count() >= 8,
        "{lines:?}"
    );
    assert!(lines.contains(&"inside still works: true".to_string()));
    let runs = &attack.finished.dir;
    assert!(!runs.join("escaped.txt").exists() && !runs.join("escaped.py").exists());
    assert!(
        error_kinds(&attack.finished.events())
            .iter()
            .all(|k| k == "permission-denied")
    );
}

#[test]
fn absolute_paths_are_denied() {
    let attack = attack("absolute_paths", &[], &[]);
    attack.assert_nothing_escaped();
    let lines = attack.answer_lines();
    assert_eq!(lines.iter().filter(|l| l.ends_with(": denied")).count(), 5, "{lines:?}");
    assert!(!Path::new("/tmp/mlrb-escaped.txt").exists());
    assert!(!attack.episode_dir().join("workspace/stolen.txt").exists());
}

#[test]
fn symlinks_made_by_a_script_cannot_be_followed_out() {
    let attack = attack("symlink_escape", &[], &[]);
    attack.assert_nothing_escaped();
    let lines = attack.answer_lines();
    assert!(
        lines[0].contains("planted etc_link") && lines[0].contains("planted up"),
        "the script must have planted its links: {lines:?}"
    );
    assert!(lines[1..].iter().all(|l| l.ends_with(": denied")), "{lines:?}");
    assert!(!Path::new("/etc/mlrb-escaped").exists());
    assert!(!attack.episode_dir().join("escaped.txt").exists());
}

#[test]
fn a_script_cannot_find_the_hidden_answers_or_host_files() {
    let attack = attack("read_hidden", &[], &[]);
    attack.assert_nothing_escaped();
    let answer = attack.finished.answer();
    assert!(answer.contains("Exited exit=Some(0)"), "{answer}");
    assert!(
        answer.contains("found: nothing"),
        "the script found something: {answer}"
    );
    // The environment is the sandbox's own: no host variables, no secrets
    // (USER and LOGNAME name the sandbox's user, `mlrb`, not the host's).
    let env_line = answer.split("env: ").nth(1).unwrap_or("");
    for host_only in [
        "CARGO",
        "RUSTUP_HOME",
        "MLRB_CACHE_DIR",
        "SSH_AUTH_SOCK",
        "XDG_RUNTIME_DIR",
    ] {
        assert!(
            !env_line.contains(&format!("'{host_only}'")),
            "{host_only} leaked: {env_line}"
        );
    }
}

#[test]
fn a_script_cannot_reach_the_network() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let attack = attack("network", &[("port.txt", &port)], &[]);
    attack.assert_nothing_escaped();
    let answer = attack.finished.answer();
    assert!(
        answer.contains("no 127.0.0.1") && answer.contains("no internet") && answer.contains("no dns"),
        "{answer}"
    );
    assert!(!answer.contains("connected"), "{answer}");
    assert!(
        listener.accept().is_err(),
        "the sandboxed script reached the host's loopback"
    );
}

#[test]
fn read_only_files_hold_under_every_spelling_and_from_scripts() {
    let attack = attack("read_only_spelling", &[], &[]);
    attack.assert_nothing_escaped();
    let lines = attack.answer_lines();
    assert_eq!(lines.iter().filter(|l| l.ends_with(": denied")).count(), 7, "{lines:?}");
    let tamper = lines.iter().find(|l| l.starts_with("tamper")).unwrap();
    for attempt in ["open-w", "open-a", "unlink", "rename", "chmod", "link", "swap-dir"] {
        assert!(!tamper.contains(&format!("{attempt}=ESCAPED")), "{attempt}: {tamper}");
    }
    let original =
        std::fs::read_to_string(common::workspace_root().join("tests/fixtures/tasks/hostile/env/data/train.csv"))
            .unwrap();
    let after = std::fs::read_to_string(attack.episode_dir().join("workspace/data/train.csv")).unwrap();
    assert_eq!(after, original);
    // The final snapshot holds the original too.
    let manifest = latest_manifest(attack.episode_dir());
    let hash = manifest["entries"]["data/train.csv"]["hash"].as_str().unwrap();
    assert_eq!(hash, blake3::hash(original.as_bytes()).to_hex().as_str());
}

fn latest_manifest(dir: &Path) -> Value {
    serde_json::to_value(mlrb::record::snapshot::latest_manifest(&dir.join("snapshots")).unwrap()).unwrap()
}

#[test]
fn an_infinite_loop_in_the_agent_ends_at_the_deadline() {
    let started = std::time::Instant::now();
    check_infinite_loop(attack("infinite_loop", &[], &["--wall-seconds", "3"]), started);
}

#[test]
fn an_infinite_loop_in_a_python_agent_ends_at_the_deadline() {
    let attack = python_attack("infinite_loop", &["--wall-seconds", "3"]);
    // Measured from after the build, which the helper may have had to do.
    let started = std::time::Instant::now() - std::time::Duration::from_secs(3);
    check_infinite_loop(attack, started);
}

fn check_infinite_loop(attack: Attack, started: std::time::Instant) {
    assert_eq!(attack.finished.end_reason(), "timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    // The final snapshot and score are still there.
    assert!(attack.episode_dir().join("score.json").is_file());
    assert!(attack.finished.json["episode"]["end"]["final_snapshot"].is_u64());
}

#[test]
fn a_memory_bomb_in_the_agent_hits_its_memory_limit() {
    check_memory_bomb(attack("agent_memory_bomb", &[], &["--agent-memory-mb", "64"]));
}

#[test]
fn a_memory_bomb_in_a_python_agent_hits_its_memory_limit() {
    check_memory_bomb(python_attack("agent_memory_bomb", &["--agent-memory-mb", "64"]));
}

fn check_memory_bomb(attack: Attack) {
    assert_eq!(attack.finished.end_reason(), "memory-limit", "{}", attack.finished.json);
    let peak = attack.finished.json["episode"]["end"]["agent_memory_peak_bytes"]
        .as_u64()
        .unwrap();
    assert!(peak <= 64 << 20, "peak {peak}");
}

#[test]
fn a_fork_bomb_in_a_script_is_contained() {
    let attack = attack("script_fork_bomb", &[], &[]);
    assert_eq!(attack.finished.end_reason(), "completed");
    let answer = attack.finished.answer();
    assert!(answer.contains("TimedOut"), "{answer}");
    // The host still answered the agent afterwards.
    assert!(answer.contains("after: Ok("), "{answer}");
    let result = &attack.script_results()[0];
    assert!(result["duration_ms"].as_u64().unwrap() < 15_000, "{result}");
}

#[test]
fn a_memory_bomb_in_a_script_ends_out_of_memory() {
    let attack = attack("script_memory_bomb", &[], &[]);
    let result = &attack.script_results()[0];
    assert_eq!(result["termination"], "out-of-memory", "{result}");
    assert!(result["stderr"].as_str().unwrap().contains("out of memory"));
}

#[test]
fn a_script_printing_without_end_is_cut_and_stopped() {
    let attack = attack("script_output_flood", &[], &[]);
    let result = &attack.script_results()[0];
    assert_eq!(result["termination"], "killed", "{result}");
    assert_eq!(result["stdout_truncated"], true);
    let returned: usize = attack
        .finished
        .answer()
        .rsplit("returned stdout bytes: ")
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(returned <= 64 << 10, "the agent got {returned} bytes");
    let logged = std::fs::metadata(attack.episode_dir().join("exec/0001.stdout"))
        .unwrap()
        .len();
    assert!(logged <= (8 << 20) + 100, "the log kept {logged} bytes");
}

#[test]
fn a_script_past_its_timeout_is_killed_with_its_children() {
    let attack = attack("script_timeout", &[], &[]);
    let result = &attack.script_results()[0];
    assert_eq!(result["termination"], "timed-out", "{result}");
    let ms = result["duration_ms"].as_u64().unwrap();
    assert!((2_000..10_000).contains(&ms), "took {ms} ms");
    // No `sleep 1000` survived the sandbox.
    common::assert_no_process("sleep 1000");
}

#[test]
fn an_agent_printing_gigabytes_is_cut_at_the_log_cap() {
    let attack = attack("agent_output_flood", &[], &[]);
    assert_eq!(attack.finished.end_reason(), "completed");
    assert_eq!(attack.finished.answer(), "printed 2 GiB");
    let log = attack.episode_dir().join("agent.log");
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size <= (4 << 20) + 200, "agent.log is {size} bytes");
    let dropped = attack.finished.json["episode"]["end"]["agent_log_dropped_bytes"]
        .as_u64()
        .unwrap();
    assert_eq!(dropped, (2u64 << 30) - (4 << 20));
    let tail = std::fs::read_to_string(&log).unwrap();
    assert!(tail.ends_with("bytes of agent output were dropped at the log cap]\n"));
}

#[test]
fn an_agent_that_ignores_its_step_budget_is_stopped() {
    check_step_budget(attack("step_budget", &[], &["--max-steps", "7"]));
}

#[test]
fn a_python_agent_that_ignores_its_step_budget_is_stopped() {
    check_step_budget(python_attack("step_budget", &["--max-steps", "7"]));
}

fn check_step_budget(attack: Attack) {
    assert_eq!(attack.finished.end_reason(), "step-budget");
    assert_eq!(attack.finished.json["episode"]["end"]["steps"], 7);
    let events = attack.finished.events();
    let refused = error_kinds(&events).iter().filter(|k| *k == "budget-exhausted").count();
    assert!((1..=5).contains(&refused), "{refused} refused calls recorded");
    assert_eq!(events.iter().filter(|e| e["step"].is_u64()).count(), 7);
}

#[test]
fn the_agent_itself_has_no_files_sockets_or_environment() {
    let attack = attack("agent_ambient", &[], &[]);
    assert_eq!(attack.finished.end_reason(), "completed");
    attack.assert_nothing_escaped();
    let lines = attack.answer_lines();
    assert_eq!(lines.iter().filter(|l| l.contains(": refused")).count(), 7, "{lines:?}");
    assert!(lines.contains(&"env vars: 0".to_string()), "{lines:?}");
    assert!(lines.contains(&"args: 0".to_string()), "{lines:?}");
    assert!(!Path::new("/tmp/mlrb-agent-escaped").exists());
}

#[test]
fn an_uncaught_exception_in_a_python_agent_ends_it_as_a_trap() {
    let attack = python_attack("agent_panics", &[]);
    assert_eq!(attack.finished.end_reason(), "trap", "{}", attack.finished.json);
    // The traceback is in the agent's log, the final snapshot and score are kept.
    let log = std::fs::read_to_string(attack.episode_dir().join("agent.log")).unwrap();
    assert!(
        log.contains("RuntimeError: the agent gave up with an uncaught exception"),
        "{log}"
    );
    assert!(attack.episode_dir().join("score.json").is_file());
    assert_eq!(attack.finished.json["episode"]["end"]["steps"], 1);
}
