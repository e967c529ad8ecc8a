//! What one episode is: agent, task, seed, where its records go and the
//! limits it runs under. `mlrb run` and `mlrb bench` both build episodes
//! here, so the task's limits and the user's overrides combine in one place.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use super::LoadedAgent;
use crate::limits::{Limits, Overrides};
use crate::task::Task;

/// One episode to run.
#[derive(Clone)]
pub struct EpisodeRequest {
    /// The agent component, loaded.
    pub agent: Arc<LoadedAgent>,
    /// The task the agent works on, its resources changed by the overrides.
    pub task: Task,
    /// The seed for the agent's randomness (WASI random).
    pub seed: u64,
    /// `runs/<run-name>/<task>/<agent>/<seed>/`; must not hold an episode yet.
    pub dir: PathBuf,
    /// The task's limits with the user's overrides applied.
    pub limits: Limits,
    /// Receives the step count as the episode goes, for a progress display.
    pub progress: Option<Arc<AtomicU32>>,
}

impl EpisodeRequest {
    /// `agent` on `task` with `seed`, recorded in `dir`, under the task's
    /// limits changed by `overrides`.
    pub fn new(agent: Arc<LoadedAgent>, task: Task, seed: u64, dir: PathBuf, overrides: &Overrides) -> Self {
        let task = task.with_overrides(overrides);
        let limits = task.limits().with(overrides);
        Self {
            agent,
            task,
            seed,
            dir,
            limits,
            progress: None,
        }
    }

    /// Publishes the step count to `counter` as the episode goes.
    pub fn with_progress(mut self, counter: Arc<AtomicU32>) -> Self {
        self.progress = Some(counter);
        self
    }
}

/// How a run names an episode, and the folder it is recorded in under the
/// run's directory: `<task>/<agent>/<seed>`.
pub fn episode_id(task: &str, agent: &str, seed: u64) -> String {
    format!("{task}/{agent}/{seed}")
}

/// The folder of episode `task`/`agent`/`seed` in the run directory `run_dir`.
pub fn episode_dir(run_dir: &Path, task: &str, agent: &str, seed: u64) -> PathBuf {
    run_dir.join(episode_id(task, agent, seed))
}
