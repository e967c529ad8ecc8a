//! The Docker sandbox against the real engine: the same scores as the local
//! sandbox, scripts contained, and no container left behind however the
//! host ends. Without an engine these tests fail under CI=true and are
//! skipped (visibly) elsewhere.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Names of the containers mlrb made for episodes under `dir`.
fn containers_for(dir: &Path) -> Vec<String> {
    containers_matching(dir, false)
}

/// Names of the containers mlrb made for episodes under `dir` that are
/// still running.
fn running_containers_for(dir: &Path) -> Vec<String> {
    containers_matching(dir, true)
}

fn containers_matching(dir: &Path, running: bool) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (docker, _) = mlrb::sandbox::docker::connect().await.unwrap();
        let mut filters = HashMap::from([(
            "label".to_string(),
            vec![format!("{}=1", mlrb::sandbox::docker::LABEL_MANAGED)],
        )]);
        if running {
            filters.insert("status".to_string(), vec!["running".to_string()]);
        }
        let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&filters)
            .build();
        docker
            .list_containers(Some(options))
            .await
            .unwrap()
            .into_iter()
            .filter(|c| {
                c.labels
                    .as_ref()
                    .and_then(|l| l.get(mlrb::sandbox::docker::LABEL_EPISODE))
                    .is_some_and(|e| e.starts_with(&*dir.to_string_lossy()))
            })
            .map(|c| c.names.unwrap_or_default().join(","))
            .collect()
    })
}

fn score(finished: &common::Finished) -> serde_json::Value {
    finished.json["score"]["score"].clone()
}

#[test]
fn the_baseline_scores_the_same_in_docker_as_locally() {
    if !common::docker_ready() {
        return;
    }
    for task in ["digits", "house-prices"] {
        let tmp = tempfile::tempdir().unwrap();
        let local = common::run_episode(&common::agent("baseline"), task, &tmp.path().join("local"), &[]);
        let docker = common::run_episode(
            &common::agent("baseline"),
            task,
            &tmp.path().join("docker"),
            &["--sandbox", "docker"],
        );
        assert_eq!(docker.end_reason(), "completed");
        assert!(score(&docker).is_number(), "{}", docker.json);
        assert_eq!(score(&docker), score(&local), "{task}: docker and local disagree");
        assert!(
            docker.json["episode"]["host"]["sandbox"]
                .as_str()
                .unwrap()
                .starts_with("docker")
        );
        assert!(containers_for(tmp.path()).is_empty());
    }
}

/// Runs a hostile agent in Docker and returns its answer and script results.
fn attack(agent: &str, extra_env: &[(&str, &str)]) -> (tempfile::TempDir, String, Vec<serde_json::Value>) {
    let (tmp, finished) = common::run_on_hostile_task(agent, extra_env, &["--sandbox", "docker"]);
    let results = finished.script_results();
    assert!(
        common::files_containing(tmp.path(), &common::hidden_token()).is_empty(),
        "the hidden answer leaked"
    );
    assert!(containers_for(tmp.path()).is_empty(), "a container was left");
    (tmp, finished.answer(), results)
}

#[test]
fn scripts_in_a_container_see_no_network_no_host_files_no_answers() {
    if !common::docker_ready() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let (_tmp, answer, _) = attack("network", &[("port.txt", &port)]);
    assert!(
        answer.contains("no 127.0.0.1") && answer.contains("no internet") && answer.contains("no dns"),
        "{answer}"
    );
    assert!(listener.accept().is_err());

    let (_tmp, answer, _) = attack("read_hidden", &[]);
    assert!(answer.contains("found: nothing"), "{answer}");

    let (tmp, answer, _) = attack("read_only_spelling", &[]);
    assert!(!answer.contains("ESCAPED"), "{answer}");
    let original =
        std::fs::read(common::workspace_root().join("tests/fixtures/tasks/hostile/env/data/train.csv")).unwrap();
    assert_eq!(
        std::fs::read(
            tmp.path()
                .join("runs/t/hostile/read_only_spelling/0/workspace/data/train.csv")
        )
        .unwrap(),
        original
    );
}

