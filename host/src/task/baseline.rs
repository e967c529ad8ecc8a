//! `mlrb tasks baseline`: the starter code's score measured, not assumed.
//! The unchanged starter runs in the sandbox several times, each on a fresh
//! workspace; the mean ± standard error and the environment it ran in are
//! kept in the cache, and from then on improvement and success are judged
//! against it, with reports saying where the baseline came from.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::starter::{StarterScored, run_and_score, scratch};
use super::{Task, populate, prepare};
use crate::sandbox::Sandbox;

/// A baseline measured on this host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measured {
    /// The task's name.
    pub task: String,
    /// The task's version.
    pub version: String,
    /// The mean of the valid runs' scores.
    pub mean: f64,
    /// Its standard error (none with a single valid run).
    pub se: Option<f64>,
    /// Each run's score; none for a run whose submission was invalid.
    pub scores: Vec<Option<f64>>,
    /// Where it was measured: sandbox, host, mlrb version.
    pub environment: Environment,
    /// When, as an RFC 3339 UTC time.
    pub measured_at: String,
}

/// What a measured baseline ran on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Environment {
    /// The sandbox, e.g. "local (bubblewrap 0.8.0)".
    pub sandbox: String,
    /// The mlrb version.
    pub mlrb: String,
    /// Operating system and CPU architecture.
    pub platform: String,
    /// CPUs and memory each script had.
    pub script_cpus: f64,
    /// Memory each script had, in MiB.
    pub script_memory_mb: u64,
}

impl Measured {
    /// How reports name this baseline's origin.
    pub fn source(&self) -> String {
        let valid = self.scores.iter().flatten().count();
        let se = self.se.map_or(String::new(), |se| format!(" ± {se:.4}"));
        format!(
            "measured: mean{se} of {valid} run(s) of the starter, {} on {}",
            self.environment.sandbox,
            self.measured_at.get(..10).unwrap_or(&self.measured_at)
        )
    }
}

/// Where the measured baseline of `task` is kept.
pub fn path(task: &Task, cache_dir: &Path) -> PathBuf {
    let name = crate::paths::safe_component(&format!("{}-{}", task.spec.name, task.spec.version));
    cache_dir.join("baselines").join(format!("{name}.json"))
}

/// The measured baseline of `task`, if there is one for its version.
pub fn load(task: &Task, cache_dir: &Path) -> Option<Measured> {
    let text = std::fs::read_to_string(path(task, cache_dir)).ok()?;
    let measured: Measured = serde_json::from_str(&text).ok()?;
    (measured.task == task.spec.name && measured.version == task.spec.version).then_some(measured)
}

/// Runs the starter `runs` times and measures its score; `step` is told
/// what is happening. The result is stored for later episodes.
pub async fn measure(
    task: &Task,
    sandbox: &dyn Sandbox,
    cache_dir: &Path,
    runs: u32,
    step: &(dyn Fn(&str) + Sync),
) -> Result<Measured> {
    step("preparing");
    let prepared = prepare(task, sandbox, cache_dir).await?;
    let work = scratch(task, cache_dir, "baseline-")?;
    let mut scores = Vec::new();
    for run in 1..=runs {
        let dir = work.path().join(format!("run-{run}"));
        populate(task, &prepared, &dir)?;
        let at = |what: &str| step(&format!("run {run} of {runs}: {what}"));
        let evaluation = match run_and_score(task, sandbox, &dir, (&prepared, cache_dir), &at).await? {
            StarterScored::Failed(why) => bail!("task {}: {why}", task.spec.name),
            StarterScored::Scored(evaluation) => evaluation,
        };
        if evaluation.evaluator_failed {
            bail!("task {}: {}", task.spec.name, evaluation.error.unwrap_or_default());
        }
        scores.push(evaluation.score);
    }
    let valid: Vec<f64> = scores.iter().flatten().copied().collect();
    let Some(stats) = crate::stats::mean_se(&valid) else {
        bail!(
            "task {}: the starter's submission was invalid in all {runs} run(s): there is no baseline to measure",
            task.spec.name
        );
    };
    let measured = Measured {
        task: task.spec.name.clone(),
        version: task.spec.version.clone(),
        mean: stats.mean,
        se: stats.se,
        scores,
        environment: Environment {
            sandbox: sandbox.describe(),
            mlrb: env!("CARGO_PKG_VERSION").to_string(),
            platform: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            script_cpus: task.spec.resources.cpus,
            script_memory_mb: task.spec.resources.memory_mb,
        },
        measured_at: crate::format::now_rfc3339(),
    };
    let file = path(task, cache_dir);
    std::fs::create_dir_all(file.parent().context("the baselines folder")?)?;
    std::fs::write(&file, serde_json::to_vec_pretty(&measured)?)
        .with_context(|| format!("writing {}", file.display()))?;
    Ok(measured)
}
