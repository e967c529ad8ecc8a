//! `mlrb bench`: every agent on every task over several seeds, run with a
//! bounded number of episodes at once, journalled so that a killed bench
//! resumes exactly, and summarised into `results.jsonl` and `summary.json`.

pub mod across;
pub mod compare;
pub mod epochs;
pub mod export;
pub mod html;
pub mod invalidate;
pub mod journal;
pub mod metrics;
pub mod placement;
pub mod plots;
pub mod profiles;
pub mod progress;
pub mod queue;
pub mod ranked;
#[cfg(test)]
mod sample;
pub mod scan;
pub mod verify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::episode::{
    EndReason, EpisodeRecord, EpisodeRequest, HostSetup, LoadedAgent, Runner, ScoreRecord, agent_name, episode_id,
};
use crate::limits::Overrides;
use crate::task::{self, Task};
use journal::{Entry, Journal};
use metrics::{ResultLine, Summary};
use progress::Progress;

/// An agent of the plan: a path, or a path and the name its results go by.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AgentEntry {
    /// An agent component's path; its results go by the file's stem.
    Path(PathBuf),
    /// An agent component's path and the name its results go by.
    Named {
        /// The agent component's path.
        path: PathBuf,
        /// The name its results go by.
        name: String,
    },
}

impl AgentEntry {
    /// The agent component's path.
    pub fn path(&self) -> &Path {
        match self {
            Self::Path(path) | Self::Named { path, .. } => path,
        }
    }
    /// The name the agent's results go by, made safe for a path component.
    pub fn name(&self) -> String {
        match self {
            Self::Named { name, .. } => crate::paths::safe_component(name),
            Self::Path(path) => agent_name(path),
        }
    }
}

/// Seeds: a count (`3` means 1, 2, 3) or an explicit list.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Seeds {
    /// Seeds 1 to n.
    Count(u64),
    /// These seeds.
    List(Vec<u64>),
}

impl Seeds {
    /// The seeds, in order.
    pub fn list(&self) -> Vec<u64> {
        match self {
            Self::Count(n) => (1..=*n).collect(),
            Self::List(list) => list.clone(),
        }
    }
}

/// What a bench runs: from `--plan plan.toml`, the command line, or both.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The agent components to run.
    pub agents: Vec<AgentEntry>,
    /// Built-in task names or task folder paths.
    pub tasks: Vec<String>,
    /// Seeds each agent runs each task with.
    #[serde(default = "default_seeds")]
    pub seeds: Seeds,
    /// Episodes run at once.
    #[serde(default = "one")]
    pub parallel: usize,
    /// CPU slots shared by running episodes; each takes its CPUs
    /// (`cpus`, else the task's `resources.cpus`, rounded up) [default: this machine's CPUs].
    #[serde(default)]
    pub cpu_slots: Option<u32>,
    /// Attempts after an infrastructure failure (never after the agent's own).
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// The sandbox, image, GPUs and model source (`sandbox = "docker"`, ...).
    #[serde(flatten)]
    pub host: HostSetup,
    /// What the plan changes of every task's limits (`max_steps = 3`, ...).
    #[serde(flatten)]
    pub limits: Overrides,
    /// Where the episodes run [default: `slurm` with a `[slurm]` table, else `local`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<placement::On>,
    /// The queue server, when the bench runs on a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<placement::ClusterSetup>,
    /// The Slurm job array of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<placement::SlurmSetup>,
    /// The Kubernetes Job of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k8s: Option<placement::K8sSetup>,
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            agents: Vec::new(),
            tasks: Vec::new(),
            seeds: default_seeds(),
            parallel: one(),
            cpu_slots: None,
            retries: default_retries(),
            host: HostSetup::default(),
            limits: Overrides::default(),
            on: None,
            cluster: None,
            slurm: None,
            k8s: None,
        }
    }
}

fn default_seeds() -> Seeds {
    Seeds::Count(1)
}
fn one() -> usize {
    1
}
fn default_retries() -> u32 {
    2
}

