//! `mlrb tasks test`: a task's own quality test. It prepares the task, runs
//! the starter code and the reference solution in the sandbox, evaluates
//! each, and checks that the baseline is reproduced within its tolerance,
//! that the same workspace gets the same score twice, and that the
//! reference solution beats the baseline, and that the evaluator refuses
//! each of the task's invalid submissions (`refusals`) with its reason.
//!
//! In the smoke profile (`smoke`) the same scripts run on the CPU against
//! the stand-in hub: the starter (with the task's `[smoke]` arguments)
//! must give a valid submission and every invalid one must be refused;
//! the score itself means nothing, so no baseline, repeat or reference.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;
use serde::Serialize;

use super::item::{Item, Status, item};
use super::requirements::{self, HostOffer};
use super::starter::{log_prefix, run_in_workspace, run_starter, scratch, starter_failure};
use super::{EvalRequest, Evaluation, Spread, Task, improvement, prepare, pylib, refusals, smoke};
use crate::sandbox::{Mount, Sandbox};

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
    /// The rounds each evaluation's score came from, for a score measured
    /// in rounds (a timing): how far the two may differ.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spreads: Option<(Spread, Spread)>,
    /// Why the program or its evaluation failed.
    pub error: Option<String>,
    /// In the smoke profile, for an MLAgentBench starter that upstream ships
    /// as a skeleton: how it stopped, and that the stand-in submitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What `mlrb tasks test` found about a task.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The task's name.
    pub task: String,
    /// The task's version.
    pub version: String,
    /// Whether this was the smoke profile (stand-in models and data: its
    /// scores measure nothing).
    pub smoke: bool,
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

