//! Bad input gets one clear line on stderr, a non-zero exit, and no episode.

mod common;

use std::path::{Path, PathBuf};

/// `mlrb run --agent <agent> --task <task>` must fail with one line holding
/// every `expected` piece, and start no episode.
fn run_fails(agent: &Path, task: &str, expected: &[&str]) {
    let out = tempfile::tempdir().unwrap();
    let output = common::run_command(agent, task, out.path(), &[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{agent:?} on {task} succeeded");
    assert_eq!(stderr.trim().lines().count(), 1, "not one line: {stderr}");
    for needle in expected {
        assert!(stderr.contains(needle), "`{needle}` not in: {stderr}");
    }
    let started = walkdir::WalkDir::new(out.path())
        .into_iter()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name() == "episode.json");
    assert!(!started, "an episode was started");
}

/// A file of `content` named `name` in a fresh temp dir.
fn file(name: &str, content: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(name);
    std::fs::write(&path, content).unwrap();
    (tmp, path)
}

/// The hostile fixture task with its task.toml passed through `edit`.
fn task_with(edit: impl Fn(String) -> String) -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let text = std::fs::read_to_string(task.join("task.toml")).unwrap();
    std::fs::write(task.join("task.toml"), edit(text)).unwrap();
    (tmp, task.to_string_lossy().into_owned())
}

#[test]
fn a_file_that_is_not_wasm() {
    let (_tmp, fake) = file("agent.wasm", b"#!/bin/sh\necho hi\n");
    run_fails(&fake, "digits", &["agent.wasm", "not a WebAssembly component"]);
}

#[test]
fn a_core_module_instead_of_a_component() {
    let (_tmp, module) = file("core.wasm", b"\0asm\x01\0\0\0");
    run_fails(&module, "digits", &["core.wasm", "core WebAssembly module"]);
}

#[test]
fn a_component_for_a_different_world() {
    run_fails(
        &common::agent("other-world"),
        "digits",
        &["other-world.wasm", "mlrb:agent@0.3.0"],
    );
}

#[test]
fn a_missing_agent_file() {
    run_fails(
        Path::new("/nonexistent/agent.wasm"),
        "digits",
        &["/nonexistent/agent.wasm", "cannot read"],
    );
}

#[test]
fn a_malformed_task_toml() {
    let (_tmp, task) = task_with(|_| "name = \"x\"\nversion = 1\n".into());
    run_fails(&common::agent("baseline"), &task, &["task.toml", "line 2", "version"]);
}

#[test]
fn a_task_toml_with_a_bad_value() {
    let (_tmp, task) = task_with(|text| text.replace("memory_mb = 256", "memory_mb = 1"));
    run_fails(&common::agent("baseline"), &task, &["task.toml", "resources.memory_mb"]);
}

#[test]
fn a_task_without_an_evaluator() {
    let (tmp, task) = task_with(|text| text);
    std::fs::remove_file(tmp.path().join("hostile-task/scripts/eval.py")).unwrap();
    run_fails(&common::agent("baseline"), &task, &["scripts/eval.py", "missing"]);
}

#[test]
fn a_missing_task() {
    run_fails(
        &common::agent("baseline"),
        "no-such-task",
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

#[test]
fn a_gpu_task_on_a_host_without_gpus_is_refused_before_anything_starts() {
    let (_tmp, task) = task_with(|text| text.replace("pids = 64", "pids = 64\ngpus = 1"));
    run_fails(
        &common::agent("baseline"),
        &task,
        &[
            "needs 1 GPU(s)",
            "this host was given 0 (--gpus none",
            "Nothing was started",
        ],
    );
}

#[test]
fn a_task_needing_python_modules_or_memory_the_host_lacks_is_refused_before_anything_starts() {
    let (_tmp, task) = task_with(|text| {
        text.replace(
            "pids = 64",
            "pids = 64\npython_packages = [\"numpy\", \"no_such_module_for_mlrb\"]",
        )
    });
    run_fails(
        &common::agent("baseline"),
        &task,
        &[
            "cannot run on this host",
            "lacks no_such_module_for_mlrb",
            "Nothing was started",
        ],
    );

    let (_tmp, task) = task_with(|text| text.replace("memory_mb = 256", "memory_mb = 100000000"));
    run_fails(
        &common::agent("baseline"),
        &task,
        &["100000000 MiB of memory; this host has", "Nothing was started"],
    );
}
