//! Shared test helpers: building the guest agents from source, running the
//! real `mlrb` binary, and reading what an episode left on disk.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

pub mod chromium;
pub mod cluster;
pub mod floods;
pub mod gpu;
pub mod human;
pub mod llm_server;
pub mod pty;
pub mod service;
pub mod slurm;
pub mod viewer;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// cargo's target directory, found from this test binary's own path
/// (`<target>/debug/deps/<test>`), so CARGO_TARGET_DIR is honoured.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

/// Builds the baseline, hostile and probe agents once per test process
/// (a no-op when they are up to date).
pub fn build_guests() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let builds: [&[&str]; 8] = [
            &["-p", "baseline"],
            &["-p", "research-agent"],
            &["-p", "search-agent"],
            &["-p", "hostile-agents", "--examples"],
            &["-p", "probe-agents", "--examples"],
            &["-p", "other-world"],
            &["-p", "legacy-agent"],
            &["-p", "http-probe"],
        ];
        let build = |target: &Path, selection: &[&str]| {
            let status = Command::new(&cargo)
                .current_dir(workspace_root())
                .env("CARGO_TARGET_DIR", target)
                .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2"])
                .args(selection)
                .status()
                .expect("running cargo to build the guest agents");
            assert!(status.success(), "building the guest agents {selection:?} failed");
        };
        for selection in builds {
            build(&target_dir(), selection);
        }
        // The research agent with MLAgentBench's prompt, built in a target
        // folder of its own: built in the shared one, it would replace
        // research_agent.wasm while other test processes run it. Put in
        // place by a rename, so no test reads a half-copied file.
        let prompt_target = target_dir().join("prompt-method");
        build(&prompt_target, &["-p", "research-agent", "--features", "prompt-method"]);
        let release = target_dir().join("wasm32-wasip2/release");
        let staging = release.join(format!("research_agent_prompt.{}.wasm", std::process::id()));
        std::fs::copy(
            prompt_target.join("wasm32-wasip2/release/research_agent.wasm"),
            &staging,
        )
        .unwrap();
        std::fs::rename(&staging, release.join("research_agent_prompt.wasm")).unwrap();
    });
}

/// A built agent: `baseline`, `research-agent`, `search-agent`, `other-world`,
/// `legacy-agent`, `http-probe` or the name of an example agent.
pub fn agent(name: &str) -> PathBuf {
    build_guests();
    let release = target_dir().join("wasm32-wasip2/release");
    let path = if ["baseline", "other-world"].contains(&name) {
        release.join(format!("{name}.wasm"))
    } else if [
        "research-agent",
        "research-agent-prompt",
        "search-agent",
        "legacy-agent",
        "http-probe",
    ]
    .contains(&name)
    {
        release.join(format!("{}.wasm", name.replace('-', "_")))
    } else {
        release.join("examples").join(format!("{name}.wasm"))
    };
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// An agent built with `mlrb agent build` from a project folder of the
/// repository (`plugins/baseline-py`, `tests/agents/hostile-py` with an
/// entry module, `sdk/c/baseline`), once: rebuilt only when a source file,
/// the SDK or the mlrb binary is newer than the built component.
pub fn built_agent(project: &str, entry: Option<&str>) -> PathBuf {
    let dir = workspace_root().join(project);
    let name = format!(
        "{}{}",
        project.replace('/', "_"),
        entry.map(|e| format!("-{e}")).unwrap_or_default()
    );
    let output = target_dir().join("mlrb-built-agents").join(format!("{name}.wasm"));
    let sources = [
        dir.clone(),
        workspace_root().join("sdk"),
        PathBuf::from(env!("CARGO_BIN_EXE_mlrb")),
    ];
    let newest_source = sources
        .iter()
        .flat_map(|root| walk_files(root))
        .filter_map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .max()
        .unwrap();
    let is_fresh = || {
        let built_at = std::fs::metadata(&output).and_then(|m| m.modified()).ok();
        built_at.is_some_and(|t| t > newest_source)
    };
    if is_fresh() {
        return output;
    }
    std::fs::create_dir_all(output.parent().unwrap()).unwrap();
    // One build per agent: a test that wants it while another test process
    // builds it waits for that build (a Python build is a minute of CPU).
    let lock = std::fs::File::create(output.with_extension("lock")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    if is_fresh() {
        return output;
    }
    // Built under a temporary name and renamed: no test reads a half-written file.
    let staging = output.with_extension(format!("{}.wasm", std::process::id()));
    let mut command = mlrb();
    command.args(["agent", "build"]).arg(&dir).arg("-o").arg(&staging);
    if let Some(entry) = entry {
        command.args(["--entry", entry]);
    }
    let built = command.output().unwrap();
    assert!(
        built.status.success(),
        "mlrb agent build {project} {entry:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    std::fs::rename(&staging, &output).unwrap();
    output
}

fn walk_files(root: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| e.file_name() != "__pycache__" && e.file_name() != "target")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file() && e.path().extension().is_none_or(|x| x != "wasm"))
        .map(|e| e.into_path())
        .collect()
}

pub fn cache_dir() -> PathBuf {
    target_dir().join("mlrb-test-cache")
}

pub fn mlrb() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mlrb"));
    command
        .env("MLRB_CACHE_DIR", cache_dir())
        .env("MLRB_TASKS_DIR", workspace_root().join("tasks"))
        .env_remove("MLRB_LOG");
    command
}

