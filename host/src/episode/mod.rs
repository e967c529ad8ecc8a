//! One agent on one task: prepare, workspace, run under limits, record,
//! final snapshot, evaluate, and the records that say what happened.

pub mod records;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use wasmtime::component::ResourceTable;
use wasmtime::{Store, UpdateDeadline};
use wasmtime_wasi::WasiCtx;

use crate::capability::agent_log::AgentLog;
use crate::capability::exec::{ScriptLimits, ScriptRunner, episode_setup};
use crate::capability::limiter::MemoryLimiter;
use crate::capability::session::EndReason;
use crate::capability::workspace::{Workspace, WorkspaceLimits};
use crate::capability::{self, AgentPre, AgentState, EndEpisode, Session, TaskInfoRecord, ValidationPolicy, Validator};
use crate::engine::AgentEngine;
use crate::llm::LlmSource;
use crate::record::snapshot::{self, SnapshotLimits, SnapshotStore};
use crate::record::trace::Trace;
use crate::record::walk::Usage;
use crate::sandbox::Sandbox;
use crate::sandbox::gpu::{GpuLease, GpuPool};
use crate::task::requirements::{self, HostOffer};
use crate::task::{self, EvalRequest, Evaluation, Task};
pub use records::{EpisodeRecord, ScoreRecord};

/// How long past the deadline a stuck host call may take before the
/// episode is abandoned.
const DEADLINE_GRACE: Duration = Duration::from_secs(5);

/// Limits on the agent itself (its scripts are limited by the task).
#[derive(Debug, Clone, serde::Serialize)]
pub struct AgentLimits {
    /// Total linear memory of the agent component.
    pub memory_bytes: usize,
    /// Overrides the task's step budget.
    pub max_steps: Option<u32>,
    /// Overrides the task's wall-clock budget.
    pub wall_seconds: Option<u64>,
    /// Bytes of agent stdout/stderr kept in agent.log.
    pub log_bytes: u64,
    /// Overrides the task's LLM token budget (0: no limit).
    pub llm_tokens: Option<u64>,
    /// Overrides the task's LLM cost budget in USD (0: no limit).
    pub llm_cost_usd: Option<f64>,
    /// Bytes the agent's calls may add to the trace; past it the episode ends.
    pub trace_bytes: u64,
    /// Bytes of the final answer kept; a longer one is cut, with its length and hash.
    pub answer_bytes: usize,
}

impl Default for AgentLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 1 << 30,
            max_steps: None,
            wall_seconds: None,
            log_bytes: 4 << 20,
            llm_tokens: None,
            llm_cost_usd: None,
            trace_bytes: 256 << 20,
            answer_bytes: 1 << 20,
        }
    }
}

/// One episode to run.
#[derive(Debug, Clone)]
pub struct EpisodeSpec {
    pub agent: PathBuf,
    pub task: Task,
    pub seed: u64,
    /// `runs/<run-name>/<task>/<agent>/<seed>/`; must not hold an episode yet.
    pub dir: PathBuf,
    pub limits: AgentLimits,
    /// Receives the step count as the episode goes, for a progress display.
    pub progress: Option<Arc<std::sync::atomic::AtomicU32>>,
}

/// An agent component read from disk, compiled and checked against the world.
pub struct LoadedAgent {
    pub path: PathBuf,
    pub sha256: String,
    pub size: u64,
    pub from_cache: bool,
    pub load_ms: f64,
    pre: AgentPre<AgentState>,
}

/// The long-lived parts of a host process: engine, linker, sandbox, caches.
pub struct Host {
    engine: AgentEngine,
    linker: wasmtime::component::Linker<AgentState>,
    sandbox: Arc<dyn Sandbox>,
    cache_dir: PathBuf,
    gpus: GpuPool,
    llm: LlmSource,
}

impl Host {
    pub fn new(cache_dir: &Path, sandbox: Arc<dyn Sandbox>) -> Result<Self> {
        let engine = AgentEngine::new(cache_dir)?;
        let linker = capability::linker(engine.engine())?;
        Ok(Self {
            engine,
            linker,
            sandbox,
            cache_dir: cache_dir.to_path_buf(),
            gpus: GpuPool::default(),
            llm: LlmSource::None,
        })
    }

