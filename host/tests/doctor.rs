//! `mlrb doctor` against what this machine really has: each part it
//! reports is checked by another way of finding it, and a machine without
//! bubblewrap (a PATH without it) is told it cannot run an episode.

mod common;

use std::process::Command;

use serde_json::Value;

fn doctor(path: Option<&str>) -> (std::process::Output, Vec<Value>) {
    let mut command = common::mlrb();
    command.args(["doctor", "--json"]);
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let output = command.output().unwrap();
    let parts: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    (output, parts)
}

fn present(parts: &[Value], name: &str) -> bool {
    let part = parts
        .iter()
        .find(|p| p["part"] == name)
        .unwrap_or_else(|| panic!("no part {name}: {parts:?}"));
    part["present"].as_bool().unwrap()
}

/// Whether `sh -c script` succeeds here.
fn sh(script: &str) -> bool {
    Command::new("sh")
        .args(["-c", script])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn doctor_reports_what_this_machine_has() {
    let (output, parts) = doctor(None);
    for part in &parts {
        for field in ["part", "detail", "disables", "add"] {
            assert!(part[field].as_str().is_some_and(|s| !s.is_empty()), "{field}: {part}");
        }
    }
    assert_eq!(present(&parts, "bubblewrap"), sh("command -v bwrap"));
    assert_eq!(output.status.success(), present(&parts, "bubblewrap"));
    assert_eq!(
        present(&parts, "chromium"),
        sh("command -v chromium || command -v chromium-browser")
    );
    assert_eq!(present(&parts, "slurm"), sh("command -v sbatch"));
    assert_eq!(present(&parts, "docker engine"), sh("docker version"));
    assert_eq!(present(&parts, "gpus"), sh("nvidia-smi -L | grep -q GPU"));
    assert_eq!(
        present(&parts, "rust agents"),
        sh("rustup target list --installed | grep -qx wasm32-wasip2")
    );
    if present(&parts, "docker engine") {
        let image = parts.iter().find(|p| p["part"] == "docker image").unwrap();
        let name = image["detail"].as_str().unwrap();
        if image["present"] == true {
            assert!(sh(&format!("docker image inspect {name} >/dev/null")), "{image}");
        }
    }
    // The test setup installs every part but GPUs: under CI all are here.
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        for part in &parts {
            if part["part"] != "gpus" && part["part"] != "cgroups" {
                assert_eq!(part["present"], true, "scripts/setup.sh --all installs it: {part}");
            }
        }
    }
    // The table names every part.
    let table = common::mlrb().arg("doctor").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    for part in &parts {
        assert!(table.contains(part["part"].as_str().unwrap()), "{table}");
    }
}

#[test]
fn without_bubblewrap_doctor_says_what_is_missing_and_fails() {
    let empty = tempfile::tempdir().unwrap();
    let (output, parts) = doctor(Some(empty.path().to_str().unwrap()));
    assert!(!present(&parts, "bubblewrap"));
    let bubblewrap = parts.iter().find(|p| p["part"] == "bubblewrap").unwrap();
    assert!(
        bubblewrap["add"].as_str().unwrap().contains("bubblewrap"),
        "{bubblewrap}"
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("bubblewrap"), "{stderr}");
    for name in ["chromium", "slurm", "c agents"] {
        assert!(!present(&parts, name), "{name} is not on an empty PATH");
    }
}
