//! GPUs in the local sandbox, on a host without any: fake device nodes
//! made with mknod in a scratch `/dev`-like folder the sandbox is pointed
//! at (`MLRB_GPU_DEV_DIR`), a fake driver procfs and library folder, and a
//! fake nvidia-smi first on PATH. A script sees exactly its episode's GPU,
//! the driver's control nodes and libraries, and variables that name it; a
//! second episode's lease hides the first one's device; a GPU task on a
//! host without GPUs is refused before anything starts; and `--python`
//! names the interpreter a task's requirements are met by.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::gpu::{FakeGpus, gpu_task, gpus_seen, probes};
use serde_json::Value;

#[test]
fn a_script_and_its_evaluator_see_exactly_the_leased_gpu() {
    let Some(host) = FakeGpus::new(false) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let task = gpu_task(tmp.path(), 0);
    let agent = common::agent("baseline");
    let mut command = common::run_command(
        &agent,
        task.to_str().unwrap(),
        &tmp.path().join("runs"),
        &["--gpus", "1", "--json"],
    );
    host.apply(&mut command);
    let finished = common::finish(command);
    assert_eq!(finished.json["episode"]["gpus"], serde_json::json!(["1"]));
    let seen = probes(&finished.dir);
    assert_eq!(seen.len(), 2, "the starter's and the evaluator's: {seen:?}");
    for probe in &seen {
        assert_eq!(gpus_seen(probe), ["nvidia1"], "{probe}");
        for control in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] {
            assert_eq!(probe["nodes"][control], true, "{control}: {probe}");
        }
        assert_eq!(
            probe["nodes"]["nvidia-modeset"], false,
            "bound only where the host has it"
        );
        // nvidia-smi answered nothing: CUDA's own numbering of the one node it can open.
        assert_eq!(probe["cuda"], "0", "{probe}");
        assert_eq!(probe["nvidia"], "1", "{probe}");
        let lib = host.driver().join("libcuda.so.1");
        assert_eq!(probe["lib"], lib.to_str().unwrap(), "{probe}");
        assert_eq!(probe["lib_writable"], false, "the driver is read-only: {probe}");
        // What CUDA's driver reads of /sys as it initialises (without it,
        // cuInit fails with CUDA_ERROR_OPERATING_SYSTEM): the module's state
        // and the PCI devices, read-only.
        assert_eq!(probe["initstate"], "live", "{probe}");
        assert_eq!(
            probe["nvidia_pci"],
            serde_json::json!(["0000:17:00.0", "0000:65:00.0"]),
            "{probe}"
        );
    }
    assert_eq!(finished.json["score"]["score"], 1.0);
}

#[test]
fn a_second_episode_s_lease_hides_the_first_one_s_device() {
    let Some(host) = FakeGpus::new(true) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let task = gpu_task(tmp.path(), 3);
    let mut command = common::mlrb();
    command
        .args(["bench", "--quiet", "--json", "--agent"])
        .arg(common::agent("baseline"))
        .args([
            "--task",
            task.to_str().unwrap(),
            "--seeds",
            "2",
            "-j",
            "2",
            "--gpus",
            "0,1",
        ])
        .args(["--cpu-slots", "2", "--out"])
        .arg(tmp.path().join("runs"))
        .args(["--run-name", "two"]);
    let output = host.apply(&mut command).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut leased = BTreeSet::new();
    for seed in ["1", "2"] {
        let dir = tmp.path().join("runs/two/hostile/baseline").join(seed);
        let episode: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("episode.json")).unwrap()).unwrap();
        let gpu = episode["gpus"][0].as_str().unwrap().to_string();
        let starter = probes(&dir.join("exec"));
        assert_eq!(starter.len(), 1, "{starter:?}");
        // The episodes overlapped (each slept 3 s holding its GPU): each saw its own node only.
        assert_eq!(gpus_seen(&starter[0]), [format!("nvidia{gpu}")], "{}", starter[0]);
        let uuid = format!("GPU-{}-fake", gpu.repeat(8));
        assert_eq!(starter[0]["cuda"], uuid.as_str(), "nvidia-smi's UUID names it");
        leased.insert(gpu);
    }
    assert_eq!(leased.len(), 2, "the two episodes held one GPU each: {leased:?}");
}

