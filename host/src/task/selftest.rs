//! `mlrb tasks test`: a task's own quality test. It prepares the task, runs
//! the starter code and the reference solution in the sandbox, evaluates
//! each, and checks that the baseline is reproduced within its tolerance,
//! that the same workspace gets the same score twice, and that the
//! reference solution beats the baseline, and that the evaluator refuses
//! each of the task's invalid submissions (`refusals`) with its reason.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use super::check::{Item, Status};
use super::requirements::{self, HostOffer};
use super::{EvalRequest, Evaluation, Task, evaluate, improvement, prepare, refusals};
use crate::sandbox::{self, Mount, Sandbox};

/// One program run (starter or reference) and its evaluations.
#[derive(Debug, Clone, Serialize)]
pub struct ProgramRun {
    /// Exit status of `python3 train.py`; none when it was not run.
    pub exit_code: Option<i32>,
    /// How long `python3 train.py` ran, in seconds (0 when it was not run).
    pub train_seconds: f64,
    /// The first evaluation's score; none when the program or its evaluation failed.
    pub score: Option<f64>,
    /// The second evaluation of the same workspace.
    pub repeat_score: Option<f64>,
    /// Why the program or its evaluation failed.
    pub error: Option<String>,
}

/// What `mlrb tasks test` found about a task.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The task's name.
    pub task: String,
    /// The task's version.
    pub version: String,
    /// How long the prepare step took, in seconds.
    pub prepare_seconds: f64,
    /// Whether the prepared data came from the cache.
    pub prepared_from_cache: bool,
    /// The starter code's run; none when the test stopped before it.
    pub starter: Option<ProgramRun>,
    /// The reference solution's run; none when the task has none or the test stopped before it.
    pub reference: Option<ProgramRun>,
    /// Relative improvement of the reference over the baseline.
    pub reference_improvement: Option<f64>,
    /// Each check and how it went.
    pub findings: Vec<Item>,
    /// Whether no check failed.
    pub passed: bool,
    /// Where the workspaces were left (with `--keep`, or after a failure).
    pub work_dir: Option<PathBuf>,
}

