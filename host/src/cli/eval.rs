//! `mlrb eval`: score an episode again from its final snapshot.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::{SandboxArgs, say, spinner};
use crate::episode::EpisodeRecord;
use crate::report;

/// Options of `mlrb eval`.
#[derive(Args, Debug)]
pub struct EvalArgs {
    /// An episode directory (runs/<run>/<task>/<agent>/<seed>).
    episode_dir: PathBuf,
    #[command(flatten)]
    sandbox: SandboxArgs,
    /// Print score.json instead of a table.
    #[arg(long)]
    json: bool,
}

impl EvalArgs {
    /// Scores the episode and rewrites its score.json.
    pub async fn run(self) -> Result<ExitCode> {
        let dir: &Path = &self.episode_dir;
        let record = EpisodeRecord::read(dir)?;
        let task = record.load_task().with_context(|| dir.display().to_string())?;
        if task.spec.version != record.task.version {
            tracing::warn!(episode = %record.task.version, now = %task.spec.version, "the task's version changed since this episode ran");
        }
        let runner = self.sandbox.runner(&task).await?;
        // A smoke episode is scored in its profile, never against real data.
        let task = runner.profile(task, record.smoke).await?;
        let bar = spinner("evaluating the final snapshot");
        let score = runner.reevaluate(&task, dir, &record).await;
        bar.finish_and_clear();
        let score = score?;
        score.write(dir)?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&score)?);
        } else {
            say!("{}", report::episode_text(&record, &score));
        }
        Ok(super::scored(&score))
    }
}
