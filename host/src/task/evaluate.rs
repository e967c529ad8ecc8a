//! Scoring a workspace with the task's hidden evaluator, in a fresh sandbox
//! that is the only place the hidden files are mounted.
//!
//! The evaluator never runs the agent's code: the agent's files reach it as
//! data only. A native evaluator gets the workspace as a folder of files
//! (not on its import path); an MLAgentBench evaluator, which imports
//! modules from `../env` (its metric may live in the starter `train.py`),
//! gets the task's pristine prepared `env/` there and the agent's files in
//! a folder of their own, handed to `get_score` as the submission folder.
//! The result comes back through a file in a folder only the evaluator's
//! sandbox can write, never through output an agent's process could forge.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::failure::failure_cause;
use super::spec::SubmissionUse;
use super::split::Part;
use super::{Layout, Prepared, Task, pylib, submission};
use crate::sandbox::{self, Mount, Outcome, Sandbox};

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
    /// What the agent may be told of an invalid submission: a sentence of
    /// a fixed vocabulary (`feedback`), never the evaluator's own words.
    #[serde(default)]
    pub told: String,
    /// The kind of fault the evaluator named, when it is one of the
    /// vocabulary's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The score on each fold of the answers, when they were asked for
    /// (`MLRB_FOLDS`, to measure the metric's standard error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folds: Option<Vec<f64>>,
    /// The rounds a timed score was measured in (see [`Spread`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    /// Figures the evaluator keeps beside the score (`{name: number}`,
    /// such as a timed task's median seconds): shown, never judged.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub measures: BTreeMap<String, f64>,
}

/// How uncertain a score measured in rounds (a speed) is: the lowest and
/// highest value its rounds allow (for `mlrb_eval.cpu_ratio`, the ratio
/// with each side's second-quickest run in place of its quickest), which
/// hold the score, and how many rounds there were. `mlrb verify` allows a
/// re-scoring what the two spread over.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The lowest round.
    pub low: f64,
    /// The highest round.
    pub high: f64,
    /// How many rounds there were.
    pub rounds: u32,
}

impl Spread {
    /// Why this spread cannot be the one of `score`, if it cannot.
    pub fn fault(&self, score: f64) -> Option<String> {
        if !(self.low.is_finite() && self.high.is_finite()) || self.rounds == 0 {
            return Some(format!(
                "spread of {} rounds from {} to {} is not one",
                self.rounds, self.low, self.high
            ));
        }
        let inside = self.low <= score && score <= self.high;
        (!inside).then(|| format!("score {score} lies outside its rounds ({} to {})", self.low, self.high))
    }

    /// Half the width of the rounds.
    pub fn half_width(&self) -> f64 {
        (self.high - self.low) / 2.0
    }

    /// How far a re-scoring `b`, measured in rounds `again`, may land from
    /// a score measured in these: the wider half-spread of the two, these
    /// trusted up to twice `again`'s (a spread edited wider buys nothing),
    /// plus [`SPREAD_FLOOR`] of `b`, for rounds that happened to agree
    /// closely; never more than [`SPREAD_CEILING`] of `b`.
    pub fn allows(&self, again: Spread, b: f64) -> f64 {
        let trusted = self.half_width().min(2.0 * again.half_width());
        let allowed = trusted.max(again.half_width()) + SPREAD_FLOOR * b.abs();
        allowed.min(SPREAD_CEILING * b.abs())
    }

    /// Why a re-scoring `b` measured in these rounds is too uncertain to
    /// check a timing by, if it is: a half-spread over [`SPREAD_CEILING`]
    /// of `b` could not tell the score from one edited twice as good.
    pub fn too_noisy(&self, b: f64) -> Option<String> {
        (self.half_width() > SPREAD_CEILING * b.abs()).then(|| {
            format!(
                "re-scoring was too noisy to check a timing: its rounds leave {b} anywhere from {} to {} (more than ±{:.0} %); verify again on a quieter machine",
                self.low,
                self.high,
                SPREAD_CEILING * 100.0
            )
        })
    }
}