/// Runs the quality test of `task`. `step` is told what is happening.
pub async fn run(
    task: &Task,
    offer: &HostOffer<'_>,
    cache_dir: &Path,
    keep: bool,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Report> {
    let spec = &task.spec;
    let mut report = Report {
        task: spec.name.clone(),
        version: spec.version.clone(),
        prepare_seconds: 0.0,
        prepared_from_cache: false,
        starter: None,
        reference: None,
        reference_improvement: None,
        findings: Vec::new(),
        passed: false,
        work_dir: None,
    };
    step("checking what the task needs");
    if let Err(error) = requirements::ensure(task, offer).await {
        report
            .findings
            .push(item("requirements", Status::Fail, format!("{error:#}")));
        return Ok(report);
    }
    step("preparing");
    let started = Instant::now();
    let prepared = prepare(task, offer.sandbox, cache_dir).await?;
    report.prepare_seconds = started.elapsed().as_secs_f64();
    report.prepared_from_cache = prepared.from_cache;

    let base = cache_dir.join("task-test");
    std::fs::create_dir_all(&base)?;
    let work = tempfile::Builder::new()
        .prefix(&format!("{}-", spec.name))
        .tempdir_in(&base)?;
    let runner = Runner {
        task,
        sandbox: offer.sandbox,
        cache_dir,
        prepared: &prepared,
    };
    let starter_dir = work.path().join("starter");
    super::populate(task, &prepared, &starter_dir)?;
    step("running the starter code");
    let starter = runner.run_and_score(&starter_dir, step).await?;
    report.findings.push(repeat_finding(task, &starter));
    report.findings.push(baseline_finding(task, &starter));
    if starter.score.is_some() {
        let refusals = runner.refusals(&starter_dir, work.path(), step).await?;
        report.findings.extend(refusals);
    }
    if task.reference_dir().is_dir() {
        let reference_dir = work.path().join("reference");
        super::populate(task, &prepared, &reference_dir)?;
        super::apply_reference(task, &reference_dir)?;
        step("running the reference solution");
        let reference = runner.run_and_score(&reference_dir, step).await?;
        let (findings, gain) = reference_findings(task, &reference, starter.score);
        report.findings.extend(findings);
        report.reference_improvement = gain;
        report.reference = Some(reference);
    } else {
        let detail = "the task has no scripts/reference/".to_string();
        report.findings.push(item("reference", Status::Warn, detail));
    }
    report.starter = Some(starter);
    report.passed = report.findings.iter().all(|f| f.status != Status::Fail);
    if keep || !report.passed {
        report.work_dir = Some(work.keep());
    }
    Ok(report)
}

fn item(check: &'static str, status: Status, detail: String) -> Item {
    Item { check, status, detail }
}

/// Whether the starter scores the baseline the task declares.
fn baseline_finding(task: &Task, starter: &ProgramRun) -> Item {
    let metric = &task.spec.metric;
    let tolerance = metric.tolerance + 1e-9;
    match (metric.baseline, starter.score) {
        (_, None) => {
            let why = starter.error.as_deref().unwrap_or("no score");
            item(
                "baseline",
                Status::Fail,
                format!("the starter's submission is not valid: {why}"),
            )
        }
        (Some(baseline), Some(score)) if (score - baseline).abs() <= tolerance => item(
            "baseline",
            Status::Ok,
            format!(
                "starter scores {score}, declared baseline {baseline} ± {}",
                metric.tolerance
            ),
        ),
        (Some(baseline), Some(score)) => item(
            "baseline",
            Status::Fail,
            format!(
                "starter scores {score}, outside the declared baseline {baseline} ± {}",
                metric.tolerance
            ),
        ),
        (None, Some(score)) => item(
            "baseline",
            Status::Warn,
            format!("none declared; the starter scores {score}"),
        ),
    }
}

/// Whether the reference solution beats the baseline (and scores what the
/// task declares, and the same twice); its improvement.
fn reference_findings(task: &Task, reference: &ProgramRun, starter: Option<f64>) -> (Vec<Item>, Option<f64>) {
    let metric = &task.spec.metric;
    let mut findings = Vec::new();
    let mut gain = None;
    match (reference.score, metric.baseline.or(starter)) {
        (Some(score), Some(baseline)) => {
            gain = improvement(score, baseline, metric.higher_is_better);
            let better = gain.is_some_and(|g| g > 0.0)
                || (baseline == 0.0 && (score > baseline) == metric.higher_is_better && score != baseline);
            let shown = gain.map_or(String::new(), |g| format!(" ({:+.1} %)", g * 100.0));
            let status = if better { Status::Ok } else { Status::Fail };
            findings.push(item(
                "reference",
                status,
                format!("scores {score} against the baseline {baseline}{shown}"),
            ));
            if let Some(declared) = metric.reference
                && (declared - score).abs() > metric.tolerance + 1e-9
            {
                let detail = format!("scores {score}, the task declares {declared}");
                findings.push(item("reference", Status::Warn, detail));
            }
        }
        (None, _) => {
            let why = reference.error.as_deref().unwrap_or("no score");
            findings.push(item(
                "reference",
                Status::Fail,
                format!("the reference submission is not valid: {why}"),
            ));
        }
        (Some(_), None) => {}
    }
    if metric.deterministic {
        findings.push(repeat_finding(task, reference));
    }
    (findings, gain)
}

/// Whether two evaluations of one workspace agreed.
fn repeat_finding(task: &Task, run: &ProgramRun) -> Item {
    let metric = &task.spec.metric;
    match (run.score, run.repeat_score) {
        (Some(a), Some(b)) if a == b => Item {
            check: "determinism",
            status: Status::Ok,
            detail: format!("the same workspace scored {a} twice"),
        },
        (Some(a), Some(b)) if !metric.deterministic && (a - b).abs() <= metric.tolerance + 1e-9 => Item {
            check: "determinism",
            status: Status::Ok,
            detail: format!(
                "the same workspace scored {a} and {b}, within the tolerance {} of a timing metric",
                metric.tolerance
            ),
        },
        (Some(a), Some(b)) => Item {
            check: "determinism",
            status: Status::Fail,
            detail: format!("the same workspace scored {a}, then {b}"),
        },
        (None, None) => Item {
            check: "determinism",
            status: Status::Ok,
            detail: "both evaluations found the submission invalid".into(),
        },
        _ => Item {
            check: "determinism",
            status: Status::Fail,
            detail: "one evaluation of the same workspace was valid and the other not".into(),
        },
    }
}

/// Runs the starter code, `python3 train.py`, in the workspace `dir`, as
/// the task's own scripts run (its resources, its network grant).
pub(super) async fn run_starter(task: &Task, sandbox: &dyn Sandbox, dir: &Path) -> Result<sandbox::Outcome> {
    let argv = vec!["python3".into(), "train.py".into()];
    run_in_workspace(task, sandbox, dir, argv, Vec::new(), "train").await
}

/// Runs `argv` in the workspace `dir` (with `mounts` besides), as the
/// task's own scripts run; its output logged beside `dir` as `label`.
async fn run_in_workspace(
    task: &Task,
    sandbox: &dyn Sandbox,
    dir: &Path,
    argv: Vec<String>,
    mounts: Vec<Mount>,
    label: &str,
) -> Result<sandbox::Outcome> {
    let resources = &task.spec.resources;
    let (reach, _gateway) = task.reach(false)?;
    sandbox
        .run(sandbox::Command {
            argv,
            cwd: "/workspace".into(),
            mounts: [Mount::writable(dir, "/workspace")].into_iter().chain(mounts).collect(),
            env: Vec::new(),
            network: reach,
            limits: task.task_script_limits(Duration::from_secs(resources.script_timeout_seconds)),
            gpus: Vec::new(),
            log_prefix: Some(dir.with_extension(label)),
            stop: Default::default(),
        })
        .await
}

/// Why the starter code failed, in one line.
pub(super) fn starter_failure(outcome: &sandbox::Outcome) -> String {
    format!(
        "train.py failed ({}): {}",
        outcome.describe(),
        super::evaluate::failure_cause(&outcome.stderr.text)
    )
}

struct Runner<'a> {
    task: &'a Task,
    sandbox: &'a dyn Sandbox,
    cache_dir: &'a Path,
    prepared: &'a super::Prepared,
}

