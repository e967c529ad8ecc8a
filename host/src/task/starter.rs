//! The task's starter code run in a workspace as the task's own scripts
//! run, and what the checks do with it: run it, then score what it left.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::Task;
use crate::sandbox::{self, Mount, Sandbox};

/// Runs the starter code, `python3 train.py`, in the workspace `dir`, as
/// the task's own scripts run (its resources, its network grant, the GPUs
/// `gpus`). In the smoke profile: with the task's `[smoke]` arguments, or
/// its submission script instead.
pub async fn run_starter(task: &Task, sandbox: &dyn Sandbox, dir: &Path, gpus: &[String]) -> Result<sandbox::Outcome> {
    let mut argv = vec!["python3".to_string(), "train.py".to_string()];
    let (mut mounts, mut env) = (Vec::new(), Vec::new());
    if let (Some(stand_in), Some(spec)) = (task.hub.as_ref().filter(|h| h.stand_in), &task.spec.smoke) {
        match &spec.submission {
            Some(script) => {
                let script = task.scripts_dir().join(script);
                let name = script.file_name().unwrap_or_default().to_string_lossy();
                argv[1] = format!("{SMOKE_SCRIPT_DIR}/{name}");
                mounts.push(Mount::read_only(script.parent().unwrap_or(dir), SMOKE_SCRIPT_DIR));
                let (lib_mount, lib_env) = stand_in.helpers();
                mounts.push(lib_mount);
                env.push(lib_env);
            }
            None => argv.extend(spec.starter_args.iter().cloned()),
        }
    }
    run_in_workspace(task, sandbox, dir, (argv, mounts, env, gpus), "train").await
}

/// Where a smoke submission script's folder is mounted.
const SMOKE_SCRIPT_DIR: &str = "/mlrb/smoke";

/// A script run in the workspace: its argv, the mounts and environment it
/// gets besides the workspace's, and its GPUs.
pub type Script<'a> = (Vec<String>, Vec<Mount>, Vec<(String, String)>, &'a [String]);

/// Runs `script` in the workspace `dir`, as the task's own scripts run;
/// its output logged beside `dir` as `label`.
pub async fn run_in_workspace(
    task: &Task,
    sandbox: &dyn Sandbox,
    dir: &Path,
    (argv, mounts, env, gpus): Script<'_>,
    label: &str,
) -> Result<sandbox::Outcome> {
    let resources = &task.spec.resources;
    let (reach, _gateway) = task.reach(false)?;
    sandbox
        .run(task.in_profile(sandbox::Command {
            argv,
            cwd: "/workspace".into(),
            mounts: [Mount::writable(dir, "/workspace")].into_iter().chain(mounts).collect(),
            env,
            network: reach,
            limits: task.task_script_limits(Duration::from_secs(resources.script_timeout_seconds)),
            gpus: gpus.to_vec(),
            log_prefix: Some(log_prefix(dir, label)),
            stop: Default::default(),
            meter: Default::default(),
        }))
        .await
}

/// Where the logs of step `label` of the work in `dir` go: beside it, as
/// `<dir>-<label>.stdout` and `.stderr`, so that a workspace's steps (its
/// training, its evaluation) keep a log each.
pub fn log_prefix(dir: &Path, label: &str) -> std::path::PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(format!("-{label}"));
    dir.with_file_name(name)
}

/// Why the starter code failed, in one line.
pub fn starter_failure(outcome: &sandbox::Outcome) -> String {
    format!(
        "train.py failed ({}): {}",
        outcome.describe(),
        super::failure::failure_cause(&outcome.stderr.text)
    )
}

/// A scratch folder for a check of `task` that runs its scripts, under
/// `<cache>/task-test/`, named `<task>-<label>…`; removed when dropped.
pub fn scratch(task: &Task, cache_dir: &Path, label: &str) -> Result<tempfile::TempDir> {
    let base = cache_dir.join("task-test");
    std::fs::create_dir_all(&base)?;
    Ok(tempfile::Builder::new()
        .prefix(&format!("{}-{label}", task.spec.name))
        .tempdir_in(&base)?)
}

/// What running the starter in a workspace and scoring it gave.
pub enum StarterScored {
    /// The starter failed: why, in one line.
    Failed(String),
    /// The evaluator's verdict on what it left.
    Scored(super::Evaluation),
}

/// Runs the starter in `dir` (when there is a `train.py`: a folder without
/// one is scored as it is), then scores the workspace as a final
/// submission; `step` hears "the starter" and "evaluating" as they start.
pub async fn run_and_score(
    task: &Task,
    sandbox: &dyn Sandbox,
    dir: &Path,
    (prepared, cache_dir): (&super::Prepared, &Path),
    step: &(dyn Fn(&str) + Sync),
) -> Result<StarterScored> {
    if dir.join("train.py").is_file() {
        step("the starter");
        let outcome = run_starter(task, sandbox, dir, &[]).await?;
        if !outcome.success() {
            return Ok(StarterScored::Failed(starter_failure(&outcome)));
        }
    }
    step("evaluating");
    let request = super::EvalRequest::final_of(task, dir, prepared, cache_dir);
    Ok(StarterScored::Scored(super::evaluate(task, sandbox, request).await?))
}