/// The part of a re-scored timing it may always differ by: what one
/// evaluation's quickest runs say of the next one's leaves out what stays
/// the same through an evaluation and changes between two (the same
/// unmodified train.py: 0.92-1.05 over four evaluations, each with its
/// second-quickest runs within 4 %; `scripts/measure_timing_load.py`).
pub const SPREAD_FLOOR: f64 = 0.15;

/// The most of a re-scored timing it may differ by, however its rounds
/// spread: a score edited 3 times better is never allowed.
pub const SPREAD_CEILING: f64 = 0.5;

/// The most measures an evaluator may keep beside its score.
const MAX_MEASURES: usize = 16;

/// One evaluation to run.
pub struct EvalRequest<'a> {
    /// The workspace to score; mounted read-only. It must not hold symbolic
    /// links that leave it (see `snapshot::materialize_contained`).
    pub workspace: &'a Path,
    /// The task's prepared data: the hidden side, and the pristine public side.
    pub prepared: &'a Prepared,
    /// The mlrb cache folder, which holds the Python helpers.
    pub cache_dir: &'a Path,
    /// Where the evaluator's stdout and stderr are kept.
    pub log_prefix: Option<PathBuf>,
    /// GPUs the evaluator may use (those of the episode).
    pub gpus: Vec<String>,
    /// A tighter limit than the task's, e.g. the episode's remaining time.
    pub timeout: Option<Duration>,
    /// Which part of the hidden answers is scored (and alone mounted).
    pub part: Part,
}

impl<'a> EvalRequest<'a> {
    /// The final scoring of `workspace` on its own (no GPUs, the task's
    /// own time limit, the part the final score reads), its logs beside it.
    pub fn final_of(task: &Task, workspace: &'a Path, prepared: &'a Prepared, cache_dir: &'a Path) -> Self {
        Self {
            workspace,
            prepared,
            cache_dir,
            log_prefix: Some(workspace.with_extension("eval")),
            gpus: Vec::new(),
            timeout: None,
            part: task.final_part(),
        }
    }
}

/// Where, inside the evaluator's sandbox, its result file goes.
const RESULT_DIR: &str = "/mlrb/out";
/// The result file's name in [`RESULT_DIR`].
const RESULT_FILE: &str = "result.json";
/// The folder of the evaluation's scratch that is [`RESULT_DIR`].
const RESULT_DIR_NAME: &str = "result";
/// Where an MLAgentBench evaluator finds the agent's files.
const SUBMISSION_DIR: &str = "/submission";

#[derive(Deserialize)]
struct EvalLine {
    score: Option<f64>,
    #[serde(default)]
    error: Option<String>,
    /// The kind of fault (`feedback`'s vocabulary).
    #[serde(default)]
    kind: Option<String>,
    /// The score on each fold of the answers (`MLRB_FOLDS`).
    #[serde(default)]
    folds: Option<Vec<f64>>,
    /// The rounds of a timed score.
    #[serde(default)]
    spread: Option<Spread>,
    /// Figures kept beside the score.
    #[serde(default)]
    measures: BTreeMap<String, f64>,
    /// Whether the evaluator ran on the smoke profile's stand-in data.
    #[serde(default)]
    smoke: bool,
}

/// An empty folder over the task's reference solution (`scripts/reference/`):
/// the evaluator has no use for it, so it is not there to be read.
fn masked_reference(task: &Task, out: &Path) -> Result<Option<Mount>> {
    if !task.scripts_dir().join("reference").is_dir() {
        return Ok(None);
    }
    let empty = out.join("empty");
    std::fs::create_dir_all(&empty)?;
    Ok(Some(Mount::read_only(empty, "/task/scripts/reference")))
}

/// A task that asks for no GPU is scored on the CPU (mlrb_llm_eval refuses
/// one otherwise: a GPU task scored on a CPU would be timed wrong).
fn cpu_allowed(task: &Task) -> Option<(String, String)> {
    (task.spec.resources.gpus == 0).then(|| ("MLRB_EVAL_ALLOW_CPU".to_string(), "1".to_string()))
}

