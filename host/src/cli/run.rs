//! `mlrb run`: one agent on one task, a scored and fully recorded episode.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use anyhow::Result;
use clap::Args;

use super::{EXIT_INTERRUPTED, SandboxArgs, ctrl_c, say, spinner};
use crate::episode::EpisodeRequest;
use crate::limits::Overrides;
use crate::llm::LlmSource;
use crate::{paths, report, task};

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
    /// Where runs are written.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    out: PathBuf,
    /// The run's name [default: the current UTC time].
    #[arg(long)]
    run_name: Option<String>,
    /// Override the task's step budget.
    #[arg(long)]
    max_steps: Option<u32>,
    /// Override the task's wall-clock budget, in seconds.
    #[arg(long)]
    wall_seconds: Option<u64>,
    /// The agent's own memory limit, in MiB (all its linear memories together).
    #[arg(long, default_value_t = 1024)]
    agent_memory_mb: usize,
    /// What the agent's calls may write to the trace, in MiB; past it the
    /// episode ends as `trace-limit`.
    #[arg(long, default_value_t = 256)]
    trace_mb: u64,
    /// Print the episode and score records as JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sandbox: SandboxArgs,
    #[command(flatten)]
    llm: LlmArgs,
}

/// Where the agent's LLM calls go, and how much they may spend.
#[derive(Args, Debug, Clone)]
struct LlmArgs {
    /// The configuration with the `[llm]` providers and model aliases
    /// [default: $MLRB_CONFIG, ./mlrb.toml, ~/.config/mlrb/mlrb.toml].
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// `replay:<episode-dir>`: answer the agent's requests from a recorded
    /// episode, in order, with no provider or key.
    #[arg(long, value_name = "replay:DIR")]
    llm: Option<String>,
    /// Override the task's LLM token budget (input and output; 0: no limit).
    #[arg(long)]
    llm_tokens: Option<u64>,
    /// Override the task's LLM cost budget in USD (0: no limit).
    #[arg(long)]
    llm_cost_usd: Option<f64>,
}

impl RunArgs {
    /// What the options change of the task's limits.
    fn overrides(&self) -> Overrides {
        Overrides {
            max_steps: self.max_steps,
            wall_seconds: self.wall_seconds,
            llm_tokens: self.llm.llm_tokens,
            llm_cost_usd: self.llm.llm_cost_usd,
            agent_memory_mb: Some(self.agent_memory_mb),
            trace_mb: Some(self.trace_mb),
        }
    }

    /// The episode these options ask for.
    fn request(&self, task: task::Task) -> EpisodeRequest {
        let agent_name = paths::safe_component(
            &self
                .agent
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "agent".into()),
        );
        let dir = self
            .out
            .join(super::run_name(self.run_name.as_deref()))
            .join(&task.spec.name)
            .join(agent_name)
            .join(self.seed.to_string());
        EpisodeRequest::new(self.agent.clone(), task, self.seed, dir, &self.overrides())
    }

    /// Runs the episode, showing its step as it goes.
    pub async fn run(self) -> Result<ExitCode> {
        let sigint = ctrl_c();
        let task = task::resolve(&self.task)?;
        let llm = LlmSource::open(self.llm.llm.as_deref(), self.llm.config.as_deref())?;
        let runner = self.sandbox.runner(&task).await?.with_llm(llm);
        let bar = spinner("loading the agent");
        let agent = runner.load_agent(&self.agent).await?;
        let steps = Arc::new(AtomicU32::new(0));
        let request = self.request(task).with_progress(steps.clone());
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
        let result = runner.run_episode(&agent, &request, interrupt).await;
        ticker.abort();
        bar.finish_and_clear();
        let (record, score) = result?;
        let dir = &request.dir;
        if self.json {
            let all = serde_json::json!({ "episode": record, "score": score, "dir": dir });
            say!("{}", serde_json::to_string_pretty(&all)?);
        } else {
            say!("{}", report::episode_table(&record, &score));
            say!("episode: {}", dir.display());
        }
        Ok(match interrupted.load(Ordering::SeqCst) {
            true => ExitCode::from(EXIT_INTERRUPTED),
            false => super::scored(&score),
        })
    }
}