impl Plan {
    /// Reads a plan file, with one-line errors naming the file and field.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
        let table: toml::Table = toml::from_str(&text).map_err(|e| crate::task::spec::toml_error(path, &text, &e))?;
        let known = Self::fields();
        if let Some(unknown) = table.keys().find(|key| !known.contains(key)) {
            bail!(
                "{}: unknown field `{unknown}`; a plan has: {}",
                path.display(),
                known.join(", ")
            );
        }
        let plan: Self = toml::from_str(&text).map_err(|e| crate::task::spec::toml_error(path, &text, &e))?;
        Ok(plan)
    }

    /// The names a plan's fields go by, its own and those of the setup and
    /// limits it holds flattened.
    fn fields() -> Vec<String> {
        let mut names: Vec<String> = [
            "agents",
            "tasks",
            "seeds",
            "parallel",
            "cpu_slots",
            "retries",
            "on",
            "cluster",
            "slurm",
            "k8s",
        ]
        .map(String::from)
        .to_vec();
        let all_set = |value: serde_json::Value| -> Vec<String> {
            value
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        };
        // Every field named, so none is skipped when serialised.
        let host = HostSetup {
            sandbox: Some(Default::default()),
            image: Some(String::new()),
            gpus: vec![String::new()],
            python: Some(PathBuf::new()),
            config: Some(PathBuf::new()),
            llm: Some(String::new()),
        };
        let limits = Overrides {
            max_steps: Some(0),
            wall_seconds: Some(0),
            llm_tokens: Some(0),
            llm_cost_usd: Some(0.0),
            agent_memory_mb: Some(0),
            trace_mb: Some(0),
            cpus: Some(0.0),
            memory_mb: Some(0),
            script_timeout: Some(0),
            network: Some(false),
            network_allow: Some(Vec::new()),
            http_requests: Some(0),
            http_response_mb: Some(0),
            metric: Some(String::new()),
            direction: Some(crate::limits::Direction::Higher),
            range: Some(crate::limits::MetricRange([0.0, 1.0])),
        };
        names.extend(all_set(serde_json::to_value(host).unwrap_or_default()));
        names.extend(all_set(serde_json::to_value(limits).unwrap_or_default()));
        names
    }

    /// Where the episodes run: `on`, else Slurm when the plan has `[slurm]`.
    pub fn placement(&self) -> placement::On {
        match (self.on, &self.slurm) {
            (Some(on), _) => on,
            (None, Some(_)) => placement::On::Slurm,
            (None, None) => placement::On::Local,
        }
    }

    /// Refuses a plan that cannot run, saying what to fix.
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
        self.limits.check()?;
        if self.host.llm.as_deref().is_some_and(|l| l.starts_with("replay:")) {
            bail!(
                "`llm = \"replay:...\"` answers one recorded episode: replay it with `mlrb run --llm replay:<episode-dir>`"
            );
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

/// One episode of a plan by name: what a queue hands out with its id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSpec {
    /// The task's name.
    pub task: String,
    /// The agent's name in the run.
    pub agent: String,
    /// The seed.
    pub seed: u64,
}

/// The episodes of a plan, task by agent by seed, with their ids: known
/// without opening a sandbox (the tasks are only read).
pub fn plan_episodes(plan: &Plan) -> Result<Vec<(String, EpisodeSpec)>> {
    let tasks: Vec<String> = plan
        .tasks
        .iter()
        .map(|t| Ok(task::resolve(t)?.spec.name))
        .collect::<Result<_>>()?;
    let agents: Vec<String> = plan.agents.iter().map(AgentEntry::name).collect();
    Ok(matrix(&tasks, &agents, &plan.seeds.list())
        .into_iter()
        .map(|c| {
            let spec = EpisodeSpec {
                task: tasks[c.task].clone(),
                agent: agents[c.agent].clone(),
                seed: c.seed,
            };
            (c.id, spec)
        })
        .collect())
}

/// Every cell of tasks × agents × seeds, in run order.
fn matrix(tasks: &[String], agents: &[String], seeds: &[u64]) -> Vec<Cell> {
    let mut cells = Vec::new();
    for (t, task) in tasks.iter().enumerate() {
        for (a, agent) in agents.iter().enumerate() {
            for &seed in seeds {
                cells.push(Cell {
                    id: episode_id(task, agent, seed),
                    task: t,
                    agent: a,
                    seed,
                });
            }
        }
    }
    cells
}