/// The evaluator's command for the task's layout; `out` is a scratch
/// folder of this evaluation's (its result file goes to a folder in it).
fn command(task: &Task, request: &EvalRequest<'_>, out: &Path) -> Result<sandbox::Command> {
    let (lib_mount, lib_env) = pylib::mount(request.cache_dir)?;
    let (argv, mounts) = match task.layout {
        Layout::Native => (
            vec![
                "python3".into(),
                "/task/scripts/eval.py".into(),
                "/workspace".into(),
                "/hidden".into(),
            ],
            [
                Mount::read_only(task.scripts_dir(), "/task/scripts"),
                Mount::read_only(request.workspace, "/workspace"),
                Mount::read_only(request.prepared.hidden_part(request.part), "/hidden"),
            ]
            .into_iter()
            .chain(masked_reference(task, out)?)
            .collect(),
        ),
        // The prepared scripts folder (answers included) with the pristine
        // prepared env beside it at ../env, as MLAgentBench lays them out;
        // the agent's files apart, as the submission folder.
        Layout::MlAgentBench => (
            match &task.spec.scoring.evaluator {
                // mlrb's own evaluator, where the folder's cannot be trusted.
                Some(evaluator) => vec![
                    "python3".into(),
                    format!("{}/{evaluator}", pylib::GUEST_DIR),
                    SUBMISSION_DIR.into(),
                ],
                None => vec![
                    "python3".into(),
                    pylib::MLAGENTBENCH_ADAPTER.into(),
                    "/task/scripts/eval.py".into(),
                    SUBMISSION_DIR.into(),
                ],
            },
            vec![
                Mount::read_only(&request.prepared.hidden, "/task/scripts"),
                Mount::read_only(&request.prepared.public, "/task/env"),
                Mount::read_only(request.workspace, SUBMISSION_DIR),
            ],
        ),
    };
    let task_timeout = Duration::from_secs(task.spec.resources.script_timeout_seconds.max(60));
    let timeout = request.timeout.map_or(task_timeout, |t| t.min(task_timeout));
    let result_env = ("MLRB_RESULT".to_string(), format!("{RESULT_DIR}/{RESULT_FILE}"));
    Ok(task.in_profile(sandbox::Command {
        argv,
        cwd: "/task/scripts".into(),
        mounts: mounts
            .into_iter()
            .chain([lib_mount, Mount::writable(out.join(RESULT_DIR_NAME), RESULT_DIR)])
            .collect(),
        env: [lib_env, result_env].into_iter().chain(cpu_allowed(task)).collect(),
        network: sandbox::Reach::Nothing,
        limits: task.task_script_limits(timeout),
        gpus: request.gpus.clone(),
        log_prefix: request.log_prefix.clone(),
        stop: Default::default(),
        meter: Default::default(),
    }))
}

/// Scores `request.workspace` with the task's hidden evaluator.
pub async fn evaluate(task: &Task, sandbox: &dyn Sandbox, request: EvalRequest<'_>) -> Result<Evaluation> {
    evaluate_with(task, sandbox, request, Vec::new()).await
}

/// [`evaluate`], with `env` added to the evaluator's environment.
pub async fn evaluate_with(
    task: &Task,
    sandbox: &dyn Sandbox,
    request: EvalRequest<'_>,
    env: Vec<(String, String)>,
) -> Result<Evaluation> {
    refuse_smoke_data(task, request.prepared)?;
    let out = tempfile::Builder::new()
        .prefix(".eval-out-")
        .tempdir_in(request.cache_dir)
        .with_context(|| format!("{}: cannot write", request.cache_dir.display()))?;
    std::fs::create_dir(out.path().join(RESULT_DIR_NAME))?;
    let mut command = command(task, &request, out.path())?;
    command.env.extend(env);
    let outcome = match task.spec.scoring.submission {
        SubmissionUse::Code => run_with_runner(task, sandbox, &request, command).await?,
        _ => sandbox.run(command).await?,
    };
    let duration_ms = outcome.duration.as_millis() as u64;
    let stderr_file = request.log_prefix.as_ref().map(|p| p.with_extension("stderr"));
    let judged = judge(
        task,
        &outcome,
        &result_text(&out.path().join(RESULT_DIR_NAME), &outcome),
        stderr_file.as_deref(),
    );
    Ok(Evaluation { duration_ms, ..judged })
}

