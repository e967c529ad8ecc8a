//! `mlrb bench`: every agent on every task over several seeds, run with a
//! bounded number of episodes at once, journalled so that a killed bench
//! resumes exactly, and summarised into `results.jsonl` and `summary.json`.

pub mod html;
pub mod journal;
pub mod metrics;
pub mod progress;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::episode::{AgentLimits, EpisodeRecord, EpisodeSpec, Host, LoadedAgent, ScoreRecord};
use crate::sandbox::gpu::GpuPool;
use crate::sandbox::image::ImageRecipe;
use crate::sandbox::{self, SandboxKind};
use crate::task::{self, Task};
use journal::{Entry, Journal};
use metrics::{ResultLine, Summary};
use progress::Progress;

/// An agent of the plan: a path, or a path and the name its results go by.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AgentEntry {
    Path(PathBuf),
    Named { path: PathBuf, name: String },
}

impl AgentEntry {
    pub fn path(&self) -> &Path {
        match self {
            Self::Path(path) | Self::Named { path, .. } => path,
        }
    }
    pub fn name(&self) -> String {
        match self {
            Self::Named { name, .. } => crate::paths::safe_component(name),
            Self::Path(path) => crate::paths::safe_component(
                &path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "agent".into()),
            ),
        }
    }
}

/// Seeds: a count (`3` means 1, 2, 3) or an explicit list.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Seeds {
    Count(u64),
    List(Vec<u64>),
}

impl Seeds {
    pub fn list(&self) -> Vec<u64> {
        match self {
            Self::Count(n) => (1..=*n).collect(),
            Self::List(list) => list.clone(),
        }
    }
}

/// What a bench runs: from `--plan plan.toml`, the command line, or both.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub agents: Vec<AgentEntry>,
    /// Built-in task names or task folder paths.
    pub tasks: Vec<String>,
    #[serde(default = "default_seeds")]
    pub seeds: Seeds,
    #[serde(default)]
    pub sandbox: SandboxKind,
    /// The image for the Docker sandbox [default: `mlrb image build`'s].
    #[serde(default)]
    pub image: Option<String>,
    /// GPU device ids the bench may hand to episodes.
    #[serde(default)]
    pub gpus: Vec<String>,
    /// Episodes run at once.
    #[serde(default = "one")]
    pub parallel: usize,
    /// CPU slots shared by running episodes; each takes its task's
    /// `resources.cpus` (rounded up) [default: this machine's CPUs].
    #[serde(default)]
    pub cpus: Option<u32>,
    #[serde(default)]
    pub max_steps: Option<u32>,
    #[serde(default)]
    pub wall_seconds: Option<u64>,
    /// Overrides the tasks' LLM token budgets.
    #[serde(default)]
    pub llm_tokens: Option<u64>,
    /// Overrides the tasks' LLM cost budgets, in USD.
    #[serde(default)]
    pub llm_cost_usd: Option<f64>,
    /// The mlrb.toml whose `[llm]` providers the agents' calls go to
    /// [default: mlrb's usual places].
    #[serde(default)]
    pub config: Option<PathBuf>,
    #[serde(default = "default_memory")]
    pub agent_memory_mb: usize,
    /// Attempts after an infrastructure failure (never after the agent's own).
    #[serde(default = "default_retries")]
    pub retries: u32,
}

fn default_seeds() -> Seeds {
    Seeds::Count(1)
}
fn one() -> usize {
    1
}
fn default_memory() -> usize {
    1024
}
fn default_retries() -> u32 {
    2
}

impl Plan {
    /// Reads a plan file, with one-line errors naming the file and field.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
        let plan: Self = toml::from_str(&text).map_err(|e| crate::task::spec::toml_error(path, &text, &e))?;
        Ok(plan)
    }

    pub fn check(&self) -> Result<()> {
        if self.agents.is_empty() {
            bail!("the plan names no agent: pass --agent FILE.wasm (repeatable) or `agents` in the plan");
        }
        if self.tasks.is_empty() {
            bail!("the plan names no task: pass --task NAME (repeatable) or `tasks` in the plan");
        }
        if self.seeds.list().is_empty() {
            bail!("the plan has no seeds: `seeds` must be a count of at least 1 or a list");
        }
        if self.parallel == 0 {
            bail!("`parallel` (-j) must be at least 1");
        }
        let mut names = BTreeMap::new();
        for agent in &self.agents {
            if let Some(other) = names.insert(agent.name(), agent.path()) {
                bail!(
                    "agents {} and {} would both be named `{}`: give one a name (`{{ path = \"...\", name = \"...\" }}` in the plan)",
                    other.display(),
                    agent.path().display(),
                    agent.name()
                );
            }
        }
        Ok(())
    }
}