    /// Where episodes' completions come from (one source, so one set of
    /// provider limits, for every episode of this host).
    pub fn with_llm(mut self, llm: LlmSource) -> Self {
        self.llm = llm;
        self
    }

    /// Gives this host GPUs to hand out to episodes.
    pub fn with_gpus(mut self, gpus: GpuPool) -> Self {
        self.gpus = gpus;
        self
    }

    /// What this host offers a task, for the checks made before a run.
    pub fn offer(&self) -> HostOffer<'_> {
        HostOffer {
            sandbox: self.sandbox.as_ref(),
            gpus: &self.gpus,
        }
    }

    /// Holds the GPUs a task needs, or refuses before anything starts.
    fn lease_gpus(&self, task: &Task) -> Result<Option<GpuLease>> {
        let needed = task.spec.resources.gpus;
        if needed == 0 {
            return Ok(None);
        }
        self.gpus
            .acquire(needed)
            .map(Some)
            .with_context(|| format!("task {}", task.spec.name))
    }

    pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
        &self.sandbox
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// Reads, compiles (or loads from the cache) and type-checks an agent.
    pub async fn load_agent(&self, path: &Path) -> Result<LoadedAgent> {
        let started = Instant::now();
        let (bytes, sha256) = crate::engine::map_agent(path)?;
        let size = bytes.len() as u64;
        let loaded = self
            .engine
            .load(&bytes, &sha256)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))?;
        let instance_pre = self.linker.instantiate_pre(&loaded.component).map_err(|e| {
            anyhow::anyhow!(
                "{}: {}: it must be built for the {} world",
                path.display(),
                first_line(&format!("{:#}", anyhow::Error::from(e))),
                capability::WIT_PACKAGE
            )
        })?;
        let pre = AgentPre::new(instance_pre).map_err(|e| {
            anyhow::anyhow!(
                "{}: does not export the agent's `run` ({}): build it for the {} world",
                path.display(),
                first_line(&format!("{:#}", anyhow::Error::from(e))),
                capability::WIT_PACKAGE
            )
        })?;
        Ok(LoadedAgent {
            path: path.to_path_buf(),
            sha256,
            size,
            from_cache: loaded.from_cache,
            load_ms: started.elapsed().as_secs_f64() * 1000.0,
            pre,
        })
    }

    /// Runs one episode to its end and evaluates it. `interrupt` resolving
    /// ends the episode as interrupted (its records are still written).
    pub async fn run_episode(
        &self,
        agent: &LoadedAgent,
        spec: &EpisodeSpec,
        interrupt: impl std::future::Future<Output = ()>,
    ) -> Result<(EpisodeRecord, ScoreRecord)> {
        let dir = &spec.dir;
        if dir.join("episode.json").exists() {
            bail!(
                "{}: already holds an episode; choose another --run-name or --out",
                dir.display()
            );
        }
        let task = &spec.task;
        requirements::ensure(task, &self.offer()).await?;
        let gpus = self.lease_gpus(task)?;
        let prepared = task::prepare(task, self.sandbox.as_ref(), &self.cache_dir).await?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;

        let workspace_dir = dir.join("workspace");
        task::workspace::populate(task, &prepared, &workspace_dir)?;
        let resources = &task.spec.resources;
        let workspace_caps = Usage {
            entries: resources.workspace_files,
            bytes: resources.workspace_mb << 20,
            allocated_bytes: resources.workspace_mb << 20,
        };
        let workspace = Workspace::open(
            &workspace_dir,
            &dir.join("history"),
            &task.spec.files.read_only,
            WorkspaceLimits {
                max_workspace_bytes: workspace_caps.bytes,
                ..WorkspaceLimits::default()
            },
        )?;

        let max_steps = spec.limits.max_steps.unwrap_or(task.spec.budget.max_steps);
        let wall = Duration::from_secs(spec.limits.wall_seconds.unwrap_or(task.spec.budget.wall_seconds));
        let started = Instant::now();
        let deadline = started + wall;
        let script_limits = ScriptLimits {
            max_timeout: Duration::from_secs(resources.script_timeout_seconds),
            memory_bytes: resources.memory_mb << 20,
            max_processes: resources.pids,
            cpus: resources.cpus,
            network: resources.network,
            output_cap: 32 << 10,
            output_kill_bytes: 256 << 20,
            max_args: 256,
            max_arg_bytes: 64 << 10,
            max_total_arg_bytes: 256 << 10,
            workspace: workspace_caps,
        };
        let exec_dir = dir.join("exec");
        std::fs::create_dir_all(&exec_dir)?;
        let task_info = TaskInfoRecord {
            name: task.spec.name.clone(),
            version: task.spec.version.clone(),
            research_problem: task.spec.research_problem.clone(),
            metric: task.spec.metric.name.clone(),
            higher_is_better: task.spec.metric.higher_is_better,
            baseline: task.spec.metric.baseline,
            max_steps,
            wall_seconds: wall.as_secs(),
            llm_tokens: spec.limits.llm_tokens.unwrap_or(task.spec.budget.llm_tokens),
            llm_cost_usd: spec.limits.llm_cost_usd.unwrap_or(task.spec.budget.llm_cost_usd),
        };
        let devices = gpus.as_ref().map(|lease| lease.devices().to_vec()).unwrap_or_default();
        let setup = episode_setup(&dir.display().to_string(), &workspace, &script_limits, devices.clone());
        let episode_sandbox = self.sandbox.open_episode(setup).await?;
        let mut session = Session::new(
            workspace,
            ScriptRunner::new(episode_sandbox, script_limits.clone(), exec_dir),
            Trace::create(&dir.join("events.jsonl"), started, spec.limits.trace_bytes)?,
            SnapshotStore::with_limits(
                &dir.join("snapshots"),
                SnapshotLimits {
                    max_bytes: workspace_caps.bytes,
                    max_entries: workspace_caps.entries,
                    ..SnapshotLimits::default()
                },
            )?,
            task_info.clone(),
            started,
            deadline,
        );
        session.initial_snapshot()?;
        session.set_llm(self.llm.clone());
        if task.spec.validation.enabled {
            session.allow_validation(ValidationPolicy {
                validator: Arc::new(TaskValidator {
                    task: task.clone(),
                    sandbox: self.sandbox.clone(),
                    hidden: prepared.hidden.clone(),
                    cache_dir: self.cache_dir.clone(),
                    gpus: devices.clone(),
                    log_dir: dir.join("validate"),
                }),
                hide_score: task.spec.validation.hide_score,
                max_calls: task.spec.validation.max_calls,
            });
        }
        if let Some(progress) = &spec.progress {
            session.report_progress(progress.clone());
        }

        let mut record = EpisodeRecord::new(
            spec,
            agent,
            task,
            &prepared,
            &self.sandbox.describe(),
            max_steps,
            wall,
            &script_limits,
        );
        record.limits.llm_tokens = task_info.llm_tokens;
        record.limits.llm_cost_usd = task_info.llm_cost_usd;
        record.llm = self.llm.describe();
        record.write(dir)?;

        let log = AgentLog::create(&dir.join("agent.log"), spec.limits.log_bytes)?;
        let wasi = {
            use rand::SeedableRng;
            let mut builder = WasiCtx::builder();
            builder
                .stdout(log.clone())
                .stderr(log.clone())
                .secure_random(rand::rngs::StdRng::seed_from_u64(spec.seed))
                .insecure_random(rand::rngs::StdRng::seed_from_u64(spec.seed ^ 0x9e37_79b9_7f4a_7c15))
                .insecure_random_seed(u128::from(spec.seed) << 64 | u128::from(spec.seed))
                .allow_tcp(false)
                .allow_udp(false)
                .allow_ip_name_lookup(false);
            builder.build()
        };
        let state = AgentState {
            wasi,
            table: ResourceTable::new(),
            memory: MemoryLimiter::new(spec.limits.memory_bytes),
            session,
        };
        let mut store = Store::new(self.engine.engine(), state);
        store.limiter(|state| &mut state.memory);
        store.set_epoch_deadline(1);
        // Every epoch tick: stop the agent at the deadline, otherwise yield so
        // other tasks (and the interrupt) get their turn.
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= deadline {
                return Err(wasmtime::Error::new(EndEpisode {
                    reason: EndReason::Timeout,
                    detail: format!("the wall-clock budget of {} s ran out", wall.as_secs()),
                }));
            }
            Ok(UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now())))
        });

        let instantiate_started = Instant::now();
        let (reason, detail, answer) = {
            let info: capability::mlrb::agent::types::TaskInfo = task_info.into();
            let run = async {
                let agent = agent.pre.instantiate_async(&mut store).await?;
                agent.call_run(&mut store, &info).await
            };
            // The epoch callback stops wasm at the deadline and every host call
            // is bounded by it; this outer timeout only catches a stuck host call.
            tokio::select! {
                finished = tokio::time::timeout(wall + DEADLINE_GRACE, run) => match finished {
                    Ok(Ok(Ok(answer))) => (EndReason::Completed, String::new(), Some(answer)),
                    Ok(Ok(Err(message))) => (EndReason::AgentError, message, None),
                    Ok(Err(error)) => {
                        let (reason, detail) = classify_trap(&error, store.data().memory.denied().is_some());
                        (reason, detail, None)
                    }
                    Err(_) => (EndReason::Timeout, format!("the wall-clock budget of {} s ran out", wall.as_secs()), None),
                },
                _ = interrupt => (EndReason::Interrupted, "interrupted by the user".to_string(), None),
            }
        };
        // A step budget that ran out counts even if the agent then returned.
        let reason = if reason == EndReason::Completed && store.data().session.budget_hit() {
            EndReason::StepBudget
        } else {
            reason
        };
        tracing::info!(?reason, %detail, "agent finished");
        log.close();

        let state = store.into_data();
        let mut session = state.session;
        if let Err(error) = session.scripts.close().await {
            tracing::warn!(error = %format!("{error:#}"), "closing the episode's sandbox");
        }
        let final_snapshot = session.snapshot_now("final")?;
        let final_manifest = session.snapshots.last().context("no snapshot")?.id;
        session.trace.finish()?;
        let first_call_ms = session
            .first_call_at()
            .map(|t| t.saturating_duration_since(instantiate_started).as_secs_f64() * 1000.0);
        record.finish(
            reason,
            &detail,
            answer.as_deref(),
            &session,
            state.memory.peak(),
            log.dropped(),
            final_snapshot.unwrap_or(final_manifest),
            first_call_ms,
        );
        record.write(dir)?;

        let score = if reason == EndReason::Interrupted {
            ScoreRecord::not_evaluated(
                task,
                &record,
                "interrupted before evaluation: run `mlrb eval <episode-dir>` to score it",
            )
        } else {
            self.evaluate(task, dir, &record, &devices).await?
        };
        score.write(dir)?;
        Ok((record, score))
    }

    /// Scores an episode again (`mlrb eval`), holding the GPUs its task needs.
    pub async fn reevaluate(&self, task: &Task, dir: &Path, record: &EpisodeRecord) -> Result<ScoreRecord> {
        requirements::ensure(task, &self.offer()).await?;
        let lease = self.lease_gpus(task)?;
        let devices = lease.as_ref().map(|l| l.devices().to_vec()).unwrap_or_default();
        self.evaluate(task, dir, record, &devices).await
    }

    /// Scores an episode's final snapshot in a fresh sandbox that alone sees
    /// the hidden files.
    /// `gpus` are the devices the evaluator may use (the episode's).
    pub async fn evaluate(
        &self,
        task: &Task,
        dir: &Path,
        record: &EpisodeRecord,
        gpus: &[String],
    ) -> Result<ScoreRecord> {
        let prepared = task::prepare(task, self.sandbox.as_ref(), &self.cache_dir).await?;
        let snapshots = dir.join("snapshots");
        let manifest = snapshot::latest_manifest(&snapshots)?;
        let scratch = tempfile::Builder::new().prefix(".eval-").tempdir_in(dir)?;
        let final_workspace = scratch.path().join("workspace");
        snapshot::materialize_contained(&snapshots, &manifest, &final_workspace)?;
        let evaluation = task::evaluate(
            task,
            self.sandbox.as_ref(),
            EvalRequest {
                workspace: &final_workspace,
                hidden: &prepared.hidden,
                cache_dir: &self.cache_dir,
                log_prefix: Some(dir.join("eval")),
                gpus: gpus.to_vec(),
                timeout: None,
            },
        )
        .await?;
        Ok(ScoreRecord::from_evaluation(task, record, manifest.id, evaluation))
    }
}

