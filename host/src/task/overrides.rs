//! The user's overrides (`mlrb run`/`bench` options, a plan's limits)
//! applied to a task, in one place and once: refused where they would
//! contradict what the task declares or widen its network grant; else the
//! task's resources and metric changed, and the limits its episodes run
//! under, which every step of an episode then reads.

use anyhow::{Result, bail};

use super::Task;
use crate::limits::{Direction, Limits, Overrides};

/// A task under the user's overrides, and the limits its episodes run under.
#[derive(Debug, Clone)]
pub struct Configured {
    /// The task, its resources (CPUs, memory, script timeout, network for
    /// preparation) and undeclared metric as the overrides set them.
    pub task: Task,
    /// The task's limits with the overrides applied.
    pub limits: Limits,
}

impl Configured {
    /// `task` under `overrides`, or why they cannot apply to it.
    pub fn new(task: Task, overrides: &Overrides) -> Result<Self> {
        check(&task, overrides)?;
        let task = apply(task, overrides);
        let limits = task.limits().with(overrides);
        Ok(Self { task, limits })
    }

    /// `task` as it declares itself, under its own limits.
    pub fn unchanged(task: Task) -> Self {
        let limits = task.limits();
        Self { task, limits }
    }
}

/// The task with the resources the user overrode (CPUs, memory, script
/// timeout, network for preparation), so that every step of an episode
/// (the host's checks, preparation, scripts, evaluation) sees them.
fn apply(mut task: Task, overrides: &Overrides) -> Task {
    let resources = &mut task.spec.resources;
    if let Some(cpus) = overrides.cpus {
        resources.cpus = cpus;
    }
    if let Some(memory) = overrides.memory_mb {
        resources.memory_mb = memory;
    }
    if let Some(timeout) = overrides.script_timeout {
        resources.script_timeout_seconds = timeout;
    }
    task.prepare_network |= overrides.network.unwrap_or(false);
    let metric = &mut task.spec.metric;
    if !metric.direction_known {
        if let Some(name) = &overrides.metric {
            metric.name = name.clone();
        }
        if let Some(range) = overrides.range {
            metric.range = Some(range.0);
        }
        if let Some(direction) = overrides.direction {
            metric.higher_is_better = direction == Direction::Higher;
            metric.direction_known = true;
        }
    }
    task
}

/// Refuses a `--metric` or `--direction` that contradicts what the task
/// declares, and a network grant wider than the task's.
fn check(task: &Task, overrides: &Overrides) -> Result<()> {
    match overrides.narrow(&task.spec.resources.network) {
        Err(error) => bail!("task {}: {error:#}", task.spec.name),
        // The organiser's name map is read by every episode's proxy:
        // a bad one is refused here, before anything starts.
        Ok(network) if network.as_ref().unwrap_or(&task.spec.resources.network).granted() => {
            crate::sandbox::egress::proxy::Resolver::from_environment()?;
            crate::sandbox::egress::trust::extra_roots()?;
        }
        Ok(_) => {}
    }
    let metric = &task.spec.metric;
    if !metric.direction_known {
        return Ok(());
    }
    if let Some(range) = overrides.range.filter(|r| Some(r.0) != metric.range) {
        bail!(
            "task {} declares the range of its metric {}: --range {},{} cannot change it",
            task.spec.name,
            metric.name,
            range.0[0],
            range.0[1]
        );
    }
    let declared = if metric.higher_is_better { "higher" } else { "lower" };
    if let Some(direction) = overrides.direction
        && (direction == Direction::Higher) != metric.higher_is_better
    {
        bail!(
            "task {} declares its metric {} ({declared} is better): --direction cannot change it",
            task.spec.name,
            metric.name
        );
    }
    if let Some(name) = overrides.metric.as_ref().filter(|n| **n != metric.name) {
        bail!(
            "task {} declares its metric as `{}`: --metric {name} cannot rename it",
            task.spec.name,
            metric.name
        );
    }
    Ok(())
}