/// Runs the quality test of `task`, in the smoke profile when `smoke`.
/// `step` is told what is happening. A task that fails (preparation, its
/// evaluator) is reported as failed, so the next one of a suite still runs.
pub async fn run(
    task: &Task,
    offer: &HostOffer<'_>,
    cache_dir: &Path,
    keep: bool,
    smoke: bool,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Report> {
    let mut report = Report {
        task: task.spec.name.clone(),
        version: task.spec.version.clone(),
        smoke,
        prepare_seconds: 0.0,
        prepared_from_cache: false,
        starter: None,
        reference: None,
        reference_improvement: None,
        findings: Vec::new(),
        passed: false,
        work_dir: None,
    };
    let Some((task, prepared)) = ready(task, offer, cache_dir, smoke, &mut report, step).await? else {
        return Ok(report);
    };
    // The task's GPUs, held for the whole test: its scripts and evaluator use them.
    let lease = match task.spec.resources.gpus {
        0 => None,
        needed => match offer.gpus.acquire(needed) {
            Ok(lease) => Some(lease),
            Err(error) => {
                report.findings.push(item("gpus", Status::Fail, format!("{error:#}")));
                return Ok(report);
            }
        },
    };
    let gpus = lease.as_ref().map(|l| l.devices().to_vec()).unwrap_or_default();
    let work = scratch(&task, cache_dir, "")?;
    let runner = Runner {
        task: &task,
        sandbox: offer.sandbox,
        cache_dir,
        prepared: &prepared,
        gpus: &gpus,
    };
    if let Err(error) = runner.programs(&mut report, work.path(), step).await {
        report
            .findings
            .push(item("evaluator", Status::Fail, format!("{error:#}")));
    }
    report.passed = report.findings.iter().all(|f| f.status != Status::Fail);
    if keep || !report.passed {
        report.work_dir = Some(work.keep());
    }
    Ok(report)
}

/// The task in its profile, offered what it needs and prepared; none, with
/// the reason in `report`, when it cannot be.
async fn ready(
    task: &Task,
    offer: &HostOffer<'_>,
    cache_dir: &Path,
    smoke: bool,
    report: &mut Report,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Option<(Task, super::Prepared)>> {
    // A folder the smoke profile has no stand-in for is told so first: its
    // missing packages are beside the point.
    if let Some(why) = smoke.then(|| smoke::refusal(task)).flatten() {
        report.findings.push(item("stand-in", Status::Fail, why));
        return Ok(None);
    }
    let task = match smoke {
        true => smoke::resources(task.clone(), offer.gpus.size() > 0),
        false => task.clone(),
    };
    step("checking what the task needs");
    if let Err(error) = requirements::ensure(&task, offer).await {
        report
            .findings
            .push(item("requirements", Status::Fail, format!("{error:#}")));
        return Ok(None);
    }
    let task = match smoke {
        true => {
            step("building the stand-in hub");
            match smoke::profile(&task, offer, cache_dir).await {
                Ok(task) => task,
                Err(why) => {
                    report.findings.push(item("stand-in", Status::Fail, why));
                    return Ok(None);
                }
            }
        }
        false => task,
    };
    step("preparing");
    let started = Instant::now();
    let prepared = prepare(&task, offer.sandbox, cache_dir).await;
    report.prepare_seconds = started.elapsed().as_secs_f64();
    match prepared {
        Ok(prepared) => {
            report.prepared_from_cache = prepared.from_cache;
            Ok(Some((task, prepared)))
        }
        Err(error) => {
            report
                .findings
                .push(item("prepare", Status::Fail, format!("{error:#}")));
            Ok(None)
        }
    }
}

/// In the smoke profile: whether the evaluator accepted the starter's
/// submission (any score: the models are toys).
fn smoke_finding(starter: &ProgramRun) -> Item {
    let note = starter.note.as_ref().map_or(String::new(), |note| format!("; {note}"));
    match (starter.score, &starter.error) {
        (Some(score), _) => item(
            "smoke",
            Status::Ok,
            format!(
                "the starter's submission is valid (smoke score {score}: stand-in data, it measures nothing){note}"
            ),
        ),
        (None, error) => item(
            "smoke",
            Status::Fail,
            format!(
                "the starter's submission was not scored: {}",
                error.as_deref().unwrap_or("no score")
            ),
        ),
    }
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

/// How far two timings of one workspace may differ: the task's tolerance,
/// or what their rounds spread over where that is wider (as `mlrb verify`
/// allows a re-scoring), so that a loaded machine's spread is not a fault.
fn timing_allowance(metric: &super::spec::Metric, run: &ProgramRun, b: f64) -> f64 {
    let spread = run.spreads.map_or(0.0, |(first, again)| first.allows(again, b));
    metric.tolerance.max(spread)
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
        (Some(a), Some(b)) if !metric.deterministic && (a - b).abs() <= timing_allowance(metric, run, b) + 1e-9 => {
            Item {
                check: "determinism",
                status: Status::Ok,
                detail: format!(
                    "the same workspace scored {a} and {b}, within the {} a timing metric allows",
                    timing_allowance(metric, run, b)
                ),
            }
        }
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
    prepared: &'a super::Prepared,
    gpus: &'a [String],
}

impl Runner<'_> {
    /// Runs the starter in `work` and, outside the smoke profile, the
    /// reference solution; their findings and the invalid submissions'.
    async fn programs(&self, report: &mut Report, work: &Path, step: &(dyn Fn(&str) + Sync)) -> Result<()> {
        let (task, smoke) = (self.task, self.task.smoke());
        let starter_dir = work.join("starter");
        super::populate(task, self.prepared, &starter_dir)?;
        step("running the starter code");
        let starter = self.run_and_score(&starter_dir, !smoke, step).await?;
        if smoke {
            report.findings.push(smoke_finding(&starter));
        } else {
            report.findings.push(repeat_finding(task, &starter));
            report.findings.push(baseline_finding(task, &starter));
        }
        let scored = starter.score;
        report.starter = Some(starter);
        if !smoke && scored.is_some() {
            report.findings.extend(self.split_findings(&starter_dir, step).await?);
        }
        if scored.is_some() {
            let refusals = self.refusals(&starter_dir, work, step).await?;
            if smoke && refusals.is_empty() {
                let detail = "no scripts/invalid/ case: the evaluator must be shown refusing a bad submission";
                report.findings.push(item("invalid submission", Status::Fail, detail));
            }
            report.findings.extend(refusals);
        }
        if smoke {
            // A reference is judged against the baseline, which toy models cannot show.
            return Ok(());
        }
        if !task.reference_dir().is_dir() {
            let detail = "the task has no scripts/reference/".to_string();
            report.findings.push(item("reference", Status::Warn, detail));
            return Ok(());
        }
        let reference_dir = work.join("reference");
        super::populate(task, self.prepared, &reference_dir)?;
        super::apply_reference(task, &reference_dir)?;
        step("running the reference solution");
        let reference = self.run_and_score(&reference_dir, true, step).await?;
        let (findings, gain) = reference_findings(task, &reference, scored);
        report.findings.extend(findings);
        report.reference_improvement = gain;
        report.reference = Some(reference);
        Ok(())
    }

    /// Runs `python3 train.py` in `dir` (when there is one, or the smoke
    /// profile's submission script), then evaluates the workspace, twice
    /// when `repeat`.
    async fn run_and_score(&self, dir: &Path, repeat: bool, step: &(dyn Fn(&str) + Sync)) -> Result<ProgramRun> {
        let mut run = ProgramRun {
            exit_code: None,
            train_seconds: 0.0,
            score: None,
            repeat_score: None,
            spreads: None,
            error: None,
            note: None,
        };
        let smoke_script = self.task.smoke() && self.task.spec.smoke.as_ref().is_some_and(|s| s.submission.is_some());
        if smoke_script || dir.join("train.py").is_file() {
            let started = Instant::now();
            let outcome = run_starter(self.task, self.sandbox, dir, self.gpus).await?;
            run.train_seconds = started.elapsed().as_secs_f64();
            run.exit_code = outcome.exit_code;
            if let Some(expected) = super::mlab_smoke::skeleton(self.task) {
                let at = (dir, self.cache_dir, self.gpus);
                match super::mlab_smoke::finish_skeleton(self.task, self.sandbox, at, &outcome, &expected).await? {
                    Ok(note) => run.note = Some(note),
                    Err(why) => {
                        run.error = Some(why);
                        return Ok(run);
                    }
                }
            } else if !outcome.success() {
                run.error = Some(starter_failure(&outcome));
                return Ok(run);
            }
        }
        step("evaluating");
        let first = self.evaluate(dir, "eval").await?;
        let second = match repeat {
            true => {
                step("evaluating again");
                Some(self.evaluate(dir, "eval-repeat").await?)
            }
            false => None,
        };
        if first.evaluator_failed {
            anyhow::bail!(
                "task {}: the evaluator failed: {}",
                self.task.spec.name,
                first.error.unwrap_or_default()
            );
        }
        run.score = first.score;
        run.spreads = first.spread.zip(second.as_ref().and_then(|s| s.spread));
        run.repeat_score = second.and_then(|s| s.score);
        run.error = first.error;
        Ok(run)
    }

    /// For a task that splits its hidden answers: each part's size, the
    /// starter's score and the metric's standard error on it, measured
    /// (the latter from fifty folds of the part) and checked against what
    /// `[validation.split]` states.
    async fn split_findings(&self, starter: &Path, step: &(dyn Fn(&str) + Sync)) -> Result<Vec<Item>> {
        use super::split::{self, Part};
        let Some(declared) = self.task.spec.validation.split.as_ref().filter(|s| s.splits()) else {
            return Ok(Vec::new());
        };
        let folds = vec![("MLRB_FOLDS".to_string(), split::MEASURE_FOLDS.to_string())];
        let mut parts = Vec::new();
        for (part, label) in [(Part::Public, "eval-public"), (Part::Private, "eval-private")] {
            step(&format!("measuring the {label} part"));
            let evaluation = self.evaluate_part(starter, label, part, folds.clone()).await?;
            let rows = split::part_rows(&self.prepared.hidden_part(part), declared)?;
            parts.push(split::Measured::of(
                part,
                rows,
                &evaluation.score,
                evaluation.folds.as_deref(),
            ));
        }
        Ok(split::findings(
            declared,
            self.task.spec.metric.baseline,
            self.task.spec.metric.tolerance,
            &parts,
        )
        .into_iter()
        .map(|(ok, detail)| item("split", if ok { Status::Ok } else { Status::Fail }, detail))
        .collect())
    }

    /// Each of the task's invalid submissions, made from a copy of the
    /// starter's finished workspace and evaluated: refused with its reason?
    async fn refusals(&self, starter: &Path, work: &Path, step: &(dyn Fn(&str) + Sync)) -> Result<Vec<Item>> {
        let mut findings = Vec::new();
        for case in refusals::cases(self.task)? {
            step(&format!("checking that `{}` is refused", case.name));
            let dir = work.join(format!("invalid-{}", case.name));
            super::populate::copy_tree(starter, &dir)?;
            // mlrb's helpers too: cases share their operations (mlrb_invalid).
            let (lib_mount, lib_env) = pylib::mount(self.cache_dir)?;
            let mut mounts = vec![lib_mount];
            if refusals::dir(self.task).is_dir() {
                mounts.push(Mount::read_only(refusals::dir(self.task), refusals::GUEST_DIR));
            }
            let script = (case.argv.clone(), mounts, vec![lib_env], self.gpus);
            let outcome = run_in_workspace(self.task, self.sandbox, &dir, script, "invalid").await?;
            if !outcome.success() {
                let why = super::failure::failure_cause(&outcome.stderr.text);
                let detail = format!("{}: the script failed ({}): {why}", case.name, outcome.describe());
                findings.push(item("invalid submission", Status::Fail, detail));
                continue;
            }
            findings.push(refusals::finding(&case, &self.evaluate(&dir, "eval").await?));
        }
        Ok(findings)
    }

    async fn evaluate(&self, dir: &Path, label: &str) -> Result<Evaluation> {
        self.evaluate_part(dir, label, self.task.final_part(), Vec::new()).await
    }

    /// `dir` scored on `part` of the hidden answers, with `env` added to
    /// the evaluator's (e.g. the folds that measure the standard error).
    async fn evaluate_part(
        &self,
        dir: &Path,
        label: &str,
        part: super::split::Part,
        env: Vec<(String, String)>,
    ) -> Result<Evaluation> {
        let request = EvalRequest {
            workspace: dir,
            prepared: self.prepared,
            cache_dir: self.cache_dir,
            log_prefix: Some(log_prefix(dir, label)),
            gpus: self.gpus.to_vec(),
            timeout: None,
            part,
        };
        super::evaluate::evaluate_with(self.task, self.sandbox, request, env).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(score: f64, repeat: f64, spreads: Option<(Spread, Spread)>) -> ProgramRun {
        ProgramRun {
            exit_code: Some(0),
            train_seconds: 0.0,
            score: Some(score),
            repeat_score: Some(repeat),
            spreads,
            error: None,
            note: None,
        }
    }

    /// Two timings of one workspace on a loaded machine may differ by what
    /// their rounds spread over, beyond the task's tolerance; not by more.
    #[test]
    fn a_timing_repeated_may_differ_by_its_rounds_spread_and_no_more() {
        let task = Task::load(&super::super::builtin_tasks_dir().join("vectorize")).unwrap();
        assert!(!task.spec.metric.deterministic);
        let tolerance = task.spec.metric.tolerance;
        let within = timed(1.0, 1.0 + tolerance / 2.0, None);
        assert_eq!(repeat_finding(&task, &within).status, Status::Ok);
        // 1.13 then 0.96: past the tolerance, failed without rounds...
        assert_eq!(repeat_finding(&task, &timed(1.13, 0.96, None)).status, Status::Fail);
        // ...and allowed where the rounds of each spread that wide.
        let wide = |low, high| Spread { low, high, rounds: 5 };
        let loaded = timed(1.13, 0.96, Some((wide(0.95, 1.30), wide(0.80, 1.10))));
        assert_eq!(
            repeat_finding(&task, &loaded).status,
            Status::Ok,
            "{:?}",
            repeat_finding(&task, &loaded)
        );
        // Narrow rounds do not excuse a far repeat.
        let narrow = timed(1.13, 0.96, Some((wide(1.12, 1.14), wide(0.95, 0.97))));
        assert_eq!(repeat_finding(&task, &narrow).status, Status::Fail);
    }
}
