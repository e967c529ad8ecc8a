//! The torch image (`mlrb image build --with-torch`): built from the exact
//! wheels of images/torch/requirements.lock and reused while the lock is
//! unchanged; tasks that need PyTorch get it, and the episode records its
//! digest; and in it the ml-research-benchmark evaluators' own code
//! (safetensors and config checks, loading, parameter caps, log-probability
//! pair scoring) runs on a toy model trained from scratch, refusing each of
//! the fixture's invalid submissions with its reason.

mod common;

use serde_json::Value;

fn torch_task() -> std::path::PathBuf {
    common::workspace_root().join("tests/fixtures/tasks/torch-lm")
}

#[test]
fn the_torch_image_is_reused_and_runs_the_research_evaluators() {
    if !common::docker_ready() {
        return;
    }
    // scripts/test.sh builds it; whatever happened before, a second build
    // with the same lock is a no-op.
    for _ in 0..2 {
        let output = common::mlrb()
            .args(["image", "build", "--with-torch"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        if String::from_utf8_lossy(&output.stdout).contains("is up to date") {
            break;
        }
    }
    let output = common::mlrb()
        .args(["image", "build", "--with-torch"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.contains("is up to date"), "{said}");

    let output = common::mlrb()
        .args(["tasks", "test", "--sandbox", "docker", "--json"])
        .arg(torch_task())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    let report = &reports[0];
    assert!(output.status.success() && report["passed"] == true, "{report:#}");
    let score = report["starter"]["score"].as_f64().unwrap();
    assert!(
        score >= 0.9,
        "the trained toy model prefers the grammatical sentences: {report:#}"
    );
    let refused: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "invalid submission" && f["status"] == "ok")
        .filter_map(|f| f["detail"].as_str())
        .collect();
    for case in [
        "custom_code",
        "pickled_weights",
        "too_many_parameters",
        "wrong_model_type",
    ] {
        assert!(
            refused.iter().any(|d| d.starts_with(case)),
            "{case} not refused: {report:#}"
        );
    }
}

#[test]
fn an_episode_of_a_torch_task_runs_in_the_torch_image_and_records_its_digest() {
    if !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let image = common::mlrb()
        .args(["image", "build", "--with-torch"])
        .output()
        .unwrap();
    assert!(image.status.success(), "{}", String::from_utf8_lossy(&image.stderr));
    let tag = String::from_utf8_lossy(&image.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let inspect = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", &tag])
        .output()
        .unwrap();
    let digest = String::from_utf8_lossy(&inspect.stdout).trim().to_string();
    assert!(digest.starts_with("sha256:"), "{digest}");
    let finished = common::run_episode(
        &common::agent("baseline"),
        torch_task().to_str().unwrap(),
        tmp.path(),
        &["--sandbox", "docker"],
    );
    let episode = &finished.json["episode"];
    assert_eq!(episode["host"]["image_digest"], digest.as_str(), "{episode:#}");
    assert!(
        finished.json["score"]["score"].as_f64().unwrap() >= 0.9,
        "{:#}",
        finished.json
    );
}