/// Everything a bench run needs, resolved.
struct Bench {
    plan: Plan,
    dir: PathBuf,
    tasks: Vec<Task>,
    agent_names: Vec<String>,
    agents: Vec<Arc<LoadedAgent>>,
    runner: Runner,
    gpu_slots: tokio::sync::Semaphore,
    cpu_slots: tokio::sync::Semaphore,
    cpu_total: u32,
}

/// What `run` did.
pub struct Outcome {
    /// The metrics of the run.
    pub summary: Summary,
    /// The result line of each finished episode, in plan order.
    pub results: Vec<ResultLine>,
    /// Whether the bench was interrupted before every episode ended.
    pub interrupted: bool,
    /// Episodes run by this invocation (not adopted or already done).
    pub ran: usize,
}

/// Where a bench starts from: its plan, and for a resume the journal so far.
struct Start {
    plan: Plan,
    state: Option<journal::State>,
    journal: Option<Journal>,
}

/// A new bench's plan, checked, or the plan and journal of the one in `dir`.
fn start(plan: Option<Plan>, dir: &Path) -> Result<Start> {
    let journal_path = dir.join("journal.jsonl");
    if let Some(plan) = plan {
        plan.check()?;
        if journal_path.exists() {
            bail!(
                "{}: already holds a bench: resume it with `mlrb bench --resume {}`, or choose another --run-name",
                dir.display(),
                dir.display()
            );
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        return Ok(Start {
            plan,
            state: None,
            journal: None,
        });
    }
    let plan_path = dir.join("plan.json");
    let text = std::fs::read_to_string(&plan_path).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot read ({e}): is this a bench run directory?",
            plan_path.display()
        )
    })?;
    let plan: Plan =
        serde_json::from_str(&text).with_context(|| format!("{}: not a bench plan", plan_path.display()))?;
    Ok(Start {
        plan,
        state: Some(journal::read(&journal_path)?),
        journal: Some(Journal::append_to(&journal_path)?),
    })
}