impl Runner<'_> {
    /// Runs `python3 train.py` in `dir` (when there is one), then evaluates
    /// the workspace twice.
    async fn run_and_score(&self, dir: &Path, step: &(dyn Fn(&str) + Sync)) -> Result<ProgramRun> {
        let mut run = ProgramRun {
            exit_code: None,
            train_seconds: 0.0,
            score: None,
            repeat_score: None,
            error: None,
        };
        if dir.join("train.py").is_file() {
            let started = Instant::now();
            let outcome = run_starter(self.task, self.sandbox, dir).await?;
            run.train_seconds = started.elapsed().as_secs_f64();
            run.exit_code = outcome.exit_code;
            if !outcome.success() {
                run.error = Some(starter_failure(&outcome));
                return Ok(run);
            }
        }
        step("evaluating");
        let first = self.evaluate(dir, "eval").await?;
        step("evaluating again");
        let second = self.evaluate(dir, "eval-repeat").await?;
        if first.evaluator_failed {
            anyhow::bail!(
                "task {}: the evaluator failed: {}",
                self.task.spec.name,
                first.error.unwrap_or_default()
            );
        }
        run.score = first.score;
        run.repeat_score = second.score;
        run.error = first.error;
        Ok(run)
    }

    /// Each of the task's invalid submissions, made from a copy of the
    /// starter's finished workspace and evaluated: refused with its reason?
    async fn refusals(&self, starter: &Path, work: &Path, step: &(dyn Fn(&str) + Sync)) -> Result<Vec<Item>> {
        let mut findings = Vec::new();
        for case in refusals::cases(self.task)? {
            step(&format!("checking that `{}` is refused", case.name));
            let dir = work.join(format!("invalid-{}", case.name));
            super::populate::copy_tree(starter, &dir)?;
            let argv = vec!["python3".into(), format!("{}/{}.py", refusals::GUEST_DIR, case.name)];
            let mounts = vec![Mount::read_only(refusals::dir(self.task), refusals::GUEST_DIR)];
            let outcome = run_in_workspace(self.task, self.sandbox, &dir, argv, mounts, "invalid").await?;
            if !outcome.success() {
                let why = super::evaluate::failure_cause(&outcome.stderr.text);
                let detail = format!("{}: the script failed ({}): {why}", case.name, outcome.describe());
                findings.push(item("invalid submission", Status::Fail, detail));
                continue;
            }
            findings.push(refusals::finding(&case, &self.evaluate(&dir, "eval").await?));
        }
        Ok(findings)
    }

    async fn evaluate(&self, dir: &Path, label: &str) -> Result<Evaluation> {
        evaluate(
            self.task,
            self.sandbox,
            EvalRequest {
                workspace: dir,
                prepared: self.prepared,
                cache_dir: self.cache_dir,
                log_prefix: Some(dir.with_extension(label)),
                gpus: Vec::new(),
                timeout: None,
            },
        )
        .await
    }
}