/// One episode of the matrix.
#[derive(Debug, Clone)]
struct Cell {
    id: String,
    task: usize,
    agent: usize,
    seed: u64,
}

fn episode_id(task: &str, agent: &str, seed: u64) -> String {
    format!("{task}/{agent}/{seed}")
}

/// Everything a bench run needs, resolved.
struct Bench {
    plan: Plan,
    dir: PathBuf,
    tasks: Vec<Task>,
    agent_names: Vec<String>,
    agents: Vec<LoadedAgent>,
    host: Host,
    gpu_slots: tokio::sync::Semaphore,
    cpu_slots: tokio::sync::Semaphore,
    cpu_total: u32,
}

/// What `run` did.
pub struct Outcome {
    pub summary: Summary,
    pub results: Vec<ResultLine>,
    pub interrupted: bool,
    /// Episodes run by this invocation (not adopted or already done).
    pub ran: usize,
}

/// Starts a new bench in `dir` (which must not hold one), or resumes the
/// one there. `interrupt` resolving stops it: running episodes end as
/// interrupted and are redone by a resume.
pub async fn run(
    plan: Option<Plan>,
    dir: &Path,
    cache_dir: &Path,
    quiet: bool,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Outcome> {
    let journal_path = dir.join("journal.jsonl");
    let plan_path = dir.join("plan.json");
    let (plan, state, mut journal) = match plan {
        Some(plan) => {
            plan.check()?;
            if journal_path.exists() {
                bail!(
                    "{}: already holds a bench: resume it with `mlrb bench --resume {}`, or choose another --run-name",
                    dir.display(),
                    dir.display()
                );
            }
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            (plan, None, None)
        }
        None => {
            let text = std::fs::read_to_string(&plan_path).map_err(|e| {
                anyhow::anyhow!(
                    "{}: cannot read ({e}): is this a bench run directory?",
                    plan_path.display()
                )
            })?;
            let plan: Plan =
                serde_json::from_str(&text).with_context(|| format!("{}: not a bench plan", plan_path.display()))?;
            let state = journal::read(&journal_path)?;
            let journal = Journal::append_to(&journal_path)?;
            (plan, Some(state), Some(journal))
        }
    };

    let tasks: Vec<Task> = plan.tasks.iter().map(|t| task::resolve(t)).collect::<Result<_>>()?;
    let image = plan.image.clone().unwrap_or_else(|| ImageRecipe::standard(false).tag());
    let sandbox = sandbox::open(plan.sandbox, &image).await?;
    let gpus = GpuPool::new(&plan.gpus)?;
    let gpu_count = gpus.size();
    let llm = crate::llm::LlmSource::open(None, plan.config.as_deref())?;
    let host = Host::new(cache_dir, sandbox)?.with_gpus(gpus).with_llm(llm);
    // Refuse at once what cannot run here, before any episode starts.
    for task in &tasks {
        task::requirements::ensure(task, &host.offer()).await?;
    }
    let agent_names: Vec<String> = plan.agents.iter().map(AgentEntry::name).collect();
    let mut agents = Vec::new();
    for agent in &plan.agents {
        agents.push(host.load_agent(agent.path()).await?);
    }

    let mut cells = Vec::new();
    for (t, task) in tasks.iter().enumerate() {
        for (a, agent) in agent_names.iter().enumerate() {
            for seed in plan.seeds.list() {
                cells.push(Cell {
                    id: episode_id(&task.spec.name, agent, seed),
                    task: t,
                    agent: a,
                    seed,
                });
            }
        }
    }
    let ids: Vec<String> = cells.iter().map(|c| c.id.clone()).collect();
    let state = match state {
        Some(state) => {
            if state.episodes != ids {
                bail!(
                    "{}: the plan's episodes no longer match the journal's (a task or agent changed name?)",
                    dir.display()
                );
            }
            state
        }
        None => {
            std::fs::write(&plan_path, serde_json::to_vec_pretty(&plan)?)?;
            let mut created = Journal::create(&journal_path)?;
            created.write(&Entry::Plan { episodes: ids.clone() })?;
            journal = Some(created);
            journal::State {
                episodes: ids.clone(),
                ..Default::default()
            }
        }
    };
    let journal = tokio::sync::Mutex::new(journal.context("journal")?);

    let cpu_total = plan
        .cpus
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
        .max(1);
    let bench = Bench {
        gpu_slots: tokio::sync::Semaphore::new(gpu_count),
        cpu_slots: tokio::sync::Semaphore::new(cpu_total as usize),
        cpu_total,
        plan,
        dir: dir.to_path_buf(),
        tasks,
        agent_names,
        agents,
        host,
    };
    let mut results: BTreeMap<String, ResultLine> = state.results.clone();

    // An episode that finished after its journal line could not be written
    // is adopted from its records; any other leftover is partial: removed.
    let mut pending = Vec::new();
    for cell in &cells {
        if results.contains_key(&cell.id) {
            continue;
        }
        let episode_dir = dir.join(&cell.id);
        if let Some(result) = bench.adopt(cell, &episode_dir) {
            journal.lock().await.write(&Entry::Done {
                id: cell.id.clone(),
                result: Box::new(result.clone()),
            })?;
            results.insert(cell.id.clone(), result);
        } else {
            if episode_dir.exists() {
                remove_settled(&episode_dir)
                    .with_context(|| format!("removing the partial episode {}", episode_dir.display()))?;
            }
            pending.push(cell.clone());
        }
    }

    let progress = Progress::new(cells.len() as u64, results.len() as u64, quiet);
    let stop = tokio_util::sync::CancellationToken::new();
    let ran = AtomicU32::new(0);
    let finished = {
        let work = futures_util::stream::iter(pending.iter())
            .map(|cell| {
                let attempts = state.attempts.get(&cell.id).copied().unwrap_or(0);
                bench.run_cell(cell, attempts, &journal, &progress, &stop, &ran)
            })
            .buffer_unordered(bench.plan.parallel)
            .collect::<Vec<_>>();
        tokio::pin!(interrupt);
        tokio::pin!(work);
        tokio::select! {
            done = &mut work => done,
            _ = &mut interrupt => {
                progress.note("interrupted: ending the running episodes; `mlrb bench --resume` redoes them");
                stop.cancel();
                work.await
            }
        }
    };
    progress.finish();
    for result in finished {
        if let Some(result) = result? {
            results.insert(result.id.clone(), result);
        }
    }

    let ordered: Vec<ResultLine> = ids.iter().filter_map(|id| results.get(id).cloned()).collect();
    write_outputs(dir, &ordered)?;
    Ok(Outcome {
        summary: metrics::summarize(&ordered),
        results: ordered,
        interrupted: stop.is_cancelled(),
        ran: ran.into_inner() as usize,
    })
}

/// Writes `results.jsonl`, `summary.json` and `report.html` (atomically).
pub fn write_outputs(dir: &Path, results: &[ResultLine]) -> Result<()> {
    let mut lines = Vec::new();
    for result in results {
        lines.extend(serde_json::to_vec(result)?);
        lines.push(b'\n');
    }
    let write = |name: &str, bytes: &[u8]| -> Result<()> {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, dir.join(name))?;
        Ok(())
    };
    write("results.jsonl", &lines)?;
    let summary = metrics::summarize(results);
    write("summary.json", &serde_json::to_vec_pretty(&summary)?)?;
    let title = format!(
        "mlrb bench {}",
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    write("report.html", html::render(&title, &summary, results).as_bytes())?;
    Ok(())
}

/// Reads `results.jsonl` of a run directory.
pub fn read_results(dir: &Path) -> Result<Vec<ResultLine>> {
    let path = dir.join("results.jsonl");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("{}: cannot read ({e}): is this a bench run directory?", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{}: line {}", path.display(), i + 1)))
        .collect()
}

impl Bench {
    fn adopt(&self, cell: &Cell, episode_dir: &Path) -> Option<ResultLine> {
        let record = EpisodeRecord::read(episode_dir).ok()?;
        record.end.as_ref()?;
        let score = ScoreRecord::read(episode_dir).ok()?;
        if score.end_reason == Some(crate::capability::session::EndReason::Interrupted) {
            return None;
        }
        Some(ResultLine::from_records(
            &cell.id,
            &self.agent_names[cell.agent],
            &cell.id,
            &record,
            &score,
        ))
    }

    /// Runs one episode, retrying infrastructure failures; None when the
    /// bench was interrupted before it had a final result.
    async fn run_cell(
        &self,
        cell: &Cell,
        previous_attempts: u32,
        journal: &tokio::sync::Mutex<Journal>,
        progress: &Progress,
        stop: &tokio_util::sync::CancellationToken,
        ran: &AtomicU32,
    ) -> Result<Option<ResultLine>> {
        let task = &self.tasks[cell.task];
        let episode_dir = self.dir.join(&cell.id);
        let mut attempt = previous_attempts;
        loop {
            if stop.is_cancelled() {
                return Ok(None);
            }
            attempt += 1;
            // An episode waits for its task's CPUs; a task needing more than
            // there are runs alone.
            let cpus = (task.spec.resources.cpus.ceil() as u32).clamp(1, self.cpu_total);
            let _cpu_slots = self.cpu_slots.acquire_many(cpus).await.context("CPU slots")?;
            // GPU tasks wait for free devices instead of failing.
            let _gpu_slots = if task.spec.resources.gpus > 0 {
                Some(
                    self.gpu_slots
                        .acquire_many(task.spec.resources.gpus)
                        .await
                        .context("GPU slots")?,
                )
            } else {
                None
            };
            journal.lock().await.write(&Entry::Start {
                id: cell.id.clone(),
                attempt,
            })?;
            ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let steps = Arc::new(AtomicU32::new(0));
            let max_steps = self.plan.max_steps.unwrap_or(task.spec.budget.max_steps);
            let line = progress.started(&cell.id, max_steps, steps.clone());
            let spec = EpisodeSpec {
                agent: self.plan.agents[cell.agent].path().to_path_buf(),
                task: task.clone(),
                seed: cell.seed,
                dir: episode_dir.clone(),
                limits: AgentLimits {
                    memory_bytes: self.plan.agent_memory_mb << 20,
                    max_steps: self.plan.max_steps,
                    wall_seconds: self.plan.wall_seconds,
                    llm_tokens: self.plan.llm_tokens,
                    llm_cost_usd: self.plan.llm_cost_usd,
                    ..AgentLimits::default()
                },
                progress: Some(steps),
            };
            let outcome = self
                .host
                .run_episode(&self.agents[cell.agent], &spec, stop.cancelled())
                .await;
            match outcome {
                Ok((record, score)) => {
                    if score.end_reason == Some(crate::capability::session::EndReason::Interrupted) {
                        progress.abandoned(line, &cell.id, "interrupted (redone on resume)");
                        return Ok(None);
                    }
                    let mut result =
                        ResultLine::from_records(&cell.id, &self.agent_names[cell.agent], &cell.id, &record, &score);
                    result.attempts = attempt;
                    journal.lock().await.write(&Entry::Done {
                        id: cell.id.clone(),
                        result: Box::new(result.clone()),
                    })?;
                    let what = match (result.score, &score.error) {
                        (Some(s), _) => format!("{} {s}", result.metric),
                        (None, Some(error)) => format!("no score ({error})"),
                        (None, None) => "no score".into(),
                    };
                    progress.finished(line, &cell.id, &what);
                    return Ok(Some(result));
                }
                Err(error) => {
                    let error = format!("{error:#}").replace('\n', " ");
                    journal.lock().await.write(&Entry::InfraFailure {
                        id: cell.id.clone(),
                        attempt,
                        error: error.clone(),
                    })?;
                    if episode_dir.exists() {
                        std::fs::remove_dir_all(&episode_dir)?;
                    }
                    if attempt > self.plan.retries {
                        let result = ResultLine::infra_failed(
                            &cell.id,
                            &task.spec.name,
                            &self.agent_names[cell.agent],
                            cell.seed,
                            &cell.id,
                            attempt,
                            &error,
                        );
                        journal.lock().await.write(&Entry::Done {
                            id: cell.id.clone(),
                            result: Box::new(result.clone()),
                        })?;
                        progress.finished(line, &cell.id, &format!("infrastructure failure, gave up: {error}"));
                        return Ok(Some(result));
                    }
                    progress.abandoned(line, &cell.id, &format!("infrastructure failure, retrying: {error}"));
                    tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
                }
            }
        }
    }
}

/// Removes a partial episode's folder. Scripts of a killed host die with it,
/// but not instantly: a file one of them writes while the folder is being
/// removed makes that fail with "not empty", so it is tried again, briefly.
fn remove_settled(dir: &Path) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match std::fs::remove_dir_all(dir) {
            Err(error) if error.kind() == std::io::ErrorKind::DirectoryNotEmpty && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            other => return other,
        }
    }
}