#[test]
fn a_gpu_task_is_refused_before_it_starts_on_a_host_without_gpus() {
    let tmp = tempfile::tempdir().unwrap();
    let task = gpu_task(tmp.path(), 0);
    let empty = tmp.path().join("no-dev");
    std::fs::create_dir_all(&empty).unwrap();
    let runs = tmp.path().join("runs");
    let agent = common::agent("baseline");
    let output = common::run_command(&agent, task.to_str().unwrap(), &runs, &["--gpus", "0"])
        .env("MLRB_GPU_DEV_DIR", &empty)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("needs 1 GPU(s)")
            && stderr.contains("nvidiactl does not exist: no NVIDIA driver is loaded")
            && stderr.contains("Nothing was started"),
        "{stderr}"
    );
    assert!(
        !runs.exists() || common::files_containing(&runs, "").is_empty(),
        "nothing was made"
    );

    // The driver is there, the GPU named is not.
    let Some(host) = FakeGpus::new(false) else { return };
    let mut command = common::run_command(&agent, task.to_str().unwrap(), &runs, &["--gpus", "5"]);
    let output = host.apply(&mut command).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("GPU 5:") && stderr.contains("nvidia5 does not exist"),
        "{stderr}"
    );
}

/// A venv of the system's python3 holding a module of its own.
fn venv_with(dir: &Path, module: &str) -> PathBuf {
    let venv = dir.join("venv");
    let made = Command::new("/usr/bin/python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let site = venv_with_site(&venv);
    std::fs::create_dir_all(site.join(module)).unwrap();
    std::fs::write(site.join(module).join("__init__.py"), "WHERE = __file__\n").unwrap();
    venv
}

#[test]
fn python_names_the_interpreter_that_meets_a_task_s_packages() {
    let tmp = tempfile::tempdir().unwrap();
    let train = "import sys, mlrb_venv_marker\nprint('INTERPRETER', sys.prefix, mlrb_venv_marker.WHERE)\ntry:\n    open(mlrb_venv_marker.WHERE, 'a')\n    print('VENV WRITABLE')\nexcept OSError as e:\n    print('VENV READ-ONLY', e.errno)\nopen('submission.csv', 'w').write('id,label\\n1,0\\n')\n";
    let task = common::hostile_task(tmp.path(), &[("train.py", train)]);
    common::edit_task_toml(
        &task,
        "[resources]\n",
        "[resources]\npython_packages = [\"mlrb_venv_marker\"]\n",
    );
    let venv = venv_with(tmp.path(), "mlrb_venv_marker");
    let agent = common::agent("baseline");

    let refused = common::run_command(&agent, task.to_str().unwrap(), &tmp.path().join("none"), &[])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("lacks mlrb_venv_marker") && stderr.contains("--python PATH"),
        "{stderr}"
    );

    let venv_arg = venv.to_str().unwrap();
    let finished = common::run_episode(
        &agent,
        task.to_str().unwrap(),
        &tmp.path().join("runs"),
        &["--python", venv_arg],
    );
    let printed = common::files_containing(&finished.dir.join("exec"), "INTERPRETER ");
    let text = std::fs::read_to_string(&printed[0]).unwrap();
    assert!(text.contains(&format!("INTERPRETER {venv_arg} {venv_arg}/")), "{text}");
    assert!(text.contains("VENV READ-ONLY 30"), "EROFS: {text}");
    let sandbox = finished.json["episode"]["host"]["sandbox"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        sandbox.contains(&format!("python {venv_arg}")),
        "provenance names it: {}",
        finished.json["episode"]
    );

    // The host setting, and Docker refusing what it cannot honour.
    let by_setting = common::run_command(&agent, task.to_str().unwrap(), &tmp.path().join("set"), &["--json"])
        .env("MLRB_PYTHON", &venv)
        .output()
        .unwrap();
    assert!(
        by_setting.status.success(),
        "{}",
        String::from_utf8_lossy(&by_setting.stderr)
    );
    let docker = common::run_command(
        &agent,
        task.to_str().unwrap(),
        &tmp.path().join("d"),
        &["--sandbox", "docker", "--python", venv_arg],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&docker.stderr);
    assert!(
        !docker.status.success() && stderr.contains("is for the local sandbox"),
        "{stderr}"
    );
}

#[test]
fn an_interpreter_not_called_python3_is_every_script_s_python3() {
    let tmp = tempfile::tempdir().unwrap();
    // An interpreter whose folder holds no python3 of its own.
    let real = tmp.path().join("interpreters/bin/my-python");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(std::fs::canonicalize("/usr/bin/python3").unwrap(), &real).unwrap();
    let train = "import sys\nprint('INTERPRETER', sys.executable, sys.version_info[:2])\nopen('submission.csv', 'w').write('id,label\\n1,0\\n')\n";
    let task = common::hostile_task(tmp.path(), &[("train.py", train)]);
    let agent = common::agent("baseline");
    let finished = common::run_episode(
        &agent,
        task.to_str().unwrap(),
        &tmp.path().join("runs"),
        &["--python", real.to_str().unwrap()],
    );
    let printed = common::files_containing(&finished.dir.join("exec"), "INTERPRETER ");
    let text = std::fs::read_to_string(&printed[0]).unwrap();
    assert!(text.contains("INTERPRETER /opt/mlrb-python/bin/python3"), "{text}");
}