/// Scores copies of an episode's workspace for `episode.validate()` with
/// the task's evaluator, like the final evaluation.
struct TaskValidator {
    task: Task,
    sandbox: Arc<dyn Sandbox>,
    hidden: PathBuf,
    cache_dir: PathBuf,
    gpus: Vec<String>,
    log_dir: PathBuf,
}

#[async_trait::async_trait]
impl Validator for TaskValidator {
    async fn validate(&self, workspace_copy: &Path, number: u32, timeout: Duration) -> Result<Evaluation> {
        std::fs::create_dir_all(&self.log_dir)?;
        task::evaluate(
            &self.task,
            self.sandbox.as_ref(),
            EvalRequest {
                workspace: workspace_copy,
                hidden: &self.hidden,
                cache_dir: &self.cache_dir,
                log_prefix: Some(self.log_dir.join(format!("{number:04}"))),
                gpus: self.gpus.clone(),
                timeout: Some(timeout),
            },
        )
        .await
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// Why a trapped agent stopped: a host request to end, its memory limit, or
/// a fault in the agent.
fn classify_trap(error: &wasmtime::Error, memory_denied: bool) -> (EndReason, String) {
    if let Some(end) = error.downcast_ref::<EndEpisode>() {
        return (end.reason, end.detail.clone());
    }
    let text = format!("{error:#}");
    if memory_denied {
        return (
            EndReason::MemoryLimit,
            format!("the agent ran out of its memory limit: {}", first_line(&text)),
        );
    }
    let cause = error
        .downcast_ref::<wasmtime::Trap>()
        .map(|trap| trap_in_words(*trap))
        .unwrap_or_else(|| first_line(&text).to_string());
    let context: Vec<&str> = text.lines().skip(1).take(2).map(str::trim).collect();
    let detail = if context.is_empty() {
        format!("the agent trapped: {cause}; its own output is in agent.log")
    } else {
        format!(
            "the agent trapped: {cause}; its own output is in agent.log ({})",
            context.join(" | ")
        )
    };
    (EndReason::Trap, detail)
}

/// What a WebAssembly trap means for someone who wrote the agent.
fn trap_in_words(trap: wasmtime::Trap) -> String {
    use wasmtime::Trap as T;
    match trap {
        T::UnreachableCodeReached => {
            "it reached an `unreachable` instruction, which is how a Rust panic, a C abort() or an uncaught Python exception ends".into()
        }
        T::StackOverflow => "it overflowed its call stack (runaway recursion)".into(),
        T::MemoryOutOfBounds => "it read or wrote memory outside its own (a bug in the agent or its runtime)".into(),
        T::IntegerDivisionByZero => "it divided an integer by zero".into(),
        T::IntegerOverflow => "an integer operation overflowed".into(),
        T::BadConversionToInteger => "it converted a NaN or out-of-range float to an integer".into(),
        T::IndirectCallToNull | T::BadSignature | T::TableOutOfBounds => {
            "it called a function through a bad pointer".into()
        }
        T::AllocationTooLarge => "it asked for an allocation larger than allowed".into(),
        T::InvalidChar => "it passed an invalid character to the host".into(),
        other => format!("a WebAssembly trap: {other}"),
    }
}