/// Starts a new bench in `dir` (which must not hold one), or resumes the
/// one there. `interrupt` resolving stops it: running episodes end as
/// interrupted and are redone by a resume.
pub async fn run(
    plan: Option<Plan>,
    dir: &Path,
    cache_dir: &Path,
    quiet: bool,
    rerun_stale: bool,
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<Outcome> {
    let Start { plan, state, journal } = start(plan, dir)?;
    let bench = Bench::open(plan, dir, cache_dir).await?;
    let cells = bench.cells();
    let ids: Vec<String> = cells.iter().map(|c| c.id.clone()).collect();
    let (state, journal) = bench.journal(&ids, state, journal)?;
    let journal = tokio::sync::Mutex::new(journal);
    let mut results: BTreeMap<String, ResultLine> = state.results.clone();
    stale_results(dir, &mut results, rerun_stale)?;
    let pending = bench.settle(&cells, &mut results, &journal).await?;
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

/// Marks the results whose episodes were invalidated; with `rerun`, sets
/// those episodes aside (`<seed>.stale-<n>`, kept as evidence) and drops
/// their results, so they run again.
fn stale_results(dir: &Path, results: &mut BTreeMap<String, ResultLine>, rerun: bool) -> Result<()> {
    for result in results.values_mut() {
        result.stale = crate::episode::StaleMark::read(&dir.join(&result.dir)).map(|m| m.reason);
    }
    if !rerun {
        return Ok(());
    }
    let stale: Vec<String> = results
        .iter()
        .filter(|(_, r)| r.stale.is_some())
        .map(|(id, _)| id.clone())
        .collect();
    for id in stale {
        let episode = dir.join(&id);
        let aside = (1..)
            .map(|n| {
                episode.with_file_name(format!(
                    "{}.stale-{n}",
                    episode.file_name().unwrap_or_default().to_string_lossy()
                ))
            })
            .find(|p| !p.exists())
            .unwrap_or_default();
        std::fs::rename(&episode, &aside)
            .with_context(|| format!("setting the stale episode {} aside", episode.display()))?;
        results.remove(&id);
    }
    Ok(())
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
    /// Resolves the plan's tasks and agents and opens its sandbox and
    /// model source, refusing at once what cannot run here.
    async fn open(plan: Plan, dir: &Path, cache_dir: &Path) -> Result<Self> {
        let tasks: Vec<Task> = plan
            .tasks
            .iter()
            .map(|t| {
                let task = task::resolve(t)?;
                task.check_overrides(&plan.limits)?;
                Ok(task.with_overrides(&plan.limits))
            })
            .collect::<Result<_>>()?;
        let runner = plan.host.runner(cache_dir, &tasks).await?;
        let gpu_count = runner.gpu_count();
        // Refused here, before any episode starts, rather than once per episode.
        for task in &tasks {
            task::requirements::ensure(task, &runner.offer()).await?;
        }
        let agent_names: Vec<String> = plan.agents.iter().map(AgentEntry::name).collect();
        let mut agents = Vec::new();
        for agent in &plan.agents {
            agents.push(runner.load_agent(agent.path()).await?);
        }
        let cpu_total = plan
            .cpu_slots
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
            .max(1);
        Ok(Self {
            gpu_slots: tokio::sync::Semaphore::new(gpu_count),
            cpu_slots: tokio::sync::Semaphore::new(cpu_total as usize),
            cpu_total,
            plan,
            dir: dir.to_path_buf(),
            tasks,
            agent_names,
            agents,
            runner,
        })
    }

    /// Every episode of the matrix, task by agent by seed.
    fn cells(&self) -> Vec<Cell> {
        let tasks: Vec<String> = self.tasks.iter().map(|t| t.spec.name.clone()).collect();
        matrix(&tasks, &self.agent_names, &self.plan.seeds.list())
    }

    /// The journal so far (a resume's must list the same episodes), or a
    /// new one with the plan written beside it.
    fn journal(
        &self,
        ids: &[String],
        state: Option<journal::State>,
        journal: Option<Journal>,
    ) -> Result<(journal::State, Journal)> {
        if let (Some(state), Some(journal)) = (state, journal) {
            if state.episodes != ids {
                bail!(
                    "{}: the plan's episodes no longer match the journal's (a task or agent changed name?)",
                    self.dir.display()
                );
            }
            return Ok((state, journal));
        }
        std::fs::write(self.dir.join("plan.json"), serde_json::to_vec_pretty(&self.plan)?)?;
        let mut created = Journal::create(&self.dir.join("journal.jsonl"))?;
        created.write(&Entry::Plan { episodes: ids.to_vec() })?;
        let state = journal::State {
            episodes: ids.to_vec(),
            ..Default::default()
        };
        Ok((state, created))
    }

    /// Settles what a killed bench left: an episode that finished after its
    /// journal line could not be written is adopted from its records; any
    /// other leftover is partial and removed. Returns the cells to run.
    async fn settle(
        &self,
        cells: &[Cell],
        results: &mut BTreeMap<String, ResultLine>,
        journal: &tokio::sync::Mutex<Journal>,
    ) -> Result<Vec<Cell>> {
        let mut pending = Vec::new();
        for cell in cells {
            if results.contains_key(&cell.id) {
                continue;
            }
            let episode_dir = self.dir.join(&cell.id);
            if let Some(result) = self.adopt(cell, &episode_dir) {
                let done = Entry::Done {
                    id: cell.id.clone(),
                    result: Box::new(result.clone()),
                };
                journal.lock().await.write(&done)?;
                results.insert(cell.id.clone(), result);
                continue;
            }
            if episode_dir.exists() {
                remove_settled(&episode_dir)
                    .with_context(|| format!("removing the partial episode {}", episode_dir.display()))?;
            }
            pending.push(cell.clone());
        }
        Ok(pending)
    }

    fn adopt(&self, cell: &Cell, episode_dir: &Path) -> Option<ResultLine> {
        let record = EpisodeRecord::read(episode_dir).ok()?;
        record.end.as_ref()?;
        let score = ScoreRecord::read(episode_dir).ok()?;
        if score.end_reason == Some(EndReason::Interrupted) {
            return None;
        }
        let agent = &self.agent_names[cell.agent];
        let mut result = ResultLine::from_records(&cell.id, agent, &cell.id, &record, &score);
        result.stale = crate::episode::StaleMark::read(episode_dir).map(|m| m.reason);
        Some(result)
    }

    /// The episode of `cell`, under the plan's overrides.
    fn request(&self, cell: &Cell, progress: Arc<AtomicU32>) -> EpisodeRequest {
        let agent = self.agents[cell.agent].clone();
        let task = self.tasks[cell.task].clone();
        EpisodeRequest::new(agent, task, cell.seed, self.dir.join(&cell.id), &self.plan.limits).with_progress(progress)
    }

    /// Waits for the CPU and GPU slots `task` needs; they are held until
    /// the permits are dropped. A task needing more CPUs than there are
    /// runs alone; GPU tasks wait for free devices instead of failing.
    async fn slots(
        &self,
        task: &Task,
    ) -> Result<(
        tokio::sync::SemaphorePermit<'_>,
        Option<tokio::sync::SemaphorePermit<'_>>,
    )> {
        let cpus = (task.spec.resources.cpus.ceil() as u32).clamp(1, self.cpu_total);
        let cpu = self.cpu_slots.acquire_many(cpus).await.context("CPU slots")?;
        let gpus = task.spec.resources.gpus;
        let gpu = match gpus {
            0 => None,
            n => Some(self.gpu_slots.acquire_many(n).await.context("GPU slots")?),
        };
        Ok((cpu, gpu))
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
        let mut attempt = previous_attempts;
        loop {
            if stop.is_cancelled() {
                return Ok(None);
            }
            attempt += 1;
            let _slots = self.slots(&self.tasks[cell.task]).await?;
            journal.lock().await.write(&Entry::Start {
                id: cell.id.clone(),
                attempt,
            })?;
            ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let steps = Arc::new(AtomicU32::new(0));
            let request = self.request(cell, steps.clone());
            let line = progress.started(&cell.id, request.limits.max_steps, steps);
            let outcome = self.runner.run_episode(&request, stop.cancelled()).await;
            let attempted = Attempted {
                cell,
                attempt,
                line,
                journal,
                progress,
            };
            match outcome {
                Ok((record, score)) => return self.finished(attempted, &record, &score).await,
                Err(error) => {
                    if let Some(gave_up) = self.failed(attempted, &error).await? {
                        return Ok(Some(gave_up));
                    }
                    tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt))).await;
                }
            }
        }
    }

    /// Journals an episode that ended (the agent's own failures included).
    async fn finished(
        &self,
        at: Attempted<'_>,
        record: &EpisodeRecord,
        score: &ScoreRecord,
    ) -> Result<Option<ResultLine>> {
        let id = &at.cell.id;
        if score.end_reason == Some(EndReason::Interrupted) {
            at.progress.abandoned(at.line, id, "interrupted (redone on resume)");
            return Ok(None);
        }
        // An evaluator that failed is the task's infrastructure failing, not
        // the agent: scored again up to the retries, then reported as such.
        let mut score = score.clone();
        let mut rescored = 0;
        while score.evaluator_failed && rescored < self.plan.retries {
            rescored += 1;
            at.progress.note(&format!("{id}: the evaluator failed; scoring again"));
            let task = &self.tasks[at.cell.task];
            let dir = self.dir.join(id);
            match self.runner.reevaluate(task, &dir, record).await {
                Ok(again) => {
                    again.write(&dir)?;
                    score = again;
                }
                Err(error) => tracing::warn!(%id, error = %format!("{error:#}"), "scoring again"),
            }
        }
        let mut result = ResultLine::from_records(id, &self.agent_names[at.cell.agent], id, record, &score);
        result.attempts = at.attempt + rescored;
        if score.evaluator_failed {
            result.infra_error = Some(format!(
                "the evaluator failed: {}",
                score.error.as_deref().unwrap_or("no reason given")
            ));
        }
        let done = Entry::Done {
            id: id.clone(),
            result: Box::new(result.clone()),
        };
        at.journal.lock().await.write(&done)?;
        let what = match (result.score, &score.error) {
            (Some(s), _) => format!("{} {s}", result.metric),
            (None, Some(error)) => format!("no score ({error})"),
            (None, None) => "no score".into(),
        };
        at.progress.finished(at.line, id, &what);
        Ok(Some(result))
    }

    /// Journals an infrastructure failure and clears the attempt; the final
    /// result once the retries are spent, else None (to retry).
    async fn failed(&self, at: Attempted<'_>, error: &anyhow::Error) -> Result<Option<ResultLine>> {
        let (cell, attempt) = (at.cell, at.attempt);
        let error = format!("{error:#}").replace('\n', " ");
        let failure = Entry::InfraFailure {
            id: cell.id.clone(),
            attempt,
            error: error.clone(),
        };
        at.journal.lock().await.write(&failure)?;
        let episode_dir = self.dir.join(&cell.id);
        if episode_dir.exists() {
            remove_settled(&episode_dir)?;
        }
        if attempt <= self.plan.retries {
            at.progress
                .abandoned(at.line, &cell.id, &format!("infrastructure failure, retrying: {error}"));
            return Ok(None);
        }
        let task = &self.tasks[cell.task].spec.name;
        let agent = &self.agent_names[cell.agent];
        let result = ResultLine::infra_failed(&cell.id, task, agent, cell.seed, &cell.id, attempt, &error);
        let done = Entry::Done {
            id: cell.id.clone(),
            result: Box::new(result.clone()),
        };
        at.journal.lock().await.write(&done)?;
        at.progress
            .finished(at.line, &cell.id, &format!("infrastructure failure, gave up: {error}"));
        Ok(Some(result))
    }
}