/// A venv whose site-packages hold a stub of each of `modules`.
fn venv_of_stubs(dir: &Path, modules: &[&str]) -> PathBuf {
    let venv = venv_with(dir, modules[0]);
    let marker = venv_with_site(&venv);
    for module in &modules[1..] {
        std::fs::create_dir_all(marker.join(module)).unwrap();
        std::fs::write(marker.join(module).join("__init__.py"), "").unwrap();
    }
    venv
}

fn venv_with_site(venv: &Path) -> PathBuf {
    let site = Command::new(venv.join("bin/python3"))
        .args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        .output()
        .unwrap();
    PathBuf::from(String::from_utf8_lossy(&site.stdout).trim())
}

/// `scripts/gpu_check.sh --dry-run` with `args`: its status, stdout and stderr.
fn gpu_check(args: &[&std::ffi::OsStr]) -> (bool, String, String) {
    // Where it keeps what it saw, unless `args` name a folder (--out).
    let out = tempfile::tempdir().unwrap();
    let output = Command::new("bash")
        .arg(common::workspace_root().join("scripts/gpu_check.sh"))
        .args(["--dry-run", "--mlrb", env!("CARGO_BIN_EXE_mlrb"), "--gpu", "0"])
        .args(args)
        .env("MLRB_CACHE_DIR", common::cache_dir())
        .env("OUT", out.path())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (output.status.success(), text(&output.stdout), text(&output.stderr))
}

#[test]
fn the_gpu_check_s_dry_run_checks_what_needs_no_gpu_and_prints_each_task_s_run() {
    let tmp = tempfile::tempdir().unwrap();
    let all = [
        "torch",
        "transformers",
        "safetensors",
        "tokenizers",
        "datasets",
        "accelerate",
        "huggingface_hub",
        "numpy",
        "torchvision",
        "PIL",
    ];
    let venv = venv_of_stubs(&tmp.path().join("full"), &all);
    let empty = tmp.path().join("carried");
    std::fs::create_dir_all(empty.join("wheels")).unwrap();
    let out = tmp.path().join("out");
    let (ok, stdout, stderr) = gpu_check(&[
        "--python".as_ref(),
        venv.as_os_str(),
        "--carried".as_ref(),
        empty.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("would run: nvidia-smi"), "{stdout}");
    // It runs to its table, and keeps what it saw in --out: the probe ran
    // in the sandbox (without a GPU here) and saw the script user.
    assert!(
        stdout.contains("task ") && stdout.contains("not run (--dry-run)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"probe (the sandbox's view): user "mlrb""#),
        "{stdout}\n{stderr}"
    );
    for file in ["machine.txt", "nvidia-smi.txt", "probe.json", "mini_baby_lm"] {
        assert!(out.join(file).exists(), "{file} in {}", out.display());
    }
    let probe: Value = serde_json::from_str(&std::fs::read_to_string(out.join("probe.json")).unwrap()).unwrap();
    assert_eq!(probe["reserve_256_gib"], "ok", "{probe}");
    assert_eq!(probe["threads_of_64"], 64, "{probe}");
    for task in ["mini_baby_lm", "mini_mini_pile", "mini_budget_model_training"] {
        let run = format!(
            "tasks test {task} --smoke --sandbox local --gpus 0 --python {} --json",
            venv.display()
        );
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("would run: timeout") && l.contains(&run)),
            "{run}:\n{stdout}"
        );
    }
    assert!(!stdout.contains("pip install"), "nothing is missing: {stdout}");

    // A Python without `datasets`: refused, unless a wheel was carried.
    let lacking: Vec<&str> = all.iter().copied().filter(|m| *m != "datasets").collect();
    let venv = venv_of_stubs(&tmp.path().join("lacking"), &lacking);
    let (ok, _, stderr) = gpu_check(&[
        "--python".as_ref(),
        venv.as_os_str(),
        "--carried".as_ref(),
        empty.as_os_str(),
    ]);
    assert!(
        !ok && stderr.contains("lacks datasets and no wheels were carried"),
        "{stderr}"
    );
    std::fs::write(empty.join("wheels/datasets-5.2.0-py3-none-any.whl"), "").unwrap();
    let (ok, stdout, stderr) = gpu_check(&[
        "--python".as_ref(),
        venv.as_os_str(),
        "--carried".as_ref(),
        empty.as_os_str(),
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("-m pip install --quiet --no-index --no-deps --no-compile")
            && stdout.contains("datasets-5.2.0-py3-none-any.whl  # for datasets"),
        "{stdout}"
    );
    let (ok, _, stderr) = gpu_check(&["--mlrb".as_ref(), tmp.path().join("absent").as_os_str()]);
    assert!(!ok && stderr.contains("absent: not an executable"), "{stderr}");
}
