//! A plan opened to run: its tasks and agents resolved, its sandbox and
//! model source open; one episode of it run with retries and journalled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::journal::{self, Entry, Journal};
use super::plan::{AgentEntry, Cell, Plan, matrix};
use super::progress::{self, Progress};
use super::result_line::ResultLine;
use crate::episode::{EndReason, EpisodeRecord, EpisodeRequest, LoadedAgent, Runner, ScoreRecord};
use crate::task::overrides::Configured;
use crate::task::{self, Task};

/// Everything a bench run needs, resolved.
pub(super) struct Bench {
    pub(super) plan: Plan,
    pub(super) dir: PathBuf,
    pub(super) tasks: Vec<Configured>,
    pub(super) agent_names: Vec<String>,
    /// Each agent's component; `None` for a person's recorded episodes.
    pub(super) agents: Vec<Option<Arc<LoadedAgent>>>,
    pub(super) runner: Runner,
    pub(super) gpu_slots: tokio::sync::Semaphore,
    pub(super) cpu_slots: tokio::sync::Semaphore,
    pub(super) cpu_total: u32,
}

impl Bench {
    /// Resolves the plan's tasks and agents and opens its sandbox and
    /// model source, refusing at once what cannot run here.
    pub(super) async fn open(plan: Plan, dir: &Path, cache_dir: &Path) -> Result<Self> {
        let (tasks, runner) = configured(&plan, cache_dir).await?;
        let plain: Vec<Task> = tasks.iter().map(|c| c.task.clone()).collect();
        let gpu_count = runner.gpu_count();
        // Refused here, before any episode starts, rather than once per episode.
        for task in &plain {
            task::requirements::ensure(task, &runner.offer()).await?;
        }
        let agent_names: Vec<String> = plan.agents.iter().map(AgentEntry::name).collect();
        super::humans::check_people(&plan, &tasks, "the plan")?;
        let mut agents = Vec::new();
        for agent in &plan.agents {
            match agent.person() {
                Some(_) => agents.push(None),
                None => agents.push(Some(runner.load_agent(agent.path()).await?)),
            }
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
    pub(super) fn cells(&self) -> Vec<Cell> {
        let tasks: Vec<String> = self.tasks.iter().map(|t| t.task.spec.name.clone()).collect();
        matrix(&tasks, &self.agent_names, &self.plan.seeds.list())
    }

    /// The journal so far (a resume's must list the same episodes), or a
    /// new one with the plan written beside it.
    pub(super) fn journal(
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
    /// other leftover is partial, and resumed from its last recorded step
    /// when it runs (or started again, saying why). Returns the cells to run.
    pub(super) async fn settle(
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
            // A person's episode is taken in as it was recorded.
            if let Some((name, episodes)) = self.plan.agents[cell.agent].person() {
                let task = &self.tasks[cell.task].task.spec.name;
                let from = super::humans::recorded(episodes, name, task, cell.seed);
                super::humans::copy_in(&from, &episode_dir)?;
            }
            same_profile(&episode_dir, self.plan.smoke)?;
            if let Some(result) = self.adopt(cell, &episode_dir) {
                let done = Entry::Done {
                    id: cell.id.clone(),
                    result: Box::new(result.clone()),
                };
                journal.lock().await.write(&done)?;
                results.insert(cell.id.clone(), result);
                continue;
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
    fn request(&self, cell: &Cell, progress: Arc<AtomicU32>) -> Result<EpisodeRequest> {
        let agent = self.agents[cell.agent]
            .clone()
            .with_context(|| format!("{}: a person's episode is not run, only taken in", cell.id))?;
        let configured = self.tasks[cell.task].clone();
        Ok(
            EpisodeRequest::new(agent, configured, cell.seed, self.dir.join(&cell.id))
                .with_progress(progress)
                .resuming(true),
        )
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
    pub(super) async fn run_cell(
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
            let _slots = self.slots(&self.tasks[cell.task].task).await?;
            journal.lock().await.write(&Entry::Start {
                id: cell.id.clone(),
                attempt,
                resumed_after_step: crate::episode::resume::resumable_after(&self.dir.join(&cell.id)),
            })?;
            ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let steps = Arc::new(AtomicU32::new(0));
            let request = self.request(cell, steps.clone())?.halted_by(stop);
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
            at.progress.abandoned(
                at.line,
                id,
                "interrupted (`mlrb bench --resume` goes on from its last step)",
            );
            return Ok(None);
        }
        // An evaluator that failed is the task's infrastructure failing, not
        // the agent: scored again up to the retries, then reported as such.
        let mut score = score.clone();
        let mut rescored = 0;
        while score.evaluator_failed && rescored < self.plan.retries {
            rescored += 1;
            at.progress.note(&format!("{id}: the evaluator failed; scoring again"));
            let task = &self.tasks[at.cell.task].task;
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
            crate::episode::resume::remove_records(&episode_dir)?;
        }
        if attempt <= self.plan.retries {
            at.progress
                .abandoned(at.line, &cell.id, &format!("infrastructure failure, retrying: {error}"));
            return Ok(None);
        }
        let task = &self.tasks[cell.task].task.spec.name;
        let agent = &self.agent_names[cell.agent];
        let mut result = ResultLine::infra_failed(&cell.id, task, agent, cell.seed, &cell.id, attempt, &error);
        result.smoke = self.plan.smoke;
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

/// The plan's tasks under its overrides, each in its smoke profile in a
/// smoke bench (its plan checked that each has one), and the runner that
/// opened their sandbox.
async fn configured(plan: &Plan, cache_dir: &Path) -> Result<(Vec<Configured>, Runner)> {
    let resolved: Vec<Task> = plan.tasks.iter().map(|t| task::resolve(t)).collect::<Result<_>>()?;
    let configure = |task: Task| Configured::new(task, &plan.limits);
    let plain: Vec<Task> = resolved
        .iter()
        .map(|t| configure(t.clone()).map(|c| c.task))
        .collect::<Result<_>>()?;
    let runner = plan.host.runner(cache_dir, &plain).await?;
    // The overrides apply to each task as its profile left it.
    let mut tasks = Vec::with_capacity(resolved.len());
    for task in resolved {
        tasks.push(configure(runner.profile(task, plan.smoke).await?)?);
    }
    Ok((tasks, runner))
}

/// Refuses an episode left in `dir` that ran in the other profile than
/// the bench's (`smoke`): smoke and real episodes never share a run.
fn same_profile(dir: &Path, smoke: bool) -> Result<()> {
    let Ok(record) = EpisodeRecord::read(dir) else {
        return Ok(());
    };
    let name = |smoke: bool| if smoke { "the smoke profile" } else { "real data" };
    if record.smoke != smoke {
        bail!(
            "{}: an episode of {} in a bench of {}: smoke and real episodes never share a run; move it elsewhere",
            dir.display(),
            name(record.smoke),
            name(smoke)
        );
    }
    Ok(())
}

/// One attempt at a cell, for the functions that journal how it went.
struct Attempted<'a> {
    cell: &'a Cell,
    attempt: u32,
    line: progress::EpisodeLine,
    journal: &'a tokio::sync::Mutex<Journal>,
    progress: &'a Progress,
}