/// A plan opened to run any one of its episodes on request: what a
/// cluster worker runs the episodes it leases with. Episodes are written
/// under its own directory (with its own journal), retried after
/// infrastructure failures as in a local bench.
pub struct Matrix {
    bench: Bench,
    cells: Vec<Cell>,
    journal: tokio::sync::Mutex<Journal>,
    progress: Progress,
}

impl Matrix {
    /// Opens `plan` (its tasks, agents, sandbox and model source) to run
    /// episodes into `dir`, a new directory.
    pub async fn open(plan: Plan, dir: &Path, cache_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let bench = Bench::open(plan, dir, cache_dir).await?;
        let cells = bench.cells();
        let journal = Journal::create(&dir.join("journal.jsonl"))?;
        let progress = Progress::new(cells.len() as u64, 0, true);
        Ok(Self {
            bench,
            cells,
            journal: tokio::sync::Mutex::new(journal),
            progress,
        })
    }

    /// Where the folder of episode `id` is written.
    pub fn episode_dir(&self, id: &str) -> PathBuf {
        self.bench.dir.join(id)
    }

    /// The most CPUs and GPUs one episode of the plan takes.
    pub fn largest_episode(&self) -> (f64, u32) {
        let cpus = self
            .bench
            .tasks
            .iter()
            .map(|t| t.spec.resources.cpus)
            .fold(1.0, f64::max);
        let gpus = self
            .bench
            .tasks
            .iter()
            .map(|t| t.spec.resources.gpus)
            .max()
            .unwrap_or(0);
        (cpus, gpus)
    }

