//! `mlrb fork`: a new episode that starts as a recorded one did, up to a
//! step, and goes on live from there (with the same or another agent, and
//! the same or another model).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::spinner;
use crate::episode::HostSetup;
use crate::episode::fork::Parent;
use crate::paths;

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
        let parent = Parent::open(&self.episode_dir, self.at_step)?;
        let runner = self
            .host
            .runner(&paths::cache_dir(), std::slice::from_ref(&parent.task))
            .await?;
        let label = format!("fork of {} after step {}", parent.dir.display(), self.at_step);
        let request = parent
            .request(&runner, self.agent.as_deref(), &self.place.dir())
            .await?;
        let bar = spinner(&label);
        let result = runner.run_episode(&request, super::ctrl_c()).await;
        bar.finish_and_clear();
        let (record, score) = result?;
        super::print_episode(self.json, &record, &score, &request.dir)?;
        Ok(super::scored(&score))
    }
}
