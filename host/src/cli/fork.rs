//! `mlrb fork`: a new episode that starts as a recorded one did, up to a
//! step, and goes on live from there (with the same or another agent, and
//! the same or another model).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{say, spinner};
use crate::episode::{EpisodeRecord, EpisodeRequest, ForkOrigin, HostSetup, agent_name, episode_dir};
use crate::limits::Overrides;
use crate::record::recording::Recording;
use crate::{paths, report, task};

/// Options of `mlrb fork`.
#[derive(Args, Debug)]
pub struct ForkArgs {
    /// The parent episode directory (runs/<run>/<task>/<agent>/<seed>).
    episode_dir: PathBuf,
    /// The parent's step after which the fork goes its own way (0: from the start).
    #[arg(long, value_name = "K")]
    at_step: u32,
    /// Another agent to go on from the snapshot after step K (it starts
    /// fresh, told the steps taken) [default: the parent's agent, replayed
    /// through the first K steps].
    #[arg(long, value_name = "FILE.wasm")]
    agent: Option<PathBuf>,
    #[command(flatten)]
    place: super::RunPlace,
    /// Print the episode and score records as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten, next_help_heading = "Sandbox and model")]
    host: HostSetup,
}

impl ForkArgs {
    /// Runs the fork to its end and scores it.
    pub async fn run(self) -> Result<ExitCode> {
        let parent = std::path::absolute(&self.episode_dir)?;
        let record = EpisodeRecord::read(&parent)?;
        let recording = Recording::open(&parent)?;
        let snapshot = snapshot_after(&recording, self.at_step)?;
        let task = task::Task::load(std::path::Path::new(&record.task.root))
            .or_else(|_| task::resolve(&record.task.name))
            .with_context(|| format!("{}: task `{}` of the parent", parent.display(), record.task.name))?;
        let runner = self
            .host
            .runner(&paths::cache_dir(), std::slice::from_ref(&task))
            .await?;
        let agent_path = self.agent.clone().unwrap_or_else(|| PathBuf::from(&record.agent.path));
        let agent = runner.load_agent(&agent_path).await?;
        let new_agent = agent.sha256 != record.agent.sha256;
        if self.agent.is_none() && new_agent {
            bail!(
                "{}: the parent's agent {} changed since it ran (SHA-256 {}); pass it with --agent to start it fresh after step {}",
                parent.display(),
                record.agent.path,
                record.agent.sha256,
                self.at_step
            );
        }
        let run_dir = self.place.dir();
        let dir = episode_dir(&run_dir, &task.spec.name, &agent_name(&agent_path), record.seed);
        let origin = ForkOrigin {
            parent: parent.clone(),
            at_step: self.at_step,
            snapshot,
            new_agent,
        };
        let mut request = EpisodeRequest::new(agent, task, record.seed, dir, &Overrides::default()).forked_from(origin);
        // The parent's limits, so that the replayed steps are answered alike.
        request.limits = record.limits.clone();
        let bar = spinner(&format!("fork of {} after step {}", parent.display(), self.at_step));
        let result = runner.run_episode(&request, super::ctrl_c()).await;
        bar.finish_and_clear();
        let (record, score) = result?;
        if self.json {
            let all = serde_json::json!({ "episode": record, "score": score, "dir": request.dir });
            say!("{}", serde_json::to_string_pretty(&all)?);
        } else {
            say!("{}", report::episode_table(&record, &score));
            say!("episode: {}", request.dir.display());
        }
        Ok(super::scored(&score))
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
