//! Scoring a workspace with the task's hidden evaluator, in a fresh sandbox
//! that is the only place the hidden files are mounted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{Layout, Task, pylib};
use crate::sandbox::{self, Mount, Sandbox};

/// What the evaluator said of a workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Evaluation {
    /// The score, when the submission is valid.
    pub score: Option<f64>,
    /// Whether the evaluator accepted the submission.
    pub valid: bool,
    /// Why the submission is not valid, or why evaluation failed.
    pub error: Option<String>,
    /// True when the evaluator itself failed (a task or host problem, not the agent's).
    pub evaluator_failed: bool,
    /// How long the evaluation took, in milliseconds.
    pub duration_ms: u64,
}

/// One evaluation to run.
pub struct EvalRequest<'a> {
    /// The workspace to score; mounted read-only. It must not hold symbolic
    /// links that leave it (see `snapshot::materialize_contained`).
    pub workspace: &'a Path,
    /// The hidden side of the prepared data.
    pub hidden: &'a Path,
    /// The mlrb cache folder, which holds the Python helpers.
    pub cache_dir: &'a Path,
    /// Where the evaluator's stdout and stderr are kept.
    pub log_prefix: Option<PathBuf>,
    /// GPUs the evaluator may use (those of the episode).
    pub gpus: Vec<String>,
    /// A tighter limit than the task's, e.g. the episode's remaining time.
    pub timeout: Option<Duration>,
}

#[derive(Deserialize)]
struct EvalLine {
    score: Option<f64>,
    #[serde(default)]
    error: Option<String>,
}

/// The evaluator's command for the task's layout.
fn command(task: &Task, request: &EvalRequest<'_>) -> Result<sandbox::Command> {
    let (lib_mount, lib_env) = pylib::mount(request.cache_dir)?;
    let (argv, mounts) = match task.layout {
        Layout::Native => (
            vec![
                "python3".into(),
                "/task/scripts/eval.py".into(),
                "/workspace".into(),
                "/hidden".into(),
            ],
            vec![
                Mount::read_only(task.scripts_dir(), "/task/scripts"),
                Mount::read_only(request.workspace, "/workspace"),
                Mount::read_only(request.hidden, "/hidden"),
            ],
        ),
        // The prepared scripts folder (answers included) with the workspace
        // beside it at ../env, as MLAgentBench's eval.py expects.
        Layout::MlAgentBench => (
            vec![
                "python3".into(),
                pylib::MLAGENTBENCH_ADAPTER.into(),
                "/task/scripts/eval.py".into(),
                "/task/env".into(),
            ],
            vec![
                Mount::read_only(request.hidden, "/task/scripts"),
                Mount::read_only(request.workspace, "/task/env"),
            ],
        ),
    };
    let task_timeout = Duration::from_secs(task.spec.resources.script_timeout_seconds.max(60));
    let timeout = request.timeout.map_or(task_timeout, |t| t.min(task_timeout));
    Ok(sandbox::Command {
        argv,
        cwd: "/task/scripts".into(),
        mounts: mounts.into_iter().chain([lib_mount]).collect(),
        env: vec![lib_env],
        network: false,
        limits: task.task_script_limits(timeout),
        gpus: request.gpus.clone(),
        log_prefix: request.log_prefix.clone(),
        stop: Default::default(),
    })
}

/// Scores `request.workspace` with the task's hidden evaluator.
pub async fn evaluate(task: &Task, sandbox: &dyn Sandbox, request: EvalRequest<'_>) -> Result<Evaluation> {
    let outcome = sandbox.run(command(task, &request)?).await?;
    let duration_ms = outcome.duration.as_millis() as u64;
    let failed = |error: String| Evaluation {
        score: None,
        valid: false,
        error: Some(error),
        evaluator_failed: true,
        duration_ms,
    };
    if !outcome.success() {
        let last = outcome.stderr.text.trim().lines().last().unwrap_or("").to_string();
        return Ok(failed(format!("evaluator failed ({}): {last}", outcome.describe())));
    }
    let Some(line) = outcome.stdout.text.lines().rev().find(|l| !l.trim().is_empty()) else {
        return Ok(failed(
            "evaluator printed nothing; it must print a JSON line with `score`".into(),
        ));
    };
    let parsed: EvalLine = match serde_json::from_str(line.trim()) {
        Ok(parsed) => parsed,
        Err(e) => {
            return Ok(failed(format!(
                "evaluator's last line is not JSON with `score` ({e}): {line}"
            )));
        }
    };
    Ok(match parsed.score.filter(|s| s.is_finite()) {
        Some(score) => Evaluation {
            score: Some(score),
            valid: true,
            error: None,
            evaluator_failed: false,
            duration_ms,
        },
        None => Evaluation {
            score: None,
            valid: false,
            error: Some(parsed.error.unwrap_or_else(|| "invalid submission".into())),
            evaluator_failed: false,
            duration_ms,
        },
    })
}