/// The venv of the torch image's wheels that `scripts/setup.sh --with
/// torch` makes (`MLRB_TORCH_PYTHON` names another); `None` (the test says
/// it is skipped) where there is none outside CI, which needs it.
pub fn torch_venv() -> Option<PathBuf> {
    let venv = std::env::var_os("MLRB_TORCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| mlrb::paths::tools_dir().join("torch"));
    if venv.join("bin/python3").is_file() {
        return Some(venv);
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !ci,
        "CI needs the torch venv at {}: scripts/setup.sh --with torch",
        venv.display()
    );
    eprintln!(
        "SKIPPED: no torch venv at {} (scripts/setup.sh --with torch)",
        venv.display()
    );
    None
}

pub struct Finished {
    pub output: Output,
    pub json: Value,
    pub dir: PathBuf,
}

impl Finished {
    pub fn end_reason(&self) -> &str {
        self.json["episode"]["end"]["reason"].as_str().unwrap_or("")
    }
    pub fn answer(&self) -> String {
        self.json["episode"]["end"]["answer"].as_str().unwrap_or("").to_string()
    }
    pub fn events(&self) -> Vec<Value> {
        read_events(&self.dir)
    }
}

/// `mlrb run --run-name t --agent <agent> --task <task> --out <out> <extra>`,
/// ready to be run.
pub fn run_command(agent_path: &Path, task: &str, out: &Path, extra: &[&str]) -> Command {
    let mut command = mlrb();
    command
        .args(["run", "--run-name", "t", "--agent"])
        .arg(agent_path)
        .args(["--task", task, "--out"])
        .arg(out)
        .args(extra);
    command
}

/// Runs `mlrb run --json` and parses what it printed; panics with stderr on failure.
pub fn run_episode(agent_path: &Path, task: &str, out: &Path, extra: &[&str]) -> Finished {
    let mut extra = extra.to_vec();
    extra.push("--json");
    finish(run_command(agent_path, task, out, &extra))
}

/// Runs a prepared `mlrb run ... --json` and parses what it printed;
/// panics with stderr on failure.
pub fn finish(mut command: Command) -> Finished {
    finished(command.output().unwrap())
}

/// What a finished `mlrb run ... --json` printed, parsed; panics with
/// stderr on failure.
pub fn finished(output: Output) -> Finished {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "mlrb run failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    let dir = PathBuf::from(json["dir"].as_str().unwrap());
    Finished { output, json, dir }
}

pub fn read_events(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs `agent` on a fresh copy of the hostile fixture task (with extra env
/// files); the temp dir holds the task and, under `runs/`, the episode.
pub fn run_on_hostile_task(
    agent: &str,
    extra_env: &[(&str, &str)],
    extra_args: &[&str],
) -> (tempfile::TempDir, Finished) {
    run_on_hostile_task_with(&self::agent(agent), extra_env, extra_args)
}

/// [`run_on_hostile_task`] for an agent given by its path.
pub fn run_on_hostile_task_with(
    agent: &Path,
    extra_env: &[(&str, &str)],
    extra_args: &[&str],
) -> (tempfile::TempDir, Finished) {
    let tmp = tempfile::tempdir().unwrap();
    let task = hostile_task(tmp.path(), extra_env);
    let finished = run_episode(agent, task.to_str().unwrap(), &tmp.path().join("runs"), extra_args);
    (tmp, finished)
}

impl Finished {
    /// The results of the episode's execute-script calls, in order.
    pub fn script_results(&self) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["function"] == "execute-script")
            .map(|e| e["result"]["ok"].clone())
            .collect()
    }
}

/// Changes a line of a copied task's `task.toml` (e.g. to add a resource
/// under `[resources]`).
pub fn edit_task_toml(task: &Path, from: &str, to: &str) {
    let path = task.join("task.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{}: no `{from}`", path.display());
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// A copy of the hostile fixture task in `dir`, with extra env files.
pub fn hostile_task(dir: &Path, extra_env: &[(&str, &str)]) -> PathBuf {
    let source = workspace_root().join("tests/fixtures/tasks/hostile");
    let dest = dir.join("hostile-task");
    copy_dir(&source, &dest);
    for (name, content) in extra_env {
        std::fs::write(dest.join("env").join(name), content).unwrap();
    }
    dest
}

/// `mlrb bench --quiet` of the built `agents` on `task` with two seeds,
/// two at a time, as the run `r` in `out`.
pub fn two_seed_bench(out: &Path, agents: &[&str], task: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = mlrb();
    command
        .args([
            "bench",
            "--quiet",
            "--run-name",
            "r",
            "--seeds",
            "2",
            "-j",
            "2",
            "--out",
        ])
        .arg(out);
    for name in agents {
        command.arg("--agent").arg(agent(name));
    }
    command.arg("--task").arg(task);
    command
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The hidden token the hostile fixture's prepare step writes.
pub fn hidden_token() -> String {
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(b"mlrb hostile fixture"));
    format!("SECRET-{}", &digest[..24])
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            std::fs::read(e.path())
                .map(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
                .unwrap_or(false)
        })
        .map(|e| e.path().to_path_buf())
        .collect()
}

/// The parent of process `pid`; none once it is gone.
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's closing parenthesis: state, ppid.
    stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
}