/// Runs an evaluator that runs submitted code, serving its runs (each in
/// a sandbox of its own) until it ends.
async fn run_with_runner(
    task: &Task,
    sandbox: &dyn Sandbox,
    request: &EvalRequest<'_>,
    mut command: sandbox::Command,
) -> Result<Outcome> {
    let service = submission::Service::start()?;
    let (mounts, env) = service.for_evaluator();
    command.mounts.extend(mounts);
    command.env.extend(env);
    let context = submission::Runs {
        task,
        sandbox,
        workspace: request.workspace,
        gpus: request.gpus.clone(),
        log_prefix: request.log_prefix.clone(),
    };
    let serving = async {
        service.serve(&context).await;
        std::future::pending::<()>().await
    };
    tokio::select! {
        outcome = sandbox.run(command) => outcome,
        _ = serving => unreachable!("serving never ends"),
    }
}

/// Refuses to score outside the smoke profile with data the smoke profile
/// prepared (synthetic, from the stand-in hub): such a score measures nothing.
fn refuse_smoke_data(task: &Task, prepared: &super::Prepared) -> Result<()> {
    if !task.smoke() && prepared.dir.join(super::smoke::PREPARED_MARK).exists() {
        anyhow::bail!(
            "task {}: {} holds the smoke profile's stand-in data, which can never score a run; prepare the task for real",
            task.spec.name,
            prepared.dir.display()
        );
    }
    Ok(())
}

