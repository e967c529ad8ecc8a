//! `mlrb run`: one agent on one task, a scored and fully recorded episode.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use anyhow::Result;
use clap::Args;

use super::{EXIT_INTERRUPTED, ctrl_c, spinner};
use crate::episode::{EpisodeRequest, HostSetup, agent_name, episode_dir};
use crate::limits::Overrides;
use crate::task::overrides::Configured;
use crate::{paths, task};

/// Options of `mlrb run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The agent component (.wasm) to run.
    #[arg(long, value_name = "FILE.wasm")]
    agent: PathBuf,
    /// A built-in task name (see `mlrb tasks list`) or the path of a task folder.
    #[arg(long, value_name = "NAME|PATH")]
    task: String,
    /// Seeds the agent's randomness; also names the episode directory.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    place: super::RunPlace,
    /// Print the episode and score records as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The task's smoke profile (as `mlrb tasks test --smoke`): CPU, offline, stand-in
    /// data and toy models; the episode is marked smoke and its score measures nothing.
    #[arg(long)]
    smoke: bool,
    #[command(flatten, next_help_heading = "Sandbox and model")]
    host: HostSetup,
    #[command(flatten, next_help_heading = "Limits")]
    limits: Overrides,
}

impl RunArgs {
    /// Runs the episode, showing its step as it goes.
    pub async fn run(self) -> Result<ExitCode> {
        let sigint = ctrl_c();
        self.limits.check()?;
        let task = task::resolve(&self.task)?;
        if self.smoke {
            task::smoke::check(&task, &self.limits)?;
        }
        let plain = Configured::new(task.clone(), &self.limits)?.task;
        let runner = self
            .host
            .runner(&paths::cache_dir(), std::slice::from_ref(&plain))
            .await?;
        // The overrides apply to the task as its profile left it.
        let configured = Configured::new(runner.profile(task, self.smoke).await?, &self.limits)?;
        let bar = spinner("loading the agent");
        let agent = runner.load_agent(&self.agent).await?;
        let steps = Arc::new(AtomicU32::new(0));
        let run_dir = self.place.dir();
        let dir = episode_dir(
            &run_dir,
            &configured.task.spec.name,
            &agent_name(&self.agent),
            self.seed,
        );
        let request = EpisodeRequest::new(agent, configured, self.seed, dir).with_progress(steps.clone());
        let label = format!(
            "{} on {} (seed {})",
            self.agent.display(),
            request.task.spec.name,
            request.seed
        );
        let max_steps = request.limits.max_steps;
        let ticker = {
            let bar = bar.clone();
            tokio::spawn(async move {
                loop {
                    let step = steps.load(Ordering::Relaxed);
                    bar.set_message(format!("{label}: step {step} of {max_steps}"));
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            })
        };
        let interrupted = Arc::new(AtomicBool::new(false));
        let flag = interrupted.clone();
        let interrupt = async move {
            sigint.await;
            flag.store(true, Ordering::SeqCst);
        };
        let result = runner.run_episode(&request, interrupt).await;
        ticker.abort();
        bar.finish_and_clear();
        let (record, score) = result?;
        let dir = &request.dir;
        super::print_episode(self.json, &record, &score, dir)?;
        Ok(match interrupted.load(Ordering::SeqCst) {
            true => ExitCode::from(EXIT_INTERRUPTED),
            false => super::scored(&score),
        })
    }
}
