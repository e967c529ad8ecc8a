//! Upstream MLAgentBench folders (tests/fixtures/mlagentbench: unchanged
//! copies of snap-stanford/MLAgentBench's) in the smoke profile: each
//! folder's own prepare.py runs offline on stand-in data, its own train.py
//! runs on them (a skeleton stops where the agent is to write the model, and
//! the stand-in submits), its own eval.py scores the submission through
//! mlrb and refuses each invalid one; and mlrb's score is the one upstream's
//! eval.py gives the same workspace run outside mlrb, in the same image,
//! where upstream's own failure marks (a NaN) are numbers mlrb refuses.

mod common;

use common::findings;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The folders the smoke profile has stand-in data for, how many invalid
/// submissions each must refuse, and whether its scripts need the torch
/// image.
const COVERED: &[(&str, usize, bool)] = &[
    ("house-price", 3, false),
    ("amp-parkinsons-disease-progression-prediction", 3, false),
    ("cifar10", 2, true),
    ("imdb", 2, true),
    ("spaceship-titanic", 3, true),
    ("feedback", 3, true),
    ("fathomnet", 3, true),
    ("identify-contrails", 3, true),
];

fn upstream(name: &str, dir: &Path) -> PathBuf {
    let to = dir.join(name);
    common::copy_dir(
        &common::workspace_root().join("tests/fixtures/mlagentbench").join(name),
        &to,
    );
    to
}

/// `mlrb tasks test --smoke --keep --json` on `folders`: exit status, reports.
fn smoke(folders: &[PathBuf]) -> (bool, Vec<Value>) {
    let options = ["--smoke", "--keep", "--sandbox", "docker"].map(std::ffi::OsString::from);
    let args: Vec<std::ffi::OsString> = options.into_iter().chain(folders.iter().map(|f| f.into())).collect();
    common::tasks_test(&args)
}

