//! What one episode is: agent, task, seed, where its records go and the
//! limits it runs under (the task as `task::overrides` configured it).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use super::LoadedAgent;
use crate::limits::Limits;
use crate::task::Task;
use crate::task::overrides::Configured;

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
    /// Set for a fork: the episode it starts from, and where.
    pub fork: Option<ForkOrigin>,
    /// Whether what a dead host left in `dir` is resumed (else `dir` must
    /// hold no episode).
    pub resume: bool,
    /// Cancelled when the host stops: from then on no call is recorded.
    pub halt: Option<tokio_util::sync::CancellationToken>,
}

/// Where a fork starts: a recorded episode, after one of its steps.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct ForkOrigin {
    /// The parent episode's folder.
    pub parent: PathBuf,
    /// The parent's step the fork starts after.
    pub at_step: u32,
    /// The parent's snapshot after that step: the fork's workspace.
    pub snapshot: u64,
    /// True when another agent than the parent's goes on from there (it
    /// starts fresh); false when the parent's agent is replayed through the
    /// first steps and goes on live.
    pub new_agent: bool,
}

impl ForkOrigin {
    /// How `episode.json` records it.
    pub fn record(&self) -> super::records::ForkRecord {
        super::records::ForkRecord {
            parent: self.parent.display().to_string(),
            parent_id: episode_id_of(&self.parent),
            at_step: self.at_step,
            new_agent: self.new_agent,
        }
    }
}

impl EpisodeRequest {
    /// `agent` on the configured task with `seed`, recorded in `dir`.
    pub fn new(agent: Arc<LoadedAgent>, configured: Configured, seed: u64, dir: PathBuf) -> Self {
        let Configured { task, limits } = configured;
        Self {
            agent,
            task,
            seed,
            dir,
            limits,
            progress: None,
            fork: None,
            resume: false,
            halt: None,
        }
    }

    /// Records no call once `halt` is cancelled (the host stopping), so that
    /// a call cut short with the host is run again on resume, not replayed.
    pub fn halted_by(mut self, halt: &tokio_util::sync::CancellationToken) -> Self {
        self.halt = Some(halt.clone());
        self
    }

    /// Resumes the episode a dead host left in its folder, if any.
    pub fn resuming(mut self, resume: bool) -> Self {
        self.resume = resume;
        self
    }

    /// This episode as a fork of `origin`.
    pub fn forked_from(mut self, origin: ForkOrigin) -> Self {
        self.fork = Some(origin);
        self
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

/// The id of the episode recorded in `dir`: its last three components,
/// `<task>/<agent>/<seed>`, as a run lays episodes out.
pub fn episode_id_of(dir: &Path) -> String {
    let parts: Vec<String> = dir
        .components()
        .rev()
        .take(3)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

/// The folder of episode `task`/`agent`/`seed` in the run directory `run_dir`.
pub fn episode_dir(run_dir: &Path, task: &str, agent: &str, seed: u64) -> PathBuf {
    run_dir.join(episode_id(task, agent, seed))
}
