//! What one episode is: agent, task, seed, where its records go and the
//! limits it runs under. `mlrb run` and `mlrb bench` both build episodes
//! here, so the task's limits and the user's overrides combine in one place.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use crate::limits::{Limits, Overrides};
use crate::task::Task;

/// One episode to run.
#[derive(Debug, Clone)]
pub struct EpisodeRequest {
    /// The agent component's file.
    pub agent: PathBuf,
    /// The task the agent works on.
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
    pub fn new(agent: PathBuf, task: Task, seed: u64, dir: PathBuf, overrides: &Overrides) -> Self {
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
