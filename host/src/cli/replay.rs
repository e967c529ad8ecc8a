//! `mlrb replay`: run a recorded episode's agent again against its
//! recording, hermetically, and say whether it did exactly the same.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{say, spinner};
use crate::episode::{EpisodeRecord, Runner};
use crate::paths;

/// Options of `mlrb replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// An episode directory (runs/<run>/<task>/<agent>/<seed>).
    episode_dir: PathBuf,
    /// The agent component [default: the path episode.json records]; its
    /// SHA-256 must be the recorded one.
    #[arg(long, value_name = "FILE.wasm")]
    agent: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

impl ReplayArgs {
    /// Replays; exits 1 when the replay differs from the recording.
    pub async fn run(self) -> Result<ExitCode> {
        let record = EpisodeRecord::read(&self.episode_dir)?;
        let agent_path = self.agent.unwrap_or_else(|| PathBuf::from(&record.agent.path));
        let runner = Runner::hermetic(&paths::cache_dir())?;
        let agent = runner.load_agent(&agent_path).await?;
        let bar = spinner("replaying");
        let report = runner.replay(&self.episode_dir, &agent).await;
        bar.finish_and_clear();
        let report = report?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&report)?);
        } else if report.identical() {
            say!(
                "identical: {} calls, {} steps answered from the recording in {:.0} ms (the episode took {} ms)",
                report.calls,
                report.steps,
                report.wall_ms,
                report.recorded_wall_ms
            );
        } else {
            say!("differs from the recording:");
            for difference in &report.differences {
                say!("  {difference}");
            }
        }
        Ok(if report.identical() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    }
}
