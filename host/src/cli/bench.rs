//! `mlrb bench`: every agent on every task over several seeds, from a plan
//! file, the command line, or both; `--resume` completes a killed bench.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::{EXIT_INTERRUPTED, ctrl_c, say};
use crate::sandbox::SandboxKind;
use crate::{bench, paths, report};

/// Options of `mlrb bench`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  mlrb bench --agent a.wasm --agent b.wasm --task digits --task house-prices --seeds 3 -j 2\n  mlrb bench --plan plan.toml\n  mlrb bench --resume runs/20261122-101500"
)]
pub struct BenchArgs {
    /// A plan file (TOML: agents, tasks, seeds, sandbox, parallel, ...); flags add to it.
    #[arg(long, value_name = "FILE.toml")]
    plan: Option<PathBuf>,
    /// Resume the bench in this run directory: run exactly the episodes without a final result.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["plan", "agent", "task"])]
    resume: Option<PathBuf>,
    /// An agent component (repeatable).
    #[arg(long, value_name = "FILE.wasm")]
    agent: Vec<PathBuf>,
    /// A task name or folder (repeatable).
    #[arg(long, value_name = "NAME|PATH")]
    task: Vec<String>,
    /// A number of seeds (3 means 1,2,3) or a list (1,5,9).
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Episodes run at once.
    #[arg(short = 'j', long)]
    parallel: Option<usize>,
    /// CPU slots shared by running episodes, each taking its task's CPUs [default: this machine's].
    #[arg(long)]
    cpus: Option<u32>,
    /// Attempts after an infrastructure failure [default: 2].
    #[arg(long)]
    retries: Option<u32>,
    /// Override the tasks' step budgets.
    #[arg(long)]
    max_steps: Option<u32>,
    /// Override the tasks' wall-clock budgets, in seconds.
    #[arg(long)]
    wall_seconds: Option<u64>,
    /// Where runs are written.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    out: PathBuf,
    /// The run's name [default: the current UTC time].
    #[arg(long)]
    run_name: Option<String>,
    /// No progress display.
    #[arg(long, short)]
    quiet: bool,
    /// Print summary.json instead of tables.
    #[arg(long)]
    json: bool,
    /// `local` or `docker` [default: the plan's, else local].
    #[arg(long, value_enum)]
    sandbox: Option<SandboxKind>,
    /// The image for `--sandbox docker`.
    #[arg(long)]
    image: Option<String>,
    /// GPUs the bench may hand to episodes, by device id.
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    gpus: Vec<String>,
    /// The configuration with the `[llm]` providers [default: mlrb's usual places].
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Override the tasks' LLM token budgets.
    #[arg(long)]
    llm_tokens: Option<u64>,
    /// Override the tasks' LLM cost budgets, in USD.
    #[arg(long)]
    llm_cost_usd: Option<f64>,
}

impl BenchArgs {
    /// The plan of a new bench: the plan file, if any, with the flags added.
    fn plan(&self) -> Result<bench::Plan> {
        let mut plan = match &self.plan {
            Some(path) => bench::Plan::load(path)?,
            None => bench::Plan::default(),
        };
        plan.agents
            .extend(self.agent.iter().cloned().map(bench::AgentEntry::Path));
        plan.tasks.extend(self.task.iter().cloned());
        match self.seeds.as_slice() {
            [] => {}
            [count] => plan.seeds = bench::Seeds::Count(*count),
            list => plan.seeds = bench::Seeds::List(list.to_vec()),
        }
        plan.parallel = self.parallel.unwrap_or(plan.parallel);
        plan.cpus = self.cpus.or(plan.cpus);
        plan.retries = self.retries.unwrap_or(plan.retries);
        plan.sandbox = self.sandbox.unwrap_or(plan.sandbox);
        plan.image = self.image.clone().or(plan.image);
        if !self.gpus.is_empty() {
            plan.gpus = self.gpus.clone();
        }
        plan.max_steps = self.max_steps.or(plan.max_steps);
        plan.wall_seconds = self.wall_seconds.or(plan.wall_seconds);
        plan.llm_tokens = self.llm_tokens.or(plan.llm_tokens);
        plan.llm_cost_usd = self.llm_cost_usd.or(plan.llm_cost_usd);
        // Kept absolute in plan.json, so a resume elsewhere finds it.
        if let Some(config) = self.config.clone().or(plan.config.take()) {
            let absolute = config
                .canonicalize()
                .with_context(|| format!("{}: cannot read", config.display()))?;
            plan.config = Some(absolute);
        }
        Ok(plan)
    }

    /// Runs (or resumes) the bench and prints its summary.
    pub async fn run(self) -> Result<ExitCode> {
        let interrupt = ctrl_c();
        let (plan, dir) = match &self.resume {
            Some(dir) => (None, dir.clone()),
            None => (
                Some(self.plan()?),
                self.out.join(super::run_name(self.run_name.as_deref())),
            ),
        };
        let quiet = self.quiet || self.json;
        let outcome = bench::run(plan, &dir, &paths::cache_dir(), quiet, interrupt).await?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&outcome.summary)?);
        } else {
            say!("{}", report::summary_tables(&outcome.summary));
            say!(
                "{} of {} episodes have results ({} run now); results in {}",
                outcome.results.len(),
                outcome.summary.episodes.max(outcome.results.len()),
                outcome.ran,
                dir.display()
            );
        }
        if outcome.interrupted {
            eprintln!("interrupted: `mlrb bench --resume {}` runs what is left", dir.display());
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Ok(ExitCode::SUCCESS)
    }
}
