//! A fork of a recorded episode: its parent read back (the record, the
//! snapshot after the step it forks at, the task it ran) and the request of
//! the new episode that starts there.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{EpisodeRecord, EpisodeRequest, ForkOrigin, Runner, agent_name, episode_dir};
use crate::record::recording::Recording;
use crate::task::{self, overrides::Configured};

/// The parent of a fork, read back.
pub struct Parent {
    /// The parent episode's folder.
    pub dir: PathBuf,
    /// Its `episode.json`.
    pub record: EpisodeRecord,
    /// The step after which the fork goes its own way.
    pub at_step: u32,
    /// The parent's snapshot after that step.
    pub snapshot: u64,
    /// The task it ran, loaded from where it was (or by name).
    pub task: task::Task,
}

impl Parent {
    /// The episode in `dir`, to fork after step `at_step`.
    pub fn open(dir: &Path, at_step: u32) -> Result<Self> {
        let dir = std::path::absolute(dir)?;
        let record = EpisodeRecord::read(&dir)?;
        let snapshot = snapshot_after(&Recording::open(&dir)?, at_step)?;
        let task = record
            .load_task()
            .with_context(|| format!("{}: the parent", dir.display()))?;
        Ok(Self {
            dir,
            record,
            at_step,
            snapshot,
            task,
        })
    }

    /// The fork's request, run by `runner` into `run_dir`: with `agent`, that
    /// agent starts fresh after the step; without, the parent's (unchanged)
    /// is replayed through it and goes on live.
    pub async fn request(self, runner: &Runner, agent: Option<&Path>, run_dir: &Path) -> Result<EpisodeRequest> {
        let record = &self.record;
        let agent_path = agent.map_or_else(|| PathBuf::from(&record.agent.path), Path::to_path_buf);
        let loaded = runner.load_agent(&agent_path).await?;
        let new_agent = loaded.sha256 != record.agent.sha256;
        if agent.is_none() && new_agent {
            bail!(
                "{}: the parent's agent {} changed since it ran (SHA-256 {}); pass it with --agent to start it fresh after step {}",
                self.dir.display(),
                record.agent.path,
                record.agent.sha256,
                self.at_step
            );
        }
        let dir = episode_dir(run_dir, &self.task.spec.name, &agent_name(&agent_path), record.seed);
        let origin = ForkOrigin {
            parent: self.dir.clone(),
            at_step: self.at_step,
            snapshot: self.snapshot,
            new_agent,
        };
        // The parent's limits, so that the replayed steps are answered alike;
        // its profile, so that a smoke episode's fork is one too.
        let configured = Configured {
            task: runner.profile(self.task, record.smoke).await?,
            limits: record.limits.clone(),
        };
        Ok(EpisodeRequest::new(loaded, configured, record.seed, dir).forked_from(origin))
    }
}

/// The parent's snapshot after step `k`: the last one a call up to that
/// step took (the start snapshot, 0, before any).
fn snapshot_after(recording: &Recording, k: u32) -> Result<u64> {
    let steps = recording
        .events
        .iter()
        .filter_map(|e| e["step"].as_u64())
        .max()
        .unwrap_or(0);
    if u64::from(k) > steps {
        bail!(
            "{}: --at-step {k} is past the episode's last step ({steps})",
            recording.dir.display()
        );
    }
    let mut snapshot = 0;
    for event in &recording.events {
        if event["step"].as_u64().is_some_and(|s| s > u64::from(k)) {
            break;
        }
        if let Some(id) = event["snapshot"].as_u64() {
            snapshot = id;
        }
    }
    Ok(snapshot)
}
