//! Agents in Rust, Python and C: the same baseline in each language leaves
//! the same workspace and score; `mlrb agent new` + `mlrb agent build` +
//! `mlrb run` works for each language from an empty folder; and what a
//! language runtime imports but an agent never gets (sockets, preopened
//! directories) is closed by the build.

mod common;

use std::path::Path;

use serde_json::Value;

/// The final snapshot's entries (path → type, hash, size) and the score.
fn outcome(finished: &common::Finished) -> (Value, Value) {
    let end = &finished.json["episode"]["end"];
    let snapshot = end["final_snapshot"].as_u64().expect("a final snapshot");
    let manifest =
        serde_json::to_value(mlrb::record::snapshot::read_manifest(&finished.dir.join("snapshots"), snapshot).unwrap())
            .unwrap();
    (manifest["entries"].clone(), finished.json["score"]["score"].clone())
}

/// The tool calls of an episode, in order.
fn calls(finished: &common::Finished) -> Vec<String> {
    finished
        .events()
        .iter()
        // The agent's own calls (not the host's records or its clock reads).
        .filter(|e| !matches!(e["interface"].as_str(), Some("host" | "wasi")))
        .filter_map(|e| e["function"].as_str().map(String::from))
        .collect()
}

#[test]
fn python_and_c_baselines_match_the_rust_baseline() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = [
        ("rust", common::agent("baseline")),
        ("python", common::built_agent("plugins/baseline-py", None)),
        ("c", common::built_agent("sdk/c/baseline", None)),
    ];
    let mut results = Vec::new();
    for (language, agent) in &agents {
        let finished = common::run_episode(agent, "digits", &tmp.path().join(language), &["--seed", "3"]);
        assert_eq!(finished.end_reason(), "completed", "{language}: {}", finished.json);
        assert_eq!(finished.answer(), "train.py finished", "{language}");
        let log = std::fs::read_to_string(finished.dir.join("agent.log")).unwrap();
        assert_eq!(log, "train.py finished\n", "{language}");
        results.push((language, outcome(&finished), calls(&finished)));
    }
    let (_, (rust_files, rust_score), rust_calls) = &results[0];
    assert!(rust_score.is_f64(), "the Rust baseline scored: {rust_score}");
    assert!(rust_files.get("submission.csv").is_some(), "{rust_files}");
    assert_eq!(rust_calls, &["note", "execute-script", "note"]);
    for (language, (files, score), calls) in &results[1..] {
        assert_eq!(files, rust_files, "{language}: a different final workspace");
        assert_eq!(score, rust_score, "{language}: a different score");
        assert_eq!(calls, rust_calls, "{language}: different tool calls");
    }
}

