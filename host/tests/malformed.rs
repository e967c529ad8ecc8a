//! Bad input gets one clear line on stderr, a non-zero exit, and no episode.

mod common;

use std::path::Path;

fn fails_with(args: &[&str], out: &Path, expected: &[&str]) {
    let output = common::mlrb().args(args).arg("--out").arg(out).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{args:?} succeeded");
    assert_eq!(stderr.trim().lines().count(), 1, "not one line: {stderr}");
    for needle in expected {
        assert!(stderr.contains(needle), "{args:?}: `{needle}` not in: {stderr}");
    }
    assert!(
        !out.exists()
            || walkdir::WalkDir::new(out)
                .into_iter()
                .filter_map(|e| e.ok())
                .all(|e| e.file_name() != "episode.json"),
        "an episode was started"
    );
}

#[test]
fn a_file_that_is_not_wasm() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("agent.wasm");
    std::fs::write(&fake, "#!/bin/sh\necho hi\n").unwrap();
    fails_with(
        &["run", "--agent", fake.to_str().unwrap(), "--task", "digits"],
        &tmp.path().join("runs"),
        &["agent.wasm", "not a WebAssembly component"],
    );
}

#[test]
fn a_core_module_instead_of_a_component() {
    let tmp = tempfile::tempdir().unwrap();
    let module = tmp.path().join("core.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    fails_with(
        &["run", "--agent", module.to_str().unwrap(), "--task", "digits"],
        &tmp.path().join("runs"),
        &["core.wasm", "core WebAssembly module"],
    );
}

#[test]
fn a_component_for_a_different_world() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = common::agent("other-world");
    fails_with(
        &["run", "--agent", agent.to_str().unwrap(), "--task", "digits"],
        &tmp.path().join("runs"),
        &["other-world.wasm", "mlrb:agent@0.1.0"],
    );
}

#[test]
fn a_missing_agent_file() {
    let tmp = tempfile::tempdir().unwrap();
    fails_with(
        &["run", "--agent", "/nonexistent/agent.wasm", "--task", "digits"],
        &tmp.path().join("runs"),
        &["/nonexistent/agent.wasm", "cannot read"],
    );
}

#[test]
fn a_malformed_task_toml() {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    std::fs::write(task.join("task.toml"), "name = \"x\"\nversion = 1\n").unwrap();
    let agent = common::agent("baseline");
    fails_with(
        &[
            "run",
            "--agent",
            agent.to_str().unwrap(),
            "--task",
            task.to_str().unwrap(),
        ],
        &tmp.path().join("runs"),
        &["task.toml", "line 2", "version"],
    );
}

#[test]
fn a_task_toml_with_a_bad_value() {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let text = std::fs::read_to_string(task.join("task.toml"))
        .unwrap()
        .replace("memory_mb = 256", "memory_mb = 1");
    std::fs::write(task.join("task.toml"), text).unwrap();
    let agent = common::agent("baseline");
    fails_with(
        &[
            "run",
            "--agent",
            agent.to_str().unwrap(),
            "--task",
            task.to_str().unwrap(),
        ],
        &tmp.path().join("runs"),
        &["task.toml", "resources.memory_mb"],
    );
}

#[test]
fn a_missing_task() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = common::agent("baseline");
    fails_with(
        &["run", "--agent", agent.to_str().unwrap(), "--task", "no-such-task"],
        &tmp.path().join("runs"),
        &["no task named `no-such-task`", "mlrb tasks list"],
    );
}

#[test]
fn tasks_list_and_show() {
    let list = common::mlrb().args(["tasks", "list", "--json"]).output().unwrap();
    assert!(list.status.success());
    let tasks: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let names: Vec<&str> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"digits") && names.contains(&"house-prices"),
        "{names:?}"
    );
    let show = common::mlrb().args(["tasks", "show", "house-prices"]).output().unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.status.success() && text.contains("lower is better") && text.contains("SalePrice"),
        "{text}"
    );
}