/// The tag `mlrb image build [--with-torch]` reports.
fn image(torch: bool) -> String {
    let output = common::mlrb()
        .args(["image", "build"])
        .args(torch.then_some("--with-torch"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.split_whitespace().next().unwrap().to_string()
}

/// The newest prepared data of the smoke profile for `name` `version`.
fn prepared(name: &str, version: &str) -> PathBuf {
    let prefix = format!("smoke-{name}-{version}-");
    let mut found: Vec<_> = std::fs::read_dir(common::cache_dir().join("prepared"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix) && e.path().join("complete").is_file())
        .map(|e| (e.metadata().unwrap().modified().unwrap(), e.path()))
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| panic!("no prepared data {prefix}*")).1
}

/// The newest stand-in hub whose name starts with `bare-` (`bare`: an
/// MLAgentBench folder's, whose `python/` holds the one library change,
/// torchvision's md5 check of CIFAR files) or not (the Hugging Face one).
fn stand_in(bare: bool) -> PathBuf {
    let mut found: Vec<_> = std::fs::read_dir(common::cache_dir().join("standin"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("bare-") == bare && e.path().join("complete").is_file())
        .map(|e| (e.metadata().unwrap().modified().unwrap(), e.path()))
        .collect();
    found.sort();
    found.pop().expect("a stand-in hub").1
}

/// Upstream's `get_score(submission)`, as its own `__main__` calls it: in
/// the prepared scripts folder beside the prepared env, outside mlrb (a
/// plain container of the image, no adapter), printed with `repr`; with
/// the smoke profile's data where its code reads them (the Hugging Face
/// stand-in, offline, for `hub`; torchvision's CIFAR files, present).
fn upstream_score(image: &str, prepared: &Path, submission: &Path, hub: bool) -> String {
    let mount = |from: &Path, to: &str| format!("{}:{to}:ro", from.display());
    let score = "python3 -c \"import eval; print(repr(float(eval.get_score('/sub'))))\"";
    let script = match hub {
        true => format!("cp -rsL /hub/datasets /tmp/ds && chmod -R u+w /tmp/ds && {score}"),
        false => score.to_string(),
    };
    let output = Command::new("docker")
        .args(["run", "--rm", "--network", "none", "-w", "/up/scripts"])
        .args(["-v", &mount(&prepared.join("scripts"), "/up/scripts")])
        .args(["-v", &mount(&prepared.join("env"), "/up/env")])
        .args(["-v", &mount(submission, "/sub")])
        .args(["-v", &mount(&stand_in(true).join("python"), "/site")])
        .args(["-v", &mount(&stand_in(false), "/hub")])
        .args([
            "-e",
            "PYTHONPATH=/site",
            "-e",
            "HF_DATASETS_OFFLINE=1",
            "-e",
            "HF_HUB_OFFLINE=1",
        ])
        .args(["-e", "HF_DATASETS_CACHE=/tmp/ds", image, "sh", "-c", &script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "upstream's eval.py: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.trim().lines().last().unwrap().to_string()
}

#[test]
fn upstream_folders_pass_the_smoke_profile_and_score_as_their_own_eval_py() {
    if !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let folders: Vec<PathBuf> = COVERED.iter().map(|(name, ..)| upstream(name, tmp.path())).collect();
    let (passed, reports) = smoke(&folders);
    assert_eq!(reports.len(), COVERED.len());
    for (report, (name, invalid, torch)) in reports.iter().zip(COVERED) {
        assert_eq!(report["task"], *name);
        assert_eq!(report["smoke"], true, "{name}: labelled smoke");
        assert_eq!(report["passed"], true, "{name}: {report:#}");
        let refused = findings(report, "invalid submission", "ok");
        assert_eq!(refused.len(), *invalid, "{name}: {report:#}");
        let score = report["starter"]["score"]
            .as_f64()
            .unwrap_or_else(|| panic!("{name}: {report:#}"));

        let data = prepared(name, report["version"].as_str().unwrap());
        assert!(data.join("smoke").is_file(), "{name}: the data are marked smoke");
        let workspace = PathBuf::from(report["work_dir"].as_str().unwrap()).join("starter");
        let theirs = upstream_score(&image(*torch), &data, &workspace, *name == "imdb");
        let theirs: f64 = theirs
            .parse()
            .unwrap_or_else(|_| panic!("{name}: upstream said {theirs}"));
        assert_eq!(
            score, theirs,
            "{name}: mlrb recorded {score}, upstream's eval.py gives {theirs}"
        );
        eprintln!(
            "{name}: prepare {:.0} s, starter {:.0} s, score {score}",
            report["prepare_seconds"].as_f64().unwrap(),
            report["starter"]["train_seconds"].as_f64().unwrap()
        );
    }
    assert!(passed);

    // Upstream's house-price scores a shorter submission NaN: a number
    // upstream, which mlrb refuses as no score.
    let house = &reports[0];
    let workspace = PathBuf::from(house["work_dir"].as_str().unwrap()).join("invalid-truncated");
    let data = prepared("house-price", house["version"].as_str().unwrap());
    assert_eq!(upstream_score(&image(false), &data, &workspace, false), "nan");
    let refused = findings(house, "invalid submission", "ok");
    assert!(
        refused
            .iter()
            .any(|d| d.starts_with("truncated: refused") && d.contains("returned nan")),
        "{refused:?}"
    );
    for report in &reports {
        let _ = std::fs::remove_dir_all(report["work_dir"].as_str().unwrap());
    }
}

/// `folder` in the smoke profile, refused before anything is prepared or
/// run: the stand-in's failed finding that `says` accepts.
fn refused_before_anything(folder: PathBuf, says: impl Fn(&str) -> bool) {
    let (passed, reports) = smoke(&[folder]);
    assert!(!passed);
    let failed = findings(&reports[0], "stand-in", "fail");
    assert!(failed.iter().any(|d| says(d)), "{:#}", reports[0]);
    assert!(reports[0]["starter"].is_null(), "nothing ran: {:#}", reports[0]);
}

#[test]
fn a_changed_upstream_folder_has_no_stand_in_and_fails_the_smoke_profile() {
    if !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let folder = upstream("house-price", tmp.path());
    let eval = folder.join("scripts/eval.py");
    let text = std::fs::read_to_string(&eval).unwrap().replace("abs(", "-abs(");
    std::fs::write(&eval, text).unwrap();
    refused_before_anything(folder, |d| d.contains("not an unchanged upstream MLAgentBench folder"));
}

#[test]
fn a_folder_the_smoke_profile_cannot_run_says_why_before_anything_starts() {
    if !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let folder = upstream("ogbn-arxiv", tmp.path());
    refused_before_anything(folder, |d| d.contains("pyg-lib") && d.contains("torch-sparse"));
}

/// The torch image prints numpy's scalars as numpy 1 did only where a
/// folder's environment asks (identify-contrails'), and its Keras runs on
/// PyTorch where the environment says so (fathomnet's), TensorFlow absent.
#[test]
fn the_torch_image_keeps_numpy_2_and_keras_3_unless_a_folder_asks() {
    if !common::docker_ready() {
        return;
    }
    let image = image(true);
    let python = |env: &[&str], code: &str| {
        let mut docker = Command::new("docker");
        docker.args(["run", "--rm", "--network", "none"]);
        for pair in env {
            docker.args(["-e", pair]);
        }
        let output = docker.args([image.as_str(), "python3", "-c", code]).output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
        (output.status.success(), text + &String::from_utf8_lossy(&output.stderr))
    };
    let scalars = "import numpy as np; print([np.int64(1), np.float32(0.5)])";
    assert_eq!(python(&[], scalars), (true, "[np.int64(1), np.float32(0.5)]".into()));
    assert_eq!(python(&["MLRB_NUMPY_PRINT=1.25"], scalars), (true, "[1, 0.5]".into()));
    let keras = "import keras; print(keras.backend.backend())";
    assert_eq!(python(&["KERAS_BACKEND=torch"], keras), (true, "torch".into()));
    let (ok, text) = python(&[], keras);
    assert!(
        !ok && text.contains("tensorflow"),
        "Keras's default backend is not in the image: {text}"
    );
}