/// The evaluator's result: its result file, or else the last line it
/// printed (evaluators that do not use `mlrb_eval`).
fn result_text(out: &Path, outcome: &Outcome) -> Option<String> {
    let file = crate::record::walk::DirHandle::open_root(out)
        .and_then(|dir| dir.open_file(RESULT_FILE.as_bytes()))
        .ok();
    if let Some((file, _)) = file {
        use std::io::Read;
        let mut text = String::new();
        if file.take(64 << 10).read_to_string(&mut text).is_ok() {
            return Some(text.trim().to_string());
        }
    }
    outcome
        .stdout
        .text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

/// What an evaluation's outcome and result line mean for the score.
fn judge(task: &Task, outcome: &Outcome, line: &Option<String>, stderr_file: Option<&Path>) -> Evaluation {
    let failed = |error: String| Evaluation {
        score: None,
        valid: false,
        error: Some(error),
        evaluator_failed: true,
        duration_ms: 0,
        told: super::feedback::EVALUATOR_FAILED.into(),
        kind: None,
        folds: None,
        spread: None,
        measures: BTreeMap::new(),
    };
    if !outcome.success() {
        let cause = failure_cause(&outcome.stderr.text);
        let see = stderr_file
            .map(|p| format!("; see {}", p.display()))
            .unwrap_or_default();
        return failed(format!("evaluator failed ({}): {cause}{see}", outcome.describe()));
    }
    let Some(line) = line else {
        return failed("evaluator printed nothing; it must print a JSON line with `score`".into());
    };
    let parsed: EvalLine = match serde_json::from_str(line) {
        Ok(parsed) => parsed,
        Err(e) => return failed(format!("evaluator's result is not JSON with `score` ({e}): {line}")),
    };
    if parsed.smoke && !task.smoke() {
        return failed("the evaluator scored the smoke profile's stand-in data, which never score a run".into());
    }
    let invalid = |error: String, kind: Option<&str>| {
        let kind = super::feedback::known(kind);
        Evaluation {
            score: None,
            valid: false,
            error: Some(error),
            evaluator_failed: false,
            duration_ms: 0,
            told: super::feedback::invalid(kind),
            kind: kind.map(String::from),
            folds: None,
            spread: None,
            measures: BTreeMap::new(),
        }
    };
    match parsed.score {
        Some(score) if !score.is_finite() => invalid(
            format!("the evaluator's score {score} is not a finite number"),
            Some("out-of-range"),
        ),
        Some(score) => match (task.spec.metric.out_of_range(score), figures_fault(&parsed, score)) {
            (Some(why), _) => invalid(why, Some("out-of-range")),
            (None, Some(fault)) => failed(format!("the evaluator's {fault}")),
            (None, None) => Evaluation {
                score: Some(score),
                valid: true,
                error: None,
                evaluator_failed: false,
                duration_ms: 0,
                told: String::new(),
                kind: None,
                folds: parsed.folds.clone(),
                spread: parsed.spread,
                measures: parsed.measures.clone(),
            },
        },
        None => invalid(
            parsed.error.unwrap_or_else(|| "invalid submission".into()),
            parsed.kind.as_deref(),
        ),
    }
}

/// What is wrong with the spread or the measures of a valid `score`.
fn figures_fault(parsed: &EvalLine, score: f64) -> Option<String> {
    if let Some(fault) = parsed.spread.and_then(|s| s.fault(score)) {
        return Some(fault);
    }
    let bad = |(name, value): (&String, &f64)| name.len() > 64 || !value.is_finite();
    match parsed.measures.iter().find(|m| bad(*m)) {
        _ if parsed.measures.len() > MAX_MEASURES => Some(format!("measures: more than {MAX_MEASURES}")),
        Some((name, value)) => Some(format!(
            "measure {name:.64} = {value}: a name of at most 64 bytes and a finite number"
        )),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Data the smoke profile prepared, even copied to where a real run's
    /// would be, never score anything but a smoke test.
    #[test]
    fn smoke_data_never_score_a_real_run() {
        let task = Task::load(&super::super::builtin_tasks_dir().join("mini_baby_lm")).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = super::super::Prepared::cache_path(&task, tmp.path());
        std::fs::create_dir_all(dir.join("hidden")).unwrap();
        std::fs::create_dir_all(dir.join("public")).unwrap();
        std::fs::write(dir.join("complete"), task.prepare_key()).unwrap();
        let prepared = super::super::Prepared::existing(&task, tmp.path()).unwrap();
        refuse_smoke_data(&task, &prepared).unwrap();
        std::fs::write(dir.join(super::super::smoke::PREPARED_MARK), "k").unwrap();
        let err = refuse_smoke_data(&task, &prepared).unwrap_err().to_string();
        assert!(err.contains("smoke profile") && err.contains("mini_baby_lm"), "{err}");
        let smoke = super::super::smoke::for_tests(task.clone());
        assert_ne!(smoke.prepare_key(), task.prepare_key());
        assert!(smoke.prepare_key().starts_with("smoke-"));
        refuse_smoke_data(&smoke, &prepared).unwrap();
    }

    /// An evaluator that says it scored stand-in data fails outside the
    /// smoke profile, whatever score it gives.
    #[test]
    fn a_smoke_result_never_scores_a_real_run() {
        let task = Task::load(&super::super::builtin_tasks_dir().join("mini_baby_lm")).unwrap();
        let smoke = super::super::smoke::for_tests(task.clone());
        let ending = crate::sandbox::Ending {
            exit_code: Some(0),
            signal: None,
            ended_by_host: None,
            out_of_memory: false,
            memory_bytes: 0,
        };
        let outcome = Outcome::from_ending(ending, Duration::ZERO, Default::default(), Default::default());
        let line = Some(r#"{"score": 0.9, "smoke": true}"#.to_string());
        let real = judge(&task, &outcome, &line, None);
        assert!(real.evaluator_failed && real.score.is_none(), "{real:?}");
        assert!(real.error.unwrap().contains("smoke profile"));
        assert_eq!(judge(&smoke, &outcome, &line, None).score, Some(0.9));
    }
}
