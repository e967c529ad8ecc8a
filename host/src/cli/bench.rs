//! `mlrb bench`: every agent on every task over several seeds, from a plan
//! file, the command line, or both; `--resume` completes a killed bench.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::{EXIT_INTERRUPTED, ctrl_c, say};
use crate::episode::HostSetup;
use crate::limits::Overrides;
use crate::{bench, cluster, report};

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
    /// With --resume: run again the episodes whose results are stale
    /// (`mlrb runs invalidate`); the stale ones are kept beside them.
    #[arg(long, requires = "resume")]
    rerun_stale: bool,
    /// An agent component (repeatable).
    #[arg(long, value_name = "FILE.wasm")]
    agent: Vec<PathBuf>,
    /// A task name or folder (repeatable).
    #[arg(long, value_name = "NAME|PATH")]
    task: Vec<String>,
    /// A number of seeds (3 means 1,2,3) or a list (1,5,9).
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Every task in its smoke profile (as `mlrb tasks test --smoke`): CPU, offline,
    /// stand-in data and toy models; every result is marked smoke and measures nothing.
    #[arg(long)]
    smoke: bool,
    /// Episodes run at once.
    #[arg(short = 'j', long)]
    parallel: Option<usize>,
    /// CPU slots shared by running episodes, each taking its CPUs [default: this machine's].
    #[arg(long)]
    cpu_slots: Option<u32>,
    /// Attempts after an infrastructure failure [default: 2].
    #[arg(long)]
    retries: Option<u32>,
    /// Where the episodes run: here, or through a queue served to workers
    /// (`server`: you start them; `slurm`: a job array; `k8s`: a Job)
    /// [default: the plan's `on`, else `slurm` with a `[slurm]` table, else `local`].
    #[arg(long, value_enum)]
    on: Option<bench::placement::On>,
    /// With --on k8s: print the workers' Job manifest and start nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    place: super::RunPlace,
    /// No progress display.
    #[arg(long, short)]
    quiet: bool,
    /// Print summary.json instead of tables.
    #[arg(long)]
    json: bool,
    /// Every column of every table, unwrapped (wider than the terminal).
    #[arg(long)]
    wide: bool,
    #[command(flatten, next_help_heading = "Sandbox and model")]
    host: HostSetup,
    #[command(flatten, next_help_heading = "Limits (over the plan's and the tasks')")]
    limits: Overrides,
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
        plan.cpu_slots = self.cpu_slots.or(plan.cpu_slots);
        plan.retries = self.retries.unwrap_or(plan.retries);
        // Kept absolute in plan.json, so a resume elsewhere finds the config.
        plan.host = self.host.clone().or(plan.host).absolute()?;
        plan.limits = self.limits.clone().or(&plan.limits);
        plan.on = self.on.or(plan.on);
        plan.smoke |= self.smoke;
        Ok(plan)
    }

    /// Runs (or resumes) the bench and prints its summary.
    pub async fn run(self) -> Result<ExitCode> {
        let interrupt = ctrl_c();
        let (plan, dir) = match &self.resume {
            Some(dir) => {
                bench::Plan::saved(dir)?.resumed_as(dir, self.smoke)?;
                (None, dir.clone())
            }
            None => (Some(self.plan()?), self.place.dir()),
        };
        if self.dry_run {
            return self.dry_run(plan.as_ref(), &dir);
        }
        let watch = cluster::Watch {
            quiet: self.quiet || self.json,
            rerun_stale: self.rerun_stale,
        };
        let outcome = cluster::bench_anywhere(plan, &dir, watch, interrupt).await?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&outcome.summary)?);
        } else {
            say!("{}", report::summary_tables(&outcome.summary, self.wide));
            let done = format!(
                "{} of {} episodes have results ({} run now); results in {}",
                outcome.results.len(),
                outcome.summary.episodes.max(outcome.results.len()),
                outcome.ran,
                dir.display()
            );
            say!("{}", crate::columns::wrap(&done));
        }
        if outcome.interrupted {
            eprintln!("interrupted: `mlrb bench --resume {}` runs what is left", dir.display());
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Ok(ExitCode::SUCCESS)
    }
}

impl BenchArgs {
    /// `--dry-run`: the Kubernetes Job the plan's workers would run as.
    fn dry_run(&self, plan: Option<&bench::Plan>, dir: &std::path::Path) -> Result<ExitCode> {
        let Some(plan) = plan.filter(|p| p.placement() == bench::placement::On::K8s) else {
            anyhow::bail!("--dry-run prints the manifest of a new bench with --on k8s");
        };
        plan.check()?;
        let setup = plan.cluster.clone().unwrap_or_default();
        let url = setup.url.clone().unwrap_or_else(|| "http://mlrb-serve:8700".into());
        let job = cluster::k8s::manifest(plan, dir, &url)?;
        say!("{}", serde_json::to_string_pretty(&job)?);
        eprintln!(
            "the workers read the run's token from the Secret {}-token (key `token`), made from {} once \
             `mlrb bench --on k8s --run-name ...` has made the run; docs/scale.md says how",
            cluster::k8s::object_name(dir),
            dir.join("cluster/token").display()
        );
        Ok(ExitCode::SUCCESS)
    }
}
