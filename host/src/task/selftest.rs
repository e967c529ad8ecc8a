//! `mlrb tasks test`: a task's own quality test. It prepares the task, runs
//! the starter code and the reference solution in the sandbox, evaluates
//! each, and checks that the baseline is reproduced within its tolerance,
//! that the same workspace gets the same score twice, and that the
//! reference solution beats the baseline.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde::Serialize;

use super::check::{Item, Status};
use super::requirements::{self, HostOffer};
use super::{EvalRequest, Evaluation, Task, evaluate, improvement, prepare, workspace};
use crate::sandbox::{self, Mount, Sandbox};

/// One program run (starter or reference) and its evaluations.
#[derive(Debug, Clone, Serialize)]
pub struct ProgramRun {
    /// Exit status of `python3 train.py`; none when it was not run.
    pub exit_code: Option<i32>,
    pub train_seconds: f64,
    pub score: Option<f64>,
    /// The second evaluation of the same workspace.
    pub repeat_score: Option<f64>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub task: String,
    pub version: String,
    pub prepare_seconds: f64,
    pub prepared_from_cache: bool,
    pub starter: Option<ProgramRun>,
    pub reference: Option<ProgramRun>,
    /// Relative improvement of the reference over the baseline.
    pub reference_improvement: Option<f64>,
    pub findings: Vec<Item>,
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
        report.findings.push(Item {
            check: "requirements",
            status: Status::Fail,
            detail: format!("{error:#}"),
        });
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
        hidden: &prepared.hidden,
    };

    let starter_dir = work.path().join("starter");
    workspace::populate(task, &prepared, &starter_dir)?;
    step("running the starter code");
    let starter = runner.run_and_score(&starter_dir, step).await?;

    let mut findings = Vec::new();
    let tolerance = spec.metric.tolerance + 1e-9;
    findings.push(repeat_finding(task, &starter));
    match (spec.metric.baseline, starter.score) {
        (_, None) => findings.push(Item {
            check: "baseline",
            status: Status::Fail,
            detail: format!(
                "the starter's submission is not valid: {}",
                starter.error.as_deref().unwrap_or("no score")
            ),
        }),
        (Some(baseline), Some(score)) if (score - baseline).abs() <= tolerance => findings.push(Item {
            check: "baseline",
            status: Status::Ok,
            detail: format!(
                "starter scores {score}, declared baseline {baseline} ± {}",
                spec.metric.tolerance
            ),
        }),
        (Some(baseline), Some(score)) => findings.push(Item {
            check: "baseline",
            status: Status::Fail,
            detail: format!(
                "starter scores {score}, outside the declared baseline {baseline} ± {}",
                spec.metric.tolerance
            ),
        }),
        (None, Some(score)) => findings.push(Item {
            check: "baseline",
            status: Status::Warn,
            detail: format!("none declared; the starter scores {score}"),
        }),
    }

    if task.reference_dir().is_dir() {
        let reference_dir = work.path().join("reference");
        workspace::populate(task, &prepared, &reference_dir)?;
        workspace::apply_reference(task, &reference_dir)?;
        step("running the reference solution");
        let reference = runner.run_and_score(&reference_dir, step).await?;
        let against = spec.metric.baseline.or(starter.score);
        match (reference.score, against) {
            (Some(score), Some(baseline)) => {
                let gain = improvement(score, baseline, spec.metric.higher_is_better);
                report.reference_improvement = gain;
                let better = gain.is_some_and(|g| g > 0.0)
                    || (baseline == 0.0 && (score > baseline) == spec.metric.higher_is_better && score != baseline);
                findings.push(Item {
                    check: "reference",
                    status: if better { Status::Ok } else { Status::Fail },
                    detail: format!(
                        "scores {score} against the baseline {baseline}{}",
                        gain.map_or(String::new(), |g| format!(" ({:+.1} %)", g * 100.0))
                    ),
                });
                if let Some(declared) = spec.metric.reference
                    && (declared - score).abs() > tolerance
                {
                    findings.push(Item {
                        check: "reference",
                        status: Status::Warn,
                        detail: format!("scores {score}, the task declares {declared}"),
                    });
                }
            }
            (None, _) => findings.push(Item {
                check: "reference",
                status: Status::Fail,
                detail: format!(
                    "the reference submission is not valid: {}",
                    reference.error.as_deref().unwrap_or("no score")
                ),
            }),
            (Some(_), None) => {}
        }
        if spec.metric.deterministic {
            findings.push(repeat_finding(task, &reference));
        }
        report.reference = Some(reference);
    } else {
        findings.push(Item {
            check: "reference",
            status: Status::Warn,
            detail: "the task has no scripts/reference/".into(),
        });
    }
    report.starter = Some(starter);
    report.findings = findings;
    report.passed = report.findings.iter().all(|f| f.status != Status::Fail);
    if keep || !report.passed {
        report.work_dir = Some(work.keep());
    }
    Ok(report)
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

struct Runner<'a> {
    task: &'a Task,
    sandbox: &'a dyn Sandbox,
    cache_dir: &'a Path,
    hidden: &'a Path,
}

impl Runner<'_> {
    /// Runs `python3 train.py` in `dir` (when there is one), then evaluates
    /// the workspace twice.
    async fn run_and_score(&self, dir: &Path, step: &(dyn Fn(&str) + Sync)) -> Result<ProgramRun> {
        let resources = &self.task.spec.resources;
        let mut run = ProgramRun {
            exit_code: None,
            train_seconds: 0.0,
            score: None,
            repeat_score: None,
            error: None,
        };
        if dir.join("train.py").is_file() {
            let started = Instant::now();
            let outcome = self
                .sandbox
                .run(sandbox::Command {
                    argv: vec!["python3".into(), "train.py".into()],
                    cwd: "/workspace".into(),
                    mounts: vec![Mount::writable(dir, "/workspace")],
                    env: Vec::new(),
                    network: resources.network,
                    limits: self
                        .task
                        .task_script_limits(Duration::from_secs(resources.script_timeout_seconds)),
                    gpus: Vec::new(),
                    log_prefix: Some(dir.with_extension("train")),
                    stop: Default::default(),
                })
                .await?;
            run.train_seconds = started.elapsed().as_secs_f64();
            run.exit_code = outcome.exit_code;
            if !outcome.success() {
                run.error = Some(format!(
                    "train.py failed ({:?}, exit code {:?}): {}",
                    outcome.termination,
                    outcome.exit_code,
                    outcome.stderr.text.trim().lines().last().unwrap_or("")
                ));
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

    async fn evaluate(&self, dir: &Path, label: &str) -> Result<Evaluation> {
        evaluate(
            self.task,
            self.sandbox,
            EvalRequest {
                workspace: dir,
                hidden: self.hidden,
                cache_dir: self.cache_dir,
                log_prefix: Some(dir.with_extension(label)),
                gpus: Vec::new(),
                timeout: None,
            },
        )
        .await
    }
}
