//! The command line as a Unix tool: a reader that goes away ends it
//! quietly, and what users read names things in words, not Rust's debug text.

mod common;

use std::io::Read;
use std::process::Stdio;

#[test]
fn a_closed_pipe_ends_the_program_quietly() {
    for args in [
        &["tasks", "list", "--json"][..],
        &["tasks", "list"],
        &["tasks", "show", "digits"],
    ] {
        let mut child = common::mlrb()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the program has written anything.
        drop(child.stdout.take());
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        let status = child.wait().unwrap();
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert!(status.success(), "{args:?}: {status} {stderr}");
    }
}

#[test]
fn user_facing_messages_carry_no_debug_text() {
    // A task whose evaluator fails: the reason is said in words.
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    std::fs::write(task.join("scripts/eval.py"), "import sys\nsys.exit(3)\n").unwrap();
    let mut command = common::run_command(
        &common::agent("baseline"),
        task.to_str().unwrap(),
        &tmp.path().join("runs"),
        &["--json"],
    );
    let output = command.output().unwrap();
    // Not scored: the documented status, the failure said in one line on stderr.
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("could not be scored"), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let finished = common::Finished {
        dir: std::path::PathBuf::from(json["dir"].as_str().unwrap()),
        json,
        output,
    };
    let error = finished.json["score"]["error"].as_str().unwrap().to_string();
    assert!(error.contains("exited with code 3"), "{error}");
    for debug in ["Some(", "None", "Exited", "Termination::"] {
        assert!(!error.contains(debug), "{error}");
    }
    let table = common::mlrb().arg("eval").arg(&finished.dir).output().unwrap();
    assert_eq!(table.status.code(), Some(3), "mlrb eval says the same: not scored");
    let shown = String::from_utf8_lossy(&table.stdout);
    assert!(!shown.contains("Some(") && !shown.contains("Completed"), "{shown}");
}

/// `mlrb tasks list` leads with what a person asked: one line per task
/// within 100 columns, whatever the terminal; `--wide` has every column.
#[test]
fn tasks_list_is_a_line_per_task_within_100_columns() {
    let json = common::mlrb().args(["tasks", "list", "--json"]).output().unwrap();
    let specs: Vec<serde_json::Value> = serde_json::from_slice(&json.stdout).unwrap();
    let output = common::mlrb()
        .args(["tasks", "list"])
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let too_wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(too_wide.is_empty(), "lines over 100 columns: {too_wide:#?}");
    for spec in &specs {
        let name = spec["name"].as_str().unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(name))
            .collect();
        assert_eq!(lines.len(), 1, "{name}: {text}");
        let metric = spec["metric"]["name"].as_str().unwrap();
        assert!(lines[0].contains(metric), "{name}: {}", lines[0]);
        let gpu = spec["resources"]["gpus"].as_u64().unwrap() > 0;
        assert_eq!(lines[0].trim_end().ends_with("GPU"), gpu, "{}", lines[0]);
    }
    // One line per task, a header and two lines of pointers: nothing else.
    assert_eq!(
        text.lines().filter(|l| !l.trim().is_empty()).count(),
        specs.len() + 3,
        "{text}"
    );
    let wide = common::mlrb().args(["tasks", "list", "--wide"]).output().unwrap();
    let wide = String::from_utf8(wide.stdout).unwrap();
    let description = specs[0]["description"].as_str().unwrap();
    assert!(wide.contains(&description[..20]), "{wide}");
}