/// The pids of processes at most `depth` generations below `ancestor` whose
/// command line (its arguments, split) `matches`.
pub fn processes_under(ancestor: u32, depth: usize, matches: impl Fn(&[&[u8]]) -> bool) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            matches(&args)
        })
        .filter(|&pid| {
            let mut current = pid;
            for _ in 0..depth {
                match parent_of(current) {
                    Some(p) if p == ancestor => return true,
                    Some(p) if p > 1 => current = p,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// Fails if any process whose command line contains `pattern` is running:
/// what a sandbox left behind.
pub fn assert_no_process(pattern: &str) {
    let survivors = Command::new("pgrep").args(["-f", pattern]).output().unwrap();
    assert!(
        survivors.stdout.is_empty(),
        "left running: {}",
        String::from_utf8_lossy(&survivors.stdout)
    );
}

/// Builds the Docker sandbox's image once; false (test skipped) only when no
/// Docker engine is reachable outside CI. In CI, Docker is required.
pub fn docker_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let output = mlrb().args(["image", "build"]).output().unwrap();
        if output.status.success() {
            return true;
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        if stderr.contains("cannot be reached") && !ci {
            eprintln!("SKIPPED: no Docker engine here ({})", stderr.trim());
            return false;
        }
        panic!("mlrb image build failed: {stderr}");
    })
}

/// `mlrb tasks test --json` with `args` (options, then tasks or folders):
/// its exit status and its reports.
pub fn tasks_test<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (bool, Vec<Value>) {
    let output = mlrb().args(["tasks", "test", "--json"]).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let reports: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.success(), reports.as_array().unwrap().clone())
}

/// The details of a `tasks test` report's findings of `check` with `status`.
pub fn findings<'a>(report: &'a Value, check: &str, status: &str) -> Vec<&'a str> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check && f["status"] == status)
        .filter_map(|f| f["detail"].as_str())
        .collect()
}
