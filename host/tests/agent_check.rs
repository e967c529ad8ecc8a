//! `mlrb agent check`: what a component targets and imports, and the
//! refusals of components this host will not run.

mod common;

use std::path::Path;

use serde_json::Value;

fn check(file: &Path, extra: &[&str]) -> (bool, Value) {
    let output = common::mlrb()
        .args(["agent", "check", "--json"])
        .arg(file)
        .args(extra)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.success(), report)
}

fn refusals(report: &Value) -> String {
    report["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn an_agent_for_this_host_is_described_and_accepted() {
    use sha2::Digest;
    let baseline = common::agent("baseline");
    let (ok, report) = check(&baseline, &[]);
    assert!(ok, "{report}");
    assert_eq!(report["targets"], "mlrb:agent@0.3.0");
    assert_eq!(report["exports"], serde_json::json!(["run"]));
    let bytes = std::fs::read(&baseline).unwrap();
    assert_eq!(report["size"], bytes.len());
    assert_eq!(report["sha256"], hex::encode(sha2::Sha256::digest(&bytes)));
    assert!(
        report["imports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i == "mlrb:agent/exec@0.3.0")
    );
}

#[test]
fn a_component_importing_sockets_is_refused_for_a_task_without_network() {
    let ambient = common::agent("agent_ambient");
    let (ok, report) = check(&ambient, &["--task", "digits"]);
    assert!(!ok);
    let why = refusals(&report);
    assert!(
        why.contains("wasi:sockets") && why.contains("grants no network"),
        "{why}"
    );
    assert!(why.contains("wasi:filesystem/preopens"), "{why}");

    // For a task that grants network, only the preopens remain refused.
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let toml = std::fs::read_to_string(task.join("task.toml")).unwrap();
    std::fs::write(
        task.join("task.toml"),
        toml.replace("pids = 64", "pids = 64\nnetwork = true"),
    )
    .unwrap();
    let (ok, report) = check(&ambient, &["--task", task.to_str().unwrap()]);
    assert!(!ok);
    let why = refusals(&report);
    assert!(!why.contains("wasi:sockets") && why.contains("preopens"), "{why}");
}

#[test]
fn a_component_importing_wasi_http_runs_only_under_a_network_grant() {
    let probe = common::agent("http-probe");
    let notes = |report: &Value| report["notes"].to_string();
    // For no task in particular: accepted, with a note.
    let (ok, report) = check(&probe, &[]);
    assert!(ok, "{report}");
    assert_eq!(report["http"], true);
    assert!(notes(&report).contains("wasi:http"), "{report}");
    // For a task without network: refused, as sockets are.
    let (ok, report) = check(&probe, &["--task", "digits"]);
    assert!(!ok);
    let why = refusals(&report);
    assert!(
        why.contains("imports wasi:http (") && why.contains("the task grants no network"),
        "{why}"
    );
    // For a task that grants network: accepted, noting the grant.
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    common::edit_task_toml(&task, "pids = 64", "pids = 64\nnetwork = true");
    let (ok, report) = check(&probe, &["--task", task.to_str().unwrap()]);
    assert!(ok, "{report}");
    assert!(notes(&report).contains("the task grants network"), "{report}");
    // An agent that imports none of it says so.
    let (_, report) = check(&common::agent("baseline"), &[]);
    assert_eq!(report["http"], false);
}

#[test]
fn a_component_for_another_world_or_wit_version_is_refused() {
    let (ok, report) = check(&common::agent("other-world"), &[]);
    assert!(!ok);
    assert!(refusals(&report).contains("another world"), "{report}");
    assert!(report["targets"].is_null());

    // The baseline, its mlrb:agent imports renamed to a future version
    // (same length, so the binary stays well-formed).
    let mut bytes = std::fs::read(common::agent("baseline")).unwrap();
    let (from, to) = (b"mlrb:agent/".as_slice(), b"@0.3.0".as_slice());
    let mut i = 0;
    while i + from.len() < bytes.len() {
        if bytes[i..].starts_with(from)
            && let Some(at) = bytes[i..i + 40].windows(to.len()).position(|w| w == to)
        {
            bytes[i + at + 3] = b'9';
        }
        i += 1;
    }
    let tmp = tempfile::tempdir().unwrap();
    let future = tmp.path().join("future.wasm");
    std::fs::write(&future, bytes).unwrap();
    let (ok, report) = check(&future, &[]);
    assert!(!ok, "{report}");
    assert_eq!(report["targets"], "mlrb:agent@0.9.0");
    assert!(
        refusals(&report).contains("this host implements mlrb:agent@0.3.0 and runs agents of mlrb:agent@0.3.0, @0.2.0"),
        "{report}"
    );
}