fn mlrb_ok(args: &[&str], dir: &Path) -> String {
    let output = common::mlrb().current_dir(dir).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "mlrb {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn new_build_run(language: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("my-{language}-agent");
    let mut build = common::mlrb();
    if language == "rust" {
        // Dependencies built once for every run of this test.
        build.env("CARGO_TARGET_DIR", common::target_dir().join("scaffolded-agents"));
    }
    mlrb_ok(&["agent", "new", &name, "--lang", language], tmp.path());
    let project = tmp.path().join(&name);
    assert!(project.join("mlrb-agent.toml").is_file());
    assert!(project.join("README.md").is_file());

    let built = build.current_dir(&project).args(["agent", "build"]).output().unwrap();
    assert!(
        built.status.success(),
        "mlrb agent build ({language}) failed:\n{}\n{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    let wasm = project.join(format!("{name}.wasm"));
    assert!(wasm.is_file(), "{} was not written", wasm.display());
    let stdout = String::from_utf8_lossy(&built.stdout);
    assert!(stdout.contains(&format!("({language} agent)")), "{stdout}");

    let finished = common::run_episode(&wasm, "digits", &tmp.path().join("runs"), &[]);
    assert_eq!(finished.end_reason(), "completed", "{}", finished.json);
    assert!(finished.json["score"]["score"].is_f64(), "{}", finished.json["score"]);
    assert!(finished.answer().starts_with("train.py ended"), "{}", finished.answer());
    let notes: Vec<Value> = finished
        .events()
        .into_iter()
        .filter(|e| e["function"] == "note")
        .collect();
    assert!(
        notes[0]["args"]["text"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{name} on digits")),
        "{notes:?}"
    );
}

#[test]
fn a_new_rust_agent_builds_and_runs_from_an_empty_folder() {
    new_build_run("rust");
}

#[test]
fn a_new_python_agent_builds_and_runs_from_an_empty_folder() {
    new_build_run("python");
}

#[test]
fn a_new_c_agent_builds_and_runs_from_an_empty_folder() {
    new_build_run("c");
}

fn mlrb_err(args: &[&str], dir: &Path) -> String {
    let output = common::mlrb().current_dir(dir).args(args).output().unwrap();
    assert!(!output.status.success(), "mlrb {args:?} succeeded");
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr}");
    stderr
}

#[test]
fn bad_projects_get_one_line_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    let err = mlrb_err(&["agent", "new", "Bad Name", "--lang", "python"], dir);
    assert!(err.contains("\"Bad Name\"") && err.contains("lowercase"), "{err}");

    // A path names the folder and, by its last part, the agent; a bad last
    // part is refused as a bad name.
    let err = mlrb_err(&["agent", "new", "sub/Bad", "--lang", "python"], dir);
    assert!(err.contains("\"Bad\"") && err.contains("lowercase"), "{err}");
    assert!(!dir.join("sub").exists(), "nothing written for a refused name");
    let made = common::mlrb()
        .current_dir(dir)
        .args(["agent", "new", "sub/good-one", "--lang", "c"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let manifest = std::fs::read_to_string(dir.join("sub/good-one/mlrb-agent.toml")).unwrap();
    assert!(manifest.contains("good-one"), "{manifest}");

    std::fs::create_dir(dir.join("taken")).unwrap();
    std::fs::write(dir.join("taken/keep.txt"), "mine").unwrap();
    let err = mlrb_err(&["agent", "new", "taken", "--lang", "c"], dir);
    assert!(err.contains("taken") && err.contains("not empty"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("taken/keep.txt")).unwrap(), "mine");

    std::fs::create_dir(dir.join("empty")).unwrap();
    let err = mlrb_err(&["agent", "build", "empty"], dir);
    assert!(
        err.contains("cannot tell the agent's language") && err.contains("mlrb-agent.toml"),
        "{err}"
    );

    std::fs::create_dir(dir.join("typo")).unwrap();
    std::fs::write(
        dir.join("typo/mlrb-agent.toml"),
        "[agent]\nlanguage = \"python\"\nentyr = \"main\"\n",
    )
    .unwrap();
    let err = mlrb_err(&["agent", "build", "typo"], dir);
    assert!(err.contains("typo/mlrb-agent.toml") && err.contains("entyr"), "{err}");

    std::fs::write(dir.join("typo/mlrb-agent.toml"), "[agent]\nlanguage = \"cobol\"\n").unwrap();
    let err = mlrb_err(&["agent", "build", "typo"], dir);
    assert!(err.contains("mlrb-agent.toml") && err.contains("cobol"), "{err}");

    std::fs::write(dir.join("typo/mlrb-agent.toml"), "[agent]\nlanguage = \"python\"\n").unwrap();
    let err = mlrb_err(&["agent", "build", "typo"], dir);
    assert!(err.contains("typo/app.py") && err.contains("entry"), "{err}");

    std::fs::create_dir(dir.join("broken-c")).unwrap();
    std::fs::write(dir.join("broken-c/agent.c"), "int this is not C;\n").unwrap();
    let output = common::mlrb()
        .current_dir(dir)
        .args(["agent", "build", "broken-c"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("clang failed") && stderr.contains("agent.c"),
        "{stderr}"
    );
}

#[test]
fn python_agents_import_no_sockets_or_preopens_and_cannot_use_them() {
    let agent = common::built_agent("tests/agents/hostile-py", Some("agent_ambient"));
    let check = common::mlrb()
        .args(["agent", "check", "--json"])
        .arg(&agent)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    let report: Value = serde_json::from_slice(&check.stdout).unwrap();
    let imports: Vec<&str> = report["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert!(
        !imports
            .iter()
            .any(|i| i.starts_with("wasi:sockets/") || i.starts_with("wasi:filesystem/preopens")),
        "{imports:?}"
    );
    assert!(imports.contains(&"mlrb:agent/workspace@0.3.0"), "{imports:?}");

    let (tmp, finished) = common::run_on_hostile_task_with(&agent, &[], &[]);
    assert_eq!(finished.end_reason(), "completed", "{}", finished.json);
    let answer = finished.answer();
    assert!(!answer.contains("ESCAPED"), "{answer}");
    let refused = answer.lines().filter(|l| l.contains(": refused")).count();
    assert_eq!(refused, 7, "{answer}");
    assert!(answer.contains("socket: refused (PermissionError"), "{answer}");
    assert!(answer.lines().any(|l| l == "env vars: 0"), "{answer}");
    assert!(answer.lines().any(|l| l == "args: 0"), "{answer}");
    assert!(!Path::new("/tmp/mlrb-agent-escaped").exists());
    let leaks = common::files_containing(tmp.path(), &common::hidden_token());
    assert!(leaks.is_empty(), "{leaks:?}");
}

#[test]
fn a_python_agent_draws_randomness_from_the_seed_and_can_give_up() {
    let seeded = common::built_agent("tests/agents/probes-py", Some("seeded"));
    let tmp = tempfile::tempdir().unwrap();
    let answer = |out: &str, seed: &str| {
        let finished = common::run_episode(&seeded, "digits", &tmp.path().join(out), &["--seed", seed]);
        assert_eq!(finished.end_reason(), "completed", "{}", finished.json);
        finished.answer()
    };
    let first = answer("a", "1");
    assert_eq!(first, answer("b", "1"), "the same seed drew differently");
    let other = answer("c", "2");
    // Both `random` (seeded when the build imported it) and os.urandom follow the seed.
    for (a, b) in first.split(' ').zip(other.split(' ')) {
        assert_ne!(a, b, "two seeds drew the same: {first} / {other}");
    }

    let gives_up = common::built_agent("tests/agents/probes-py", Some("gives_up"));
    let finished = common::run_episode(&gives_up, "digits", &tmp.path().join("d"), &[]);
    assert_eq!(finished.end_reason(), "agent-error", "{}", finished.json);
    let detail = finished.json["episode"]["end"]["detail"].as_str().unwrap();
    assert!(detail.contains("no idea how to improve digits"), "{detail}");
    assert!(finished.dir.join("score.json").is_file());
}