    /// The GPUs this host may hand out.
    pub fn gpu_count(&self) -> usize {
        self.bench.runner.gpu_count()
    }

    /// The longest wall-clock budget of an episode of the plan, in seconds.
    pub fn longest_episode_seconds(&self) -> u64 {
        // As `EpisodeRequest::new` sets it: the task's limits with the plan's overrides.
        self.bench
            .tasks
            .iter()
            .map(|t| t.limits().with(&self.bench.plan.limits).wall_seconds)
            .max()
            .unwrap_or(0)
    }

    /// Runs episode `id` to its final result (retrying infrastructure
    /// failures); None when `stop` ended it first.
    pub async fn run(&self, id: &str, stop: &tokio_util::sync::CancellationToken) -> Result<Option<ResultLine>> {
        let Some(cell) = self.cells.iter().find(|c| c.id == id) else {
            bail!("{id}: not an episode of this plan");
        };
        let ran = AtomicU32::new(0);
        self.bench
            .run_cell(cell, 0, &self.journal, &self.progress, stop, &ran)
            .await
    }
}

/// One attempt at a cell, for the functions that journal how it went.
struct Attempted<'a> {
    cell: &'a Cell,
    attempt: u32,
    line: progress::EpisodeLine,
    journal: &'a tokio::sync::Mutex<Journal>,
    progress: &'a Progress,
}

/// Removes a partial episode's folder. Scripts of a killed host die with it,
/// but not instantly: a file one of them writes while the folder is being
/// removed makes that fail with "not empty", so it is tried again, briefly.
fn remove_settled(dir: &Path) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match crate::record::walk::remove_tree(dir) {
            Err(error) if error.kind() == std::io::ErrorKind::DirectoryNotEmpty && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            other => return other,
        }
    }
}