#[test]
fn a_memory_bomb_in_a_container_ends_out_of_memory() {
    if !common::docker_ready() {
        return;
    }
    let (_tmp, _, results) = attack("script_memory_bomb", &[]);
    assert_eq!(results[0]["termination"], "out-of-memory", "{}", results[0]);
}

#[test]
fn a_sleeping_script_in_a_container_ends_at_its_timeout() {
    if !common::docker_ready() {
        return;
    }
    let (_tmp, _, results) = attack("script_timeout", &[]);
    assert_eq!(results[0]["termination"], "timed-out", "{}", results[0]);
    let ms = results[0]["duration_ms"].as_u64().unwrap();
    assert!((2_000..10_000).contains(&ms), "{ms} ms");
}

#[test]
fn a_fork_bomb_in_a_container_is_contained() {
    if !common::docker_ready() {
        return;
    }
    let (_tmp, answer, results) = attack("script_fork_bomb", &[]);
    assert_eq!(results[0]["termination"], "timed-out", "{}", results[0]);
    assert!(answer.contains("after: Ok("), "{answer}");
}

fn start_looping_agent(out: &Path, task: &Path) -> std::process::Child {
    common::run_command(
        &common::agent("infinite_loop"),
        task.to_str().unwrap(),
        out,
        &["--sandbox", "docker"],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap()
}

/// Waits until the episode's container exists.
fn wait_for_container(dir: &Path) {
    let started = Instant::now();
    while containers_for(dir).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(60), "no container appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn no_container_is_left_after_ctrl_c_or_after_gc_of_a_killed_host() {
    if !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);

    // Ctrl-C: the host removes its container itself.
    let out = tmp.path().join("interrupted");
    let mut child = start_looping_agent(&out, &task);
    wait_for_container(&out);
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(
        containers_for(&out).is_empty(),
        "left after Ctrl-C: {:?}",
        containers_for(&out)
    );

    // SIGKILL: nothing can end the container from the host, but its
    // lifeline closes with the host and it stops by itself within seconds
    // (the next host, or `mlrb gc`, removes it).
    let out = tmp.path().join("killed");
    let mut child = start_looping_agent(&out, &task);
    wait_for_container(&out);
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    while !running_containers_for(&out).is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "still running 10 s after its host was killed: {:?}",
            running_containers_for(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("the killed host's container stopped {:?} after it", killed.elapsed());
    // The stopped container is kept for `mlrb gc`, unless a Docker sandbox
    // another test opened meanwhile swept it first, as every new one sweeps
    // what dead hosts left: either way nothing may be left after gc.
    let kept = !containers_for(&out).is_empty();
    let gc = common::mlrb().arg("gc").output().unwrap();
    assert!(gc.status.success(), "{}", String::from_utf8_lossy(&gc.stderr));
    match kept {
        true => assert!(String::from_utf8_lossy(&gc.stdout).contains("removed")),
        false => eprintln!("another host's sweep removed the stopped container before gc"),
    }
    assert!(
        containers_for(&out).is_empty(),
        "left after gc: {:?}",
        containers_for(&out)
    );
}

#[test]
fn an_unreachable_daemon_is_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let output = common::run_command(
        &common::agent("baseline"),
        "digits",
        &tmp.path().join("runs"),
        &["--sandbox", "docker"],
    )
    .env("DOCKER_HOST", format!("unix://{}/no-docker.sock", tmp.path().display()))
    .output()
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("Docker daemon cannot be reached") && stderr.contains("--sandbox local"),
        "{stderr}"
    );
}

#[test]
fn a_gpu_task_without_a_gpu_pool_is_refused_before_anything_starts() {
    if !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let text = std::fs::read_to_string(task.join("task.toml"))
        .unwrap()
        .replace("pids = 64", "pids = 64\ngpus = 2");
    std::fs::write(task.join("task.toml"), text).unwrap();
    let output = common::run_command(
        &common::agent("baseline"),
        task.to_str().unwrap(),
        &tmp.path().join("runs"),
        &["--sandbox", "docker", "--gpus", "0"],
    )
    .output()
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("needs 2 GPU(s)") && stderr.contains("--gpus 0"),
        "{stderr}"
    );
    assert!(!tmp.path().join("runs").exists());
    assert!(containers_for(tmp.path()).is_empty());
}

