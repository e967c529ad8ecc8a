//! `mlrb human`: a person works on a task in an agent's place, in a shell
//! of the task's sandbox; the episode is recorded and scored like an agent's.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::{SandboxArgs, say};
use crate::episode::human::{Console, HumanOutcome, HumanStart, check_name};
use crate::episode::{EpisodeRecord, episode_dir};
use crate::limits::Overrides;
use crate::task;
use crate::task::overrides::Configured;

/// Options of `mlrb human`.
#[derive(Args, Debug)]
pub struct HumanArgs {
    /// A built-in task name (see `mlrb tasks list`) or the path of a task folder.
    #[arg(long, value_name = "NAME|PATH", required_unless_present = "resume")]
    task: Option<String>,
    /// Your name: the episode is recorded as agent `human:NAME` [default: $USER].
    #[arg(long)]
    name: Option<String>,
    /// The episode's seed; also names its folder.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Go on with the paused session recorded in DIR (its task and limits).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["task", "name"])]
    resume: Option<PathBuf>,
    #[command(flatten)]
    place: super::RunPlace,
    /// Print the episode and score records as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten, next_help_heading = "Sandbox")]
    sandbox: SandboxArgs,
    #[command(flatten, next_help_heading = "Limits")]
    limits: Overrides,
}

impl HumanArgs {
    /// Opens the session, then prints the score (or where to go on).
    pub async fn run(self) -> Result<ExitCode> {
        let (task, start) = self.start()?;
        let runner = self.sandbox.runner(&task).await?;
        let mut console = Console::stdio();
        match runner.human(start, &mut console).await? {
            HumanOutcome::Paused(dir) => {
                if self.json {
                    say!("{}", serde_json::json!({ "paused": true, "dir": dir }));
                }
                Ok(ExitCode::SUCCESS)
            }
            HumanOutcome::Scored(record, score, dir) => {
                super::print_episode(self.json, &record, &score, &dir)?;
                Ok(super::scored(&score))
            }
        }
    }

    /// The task, and the session: a fresh one, or the paused one named.
    fn start(&self) -> Result<(task::Task, HumanStart)> {
        if let Some(dir) = &self.resume {
            let task = EpisodeRecord::read(dir)?.load_task()?;
            return Ok((task, HumanStart::Resume(dir.clone())));
        }
        let name = match &self.name {
            Some(name) => name.clone(),
            None => std::env::var("USER").unwrap_or_else(|_| "person".into()),
        };
        check_name(&name)?;
        self.limits.check()?;
        let task_name = self
            .task
            .as_deref()
            .context("--task NAME|PATH is needed (or --resume DIR)")?;
        let configured = Configured::new(task::resolve(task_name)?, &self.limits)?;
        let task_dir = &configured.task.spec.name;
        let dir = episode_dir(&self.place.dir(), task_dir, &format!("human-{name}"), self.seed);
        let task = configured.task.clone();
        let start = HumanStart::Fresh {
            configured: Box::new(configured),
            name,
            seed: self.seed,
            dir,
        };
        Ok((task, start))
    }
}