#[test]
fn an_unchanged_recipe_is_not_rebuilt_and_a_missing_image_names_the_command() {
    if !common::docker_ready() {
        return;
    }
    let again = common::mlrb().args(["image", "build"]).output().unwrap();
    assert!(again.status.success());
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        stdout.contains("mlrb-runtime:") && stdout.contains("is up to date"),
        "{stdout}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let output = common::mlrb()
        .args([
            "run",
            "--sandbox",
            "docker",
            "--image",
            "mlrb-runtime:no-such-recipe",
            "--agent",
        ])
        .arg(common::agent("baseline"))
        .args(["--task", "digits", "--out"])
        .arg(tmp.path().join("runs"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("mlrb-runtime:no-such-recipe") && stderr.contains("mlrb image build"),
        "{stderr}"
    );
}

#[test]
fn a_trap_or_the_deadline_in_docker_leaves_no_container() {
    if !common::docker_ready() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let task = common::hostile_task(tmp.path(), &[]);
    let trapped = common::run_episode(
        &common::agent("agent_panics"),
        task.to_str().unwrap(),
        tmp.path(),
        &["--sandbox", "docker"],
    );
    assert_eq!(trapped.end_reason(), "trap");
    let timed_out = common::run_episode(
        &common::agent("script_past_deadline"),
        task.to_str().unwrap(),
        tmp.path(),
        &["--sandbox", "docker", "--wall-seconds", "4"],
    );
    assert_eq!(timed_out.end_reason(), "timeout");
    assert!(
        containers_for(tmp.path()).is_empty(),
        "{:?}",
        containers_for(tmp.path())
    );
    common::assert_no_process("sleep 2000");
}

#[test]
fn a_panic_while_an_episode_container_is_open_still_removes_it() {
    if !common::docker_ready() {
        return;
    }
    use mlrb::sandbox::{EpisodeSetup, Mount, Sandbox};
    let tmp = tempfile::tempdir().unwrap();
    let workspace = tmp.path().join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    let setup = EpisodeSetup {
        name: tmp.path().join("episode").display().to_string(),
        mounts: vec![Mount::writable(&workspace, "/workspace")],
        cwd: "/workspace".into(),
        network: mlrb::sandbox::Reach::Nothing,
        limits: mlrb::sandbox::CommandLimits {
            memory_bytes: 256 << 20,
            max_processes: 32,
            cpus: 1.0,
            max_file_bytes: 1 << 30,
            ..mlrb::sandbox::CommandLimits::new(&mlrb::limits::Limits::default(), std::time::Duration::from_secs(600))
        },
        gpus: vec![],
        lifetime: std::time::Duration::from_secs(3600),
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let episode = runtime.block_on(async {
        let sandbox =
            mlrb::sandbox::docker::DockerSandbox::connect(&mlrb::sandbox::image::ImageRecipe::standard(false).tag())
                .await
                .unwrap();
        sandbox.open_episode(setup).await.unwrap()
    });
    assert_eq!(containers_for(tmp.path()).len(), 1);
    // The host panics with the container open: unwinding drops it unclosed.
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _held = episode;
        panic!("host bug");
    }));
    assert!(unwound.is_err());
    assert!(
        containers_for(tmp.path()).is_empty(),
        "{:?}",
        containers_for(tmp.path())
    );
}

#[test]
fn a_script_flooding_its_output_in_a_container_is_cut_and_stopped() {
    if !common::docker_ready() {
        return;
    }
    let (_tmp, _, results) = attack("script_output_flood", &[]);
    assert_eq!(results[0]["termination"], "killed", "{}", results[0]);
    assert_eq!(results[0]["stdout_truncated"], true);
    assert!(results[0]["stdout"].as_str().unwrap().len() <= (64 << 10));
}
