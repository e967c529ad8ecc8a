//! The life of one episode: refuse what cannot run, prepare the task, make
//! the workspace and the sandbox, run the agent under its limits until it
//! returns, traps or runs out, take the final snapshot, record and score.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use wasmtime::{Store, UpdateDeadline};

use super::end::{EndReason, classify_trap};
use super::records::{EpisodeEnd, keep_answer};
use super::resume::{ResumePoint, ResumeRecord, remove_records};
use super::{EpisodeRecord, EpisodeRequest, LoadedAgent, Runner, ScoreRecord};
use crate::capability::agent_log::AgentLog;
use crate::capability::episode::TaskInfoRecord;
use crate::capability::exec::{ScriptRunner, episode_setup};
use crate::capability::files::WorkspaceFiles;
use crate::capability::recorder::{Recorder, Stop, end};
use crate::capability::replay::Replay;
use crate::capability::{AgentState, Parts, mlrb::agent::types::TaskInfo};
use crate::limits::Limits;
use crate::network::Tally;
use crate::record::recording::Recording;
use crate::record::snapshot::{self, SnapshotStore};
use crate::record::trace::Trace;
use crate::record::walk::DirHandle;
use crate::sandbox::Reach;
use crate::sandbox::egress::gateway::Gateway;
use crate::sandbox::egress::proxy::Resolver;
use crate::task::{self, Prepared, Task, requirements};
use serde_json::json;

/// How long past the deadline a stuck host call may take before the
/// episode is abandoned.
const DEADLINE_GRACE: Duration = Duration::from_secs(5);

/// How the agent's run ended, before it is recorded.
pub(super) struct Ended {
    pub(super) reason: EndReason,
    pub(super) detail: String,
    pub(super) answer: Option<String>,
}

/// The episode's network: the tally and resolver its scripts and agent share.
pub(super) type Network = (Arc<Tally>, Result<Resolver, String>);

/// The episode's files, the sandbox opened for its scripts, and its network.
pub(super) type FilesAndScripts = (WorkspaceFiles, ScriptRunner, Network);

/// What every episode's state is built around, fresh or resumed.
pub(super) struct Pieces {
    pub(super) recorder: Recorder,
    pub(super) files: WorkspaceFiles,
    pub(super) scripts: ScriptRunner,
    pub(super) network: Network,
}

/// How an episode starts: fresh (with the resumes of an earlier start that
/// could not go on, if any), or where a dead host left it.
pub(super) enum Start {
    Fresh(Vec<ResumeRecord>),
    Resume(Box<ResumePoint>),
    /// The agent's part ended and was recorded; the host died before
    /// scoring it.
    Ended(Box<EpisodeRecord>),
}

/// What one attempt at an episode came to.
enum Attempt {
    /// It ran to its end: its record, and whether it was interrupted.
    Ran(Box<EpisodeRecord>, bool),
    /// Its resume's replay diverged: it starts again from scratch, with
    /// these resumes recorded.
    Diverged(Vec<ResumeRecord>),
}

impl Runner {
    /// Runs one episode to its end and evaluates it. `interrupt` resolving
    /// ends the episode as interrupted (its records are still written).
    pub async fn run_episode(
        &self,
        request: &EpisodeRequest,
        interrupt: impl std::future::Future<Output = ()>,
    ) -> Result<(EpisodeRecord, ScoreRecord)> {
        let (dir, task) = (&request.dir, &request.task);
        let mut start = self.start_of(request)?;
        requirements::ensure(task, &self.offer()).await?;
        let lease = self.lease_gpus(task)?;
        let devices = lease.as_ref().map(|l| l.devices().to_vec()).unwrap_or_default();
        let prepared = task::prepare(task, self.sandbox.as_ref(), &self.cache_dir).await?;
        let mut interrupt = std::pin::pin!(interrupt);
        let (record, interrupted) = loop {
            match self
                .attempt(request, start, &prepared, &devices, interrupt.as_mut())
                .await?
            {
                Attempt::Ran(record, interrupted) => break (*record, interrupted),
                Attempt::Diverged(resumes) => {
                    remove_records(dir).with_context(|| format!("clearing {} to start again", dir.display()))?;
                    start = Start::Fresh(resumes);
                }
            }
        };
        let score = if interrupted {
            let why = "interrupted before evaluation: run `mlrb eval <episode-dir>` to score it";
            ScoreRecord::not_evaluated(task, &record, why)
        } else {
            self.evaluate(task, dir, &record, &devices).await?
        };
        score.write(dir)?;
        Ok((record, score))
    }

    /// Runs the agent once, fresh or resumed, and records how it ended.
    async fn attempt(
        &self,
        request: &EpisodeRequest,
        start: Start,
        prepared: &Prepared,
        devices: &[String],
        interrupt: impl std::future::Future<Output = ()>,
    ) -> Result<Attempt> {
        let dir = &request.dir;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // A resumed agent's replay prints its log again, from the start.
        let new_log = || AgentLog::create(&dir.join("agent.log"), request.limits.agent_log_bytes);
        let resumed = matches!(start, Start::Resume(_));
        let (mut state, mut record, log) = match start {
            // Nothing to run: it is scored as it was recorded.
            Start::Ended(record) => return Ok(Attempt::Ran(record, false)),
            Start::Fresh(resumes) => {
                let log = new_log()?;
                let state = self.agent_state(request, prepared, devices, &log).await?;
                let mut record = EpisodeRecord::new(request, prepared, self.sandbox.as_ref())?;
                record.resumes = resumes;
                (state, record, log)
            }
            Start::Resume(point) => {
                let record = point.commit(dir)?;
                tracing::info!(dir = %dir.display(), after_step = point.resume.after_step, "resuming");
                let log = new_log()?;
                let state = self.resumed_state(request, prepared, devices, &log, *point).await?;
                (state, record, log)
            }
        };
        record.llm = self.llm.describe();
        record.gpus = devices.to_vec();
        record.write(dir)?;
        state.recorder.halted_by(request.halt.clone());

        let instantiated = Instant::now();
        let (ended, state) = self.drive(&request.agent, state, &request.limits, interrupt).await;
        log.close();
        if resumed && state.recorder.is_replaying() && ended.reason != EndReason::Interrupted {
            let why = match ended.reason {
                EndReason::ReplayDiverged => format!("the replay diverged: {}", ended.detail),
                other => format!(
                    "the replay diverged: the agent ended ({}) with {} recorded calls still to make",
                    other.name(),
                    state.recorder.replay().map_or(0, |r| r.calls_left())
                ),
            };
            if let Err(error) = state.exec.runner.close().await {
                tracing::warn!(error = %format!("{error:#}"), "closing the episode's sandbox");
            }
            tracing::warn!(dir = %dir.display(), %why, "starting the resumed episode again");
            let mut resumes = record.resumes;
            if let Some(last) = resumes.last_mut() {
                last.restarted = Some(why);
            }
            return Ok(Attempt::Diverged(resumes));
        }
        let detail: String = ended.detail.chars().take(300).collect();
        tracing::info!(reason = %ended.reason.name(), %detail, "agent finished");
        let interrupted = ended.reason == EndReason::Interrupted;
        record.finish(close(state, ended, &request.limits, &log, instantiated).await?);
        record.write(dir)?;
        Ok(Attempt::Ran(Box::new(record), interrupted))
    }

    /// Everything the agent's store holds: the workspace, its sandbox, the
    /// recorder with its first snapshot, and each interface's state.
    async fn agent_state(
        &self,
        request: &EpisodeRequest,
        prepared: &Prepared,
        devices: &[String],
        log: &AgentLog,
    ) -> Result<AgentState> {
        let (dir, task, limits) = (&request.dir, &request.task, &request.limits);
        let workspace = dir.join("workspace");
        // A fork's workspace is its parent's snapshot after the fork's step.
        let forked_from = match &request.fork {
            None => {
                task::populate(task, prepared, &workspace)?;
                None
            }
            Some(fork) => {
                let parent = fork.parent.join("snapshots");
                let manifest = snapshot::read_manifest(&parent, fork.snapshot)?;
                snapshot::materialize_writable(&parent, &manifest, &workspace)?;
                Some(manifest)
            }
        };
        let (files, scripts, network) = self.files_and_scripts((dir, task, limits), devices, false).await?;
        let started = Instant::now();
        let snapshots = match (&request.fork, &forked_from) {
            (Some(fork), Some(manifest)) => {
                let parent = fork.parent.join("snapshots");
                let mut store = SnapshotStore::forked(&dir.join("snapshots"), &parent, fork.snapshot, limits)?;
                store.remember_materialized(&workspace, manifest);
                store
            }
            _ => SnapshotStore::create(&dir.join("snapshots"), limits)?,
        };
        let trace = Trace::create(&dir.join("events.jsonl"), started, limits.trace_bytes)?;
        let mut recorder = new_recorder(request, trace, snapshots, started);
        let task_info = begin_record(&mut recorder, request, files.handle())?;
        Ok(self.state(
            request,
            prepared,
            devices,
            log,
            Pieces {
                recorder,
                files,
                scripts,
                network,
            },
            task_info,
        ))
    }

    /// The episode's files (its workspace, made), the sandbox opened for
    /// its scripts, and its network.
    pub(super) async fn files_and_scripts(
        &self,
        (dir, task, limits): (&Path, &Task, &Limits),
        devices: &[String],
        resumed: bool,
    ) -> Result<FilesAndScripts> {
        let files = WorkspaceFiles::open(
            &dir.join("workspace"),
            &dir.join("history"),
            &task.spec.files.read_only,
            limits.clone(),
        )?;
        let exec_dir = dir.join("exec");
        std::fs::create_dir_all(&exec_dir)?;
        let (tally, resolver, gateway) = episode_network(limits)?;
        let reach = gateway.as_ref().map_or(Reach::Nothing, |g| Reach::Proxy(g.socket()));
        let mut setup = episode_setup(&dir.display().to_string(), &files, limits, devices.to_vec(), reach);
        // The agent's scripts run as the task's own do: its environment,
        // and in the smoke profile the stand-in hub.
        let (hub_mounts, profile) = task.episode_profile();
        setup.mounts.extend(hub_mounts);
        let sandbox = self.sandbox.open_episode(setup).await?;
        let mut scripts = ScriptRunner::new(sandbox, limits.clone(), exec_dir).in_profile(profile);
        if resumed {
            scripts = scripts.numbered_after_existing_logs();
        }
        Ok((files, scripts.with_gateway(gateway), (tally, resolver)))
    }

    /// Each interface's state around the episode's recorder, files and scripts.
    pub(super) fn state(
        &self,
        request: &EpisodeRequest,
        prepared: &Prepared,
        devices: &[String],
        log: &AgentLog,
        pieces: Pieces,
        task_info: TaskInfoRecord,
    ) -> AgentState {
        let Pieces {
            recorder,
            files,
            scripts,
            network,
        } = pieces;
        let task = &request.task;
        let validation =
            (task.spec.validation.enabled).then(|| self.validation_policy(task, prepared, devices, &request.dir));
        AgentState::new(Parts {
            limits: &request.limits,
            seed: request.seed,
            log,
            recorder,
            files,
            scripts,
            task: task_info,
            validation,
            llm: self.llm.clone(),
            network,
        })
    }

    /// Runs the agent until it returns, traps, runs out of time or is
    /// interrupted; how it ended, and its state for the records.
    pub(super) async fn drive(
        &self,
        agent: &LoadedAgent,
        state: AgentState,
        limits: &Limits,
        interrupt: impl std::future::Future<Output = ()>,
    ) -> (Ended, AgentState) {
        let info: TaskInfo = state.episode.task_info.clone().into();
        // A replay (a fork's, a resume's) runs before the budget's clock goes on.
        let outer = match state.recorder.is_replaying() {
            true => limits.wall() * 2 + DEADLINE_GRACE,
            false => limits.wall() + DEADLINE_GRACE,
        };
        let mut store = agent_store(self.engine.engine(), state, limits.wall());
        let run = async {
            let instance = agent.pre.instantiate_async(&mut store).await?;
            instance.call_run(&mut store, &info).await
        };
        let ran_out = || format!("the wall-clock budget of {} s ran out", limits.wall_seconds);
        // The epoch callback stops wasm at the deadline and every host call
        // is bounded by it; this outer timeout only catches a stuck host call.
        let (reason, detail, answer) = tokio::select! {
            finished = tokio::time::timeout(outer, run) => match finished {
                Ok(Ok(Ok(answer))) => (EndReason::Completed, String::new(), Some(answer)),
                Ok(Ok(Err(message))) => (EndReason::AgentError, message, None),
                Ok(Err(error)) => {
                    let (reason, detail) = classify_trap(&error, store.data().memory.denied().is_some());
                    (reason, detail, None)
                }
                Err(_) => (EndReason::Timeout, ran_out(), None),
            },
            _ = interrupt => (EndReason::Interrupted, "interrupted by the user".to_string(), None),
        };
        let state = store.into_data();
        // A step budget that ran out counts even if the agent then returned.
        let reason = match reason {
            EndReason::Completed if state.recorder.budget_hit() => EndReason::StepBudget,
            other => other,
        };
        (Ended { reason, detail, answer }, state)
    }
}

/// The first records of an episode, and the task the agent is told of: a
/// fresh one snapshots its workspace and records the task it is given; a
/// fork of the same agent replays the parent's first steps (the task as
/// the parent was told it); a fork with another agent starts fresh at the
/// parent's step count.
/// The recorder of an episode's trace and snapshots (long strings kept
/// among the snapshots' objects), publishing its step count.
pub(super) fn new_recorder(
    request: &EpisodeRequest,
    trace: Trace,
    snapshots: SnapshotStore,
    started: Instant,
) -> Recorder {
    let limits = &request.limits;
    let trace = trace.keeping_objects(snapshots.objects_dir());
    let mut recorder = Recorder::new(trace, snapshots, limits.max_steps, started, started + limits.wall());
    if let Some(progress) = &request.progress {
        recorder.report_progress(progress.clone());
    }
    recorder
}

/// The episode's network: one tally and one resolver, which its egress proxy
/// (started when the task grants a network) and its agent's wasi:http share.
type EpisodeNetwork = (Arc<Tally>, Result<Resolver, String>, Option<Gateway>);

fn episode_network(limits: &Limits) -> Result<EpisodeNetwork> {
    let tally = Tally::shared();
    let resolver = Resolver::from_environment().map_err(|e| format!("{e:#}"));
    let gateway = match limits.network.allow_list() {
        Some(grant) => {
            let resolved = resolver.clone().map_err(anyhow::Error::msg)?;
            Some(Gateway::with_resolver(grant.clone(), resolved, tally.clone())?)
        }
        None => None,
    };
    Ok((tally, resolver, gateway))
}

fn begin_record(recorder: &mut Recorder, request: &EpisodeRequest, root: &DirHandle) -> Result<TaskInfoRecord> {
    let fresh = task_info(&request.task, &request.limits);
    let run = run_event(request, &fresh);
    let Some(fork) = &request.fork else {
        recorder.snapshot_now(root, "start")?;
        recorder.record_host("run", run);
        return Ok(fresh);
    };
    // From step 0 there is nothing to replay: the agent starts fresh.
    if fork.new_agent || fork.at_step == 0 {
        recorder.start_at_step(fork.at_step);
        let root = recorder.snapshots.last().map(|m| m.root.clone());
        let origin = json!({ "parent": fork.parent, "at_step": fork.at_step, "snapshot": fork.snapshot, "root": root });
        recorder.record_host("fork", origin);
        recorder.record_host("run", run);
        return Ok(fresh);
    }
    let recording = Recording::open(&fork.parent)?;
    let told = recorded_task(&recording)?;
    recorder.replaying(Replay::new(recording, Some(fork.at_step)))?;
    Ok(told)
}

/// The trace's `host run` event: the task the agent is told of and its
/// seed, and, in the smoke profile only, `smoke: true`, which binds
/// `episode.json`'s and `score.json`'s mark to the hash chain.
fn run_event(request: &EpisodeRequest, told: &TaskInfoRecord) -> serde_json::Value {
    let mut run = json!({ "task": told, "seed": request.seed });
    if request.task.smoke() {
        run["smoke"] = json!(true);
    }
    run
}

/// The task a recorded episode's agent was told of (its `host run` event).
pub(super) fn recorded_task(recording: &Recording) -> Result<TaskInfoRecord> {
    let run = recording
        .events
        .iter()
        .find(|e| e["interface"] == "host" && e["function"] == "run")
        .with_context(|| format!("{}: the recording holds no `host run` event", recording.dir.display()))?;
    serde_json::from_value(run["args"]["task"].clone())
        .with_context(|| format!("{}: its `host run` event does not parse", recording.dir.display()))
}

/// A store that caps the agent's memory and, at every epoch tick, stops it
/// at the deadline or yields so other tasks (and the interrupt) run.
fn agent_store(engine: &wasmtime::Engine, state: AgentState, wall: Duration) -> Store<AgentState> {
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.memory);
    store.set_epoch_deadline(1);
    // Read at each tick: a resumed episode's deadline moves when it goes live.
    store.epoch_deadline_callback(move |store| {
        if Instant::now() >= store.data().recorder.deadline {
            return Err(end(
                Stop::Timeout,
                format!("the wall-clock budget of {} s ran out", wall.as_secs()),
            ));
        }
        Ok(UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now())))
    });
    store
}

/// Closes the sandbox, takes the final snapshot and says how it all ended.
pub(super) async fn close(
    state: AgentState,
    ended: Ended,
    limits: &Limits,
    log: &AgentLog,
    instantiated: Instant,
) -> Result<EpisodeEnd> {
    if let Err(error) = state.exec.runner.close().await {
        tracing::warn!(error = %format!("{error:#}"), "closing the episode's sandbox");
    }
    // Tunnels the sandbox held open end with it: recorded once they have.
    let late = state.exec.runner.last_connections().await;
    let network = state.exec.runner.network_use();
    let AgentState {
        mut recorder,
        files,
        memory,
        episode,
        llm,
        table,
        http,
        ..
    } = state;
    // The agent's HTTP responses it still held end with its resources:
    // their exchanges are recorded below, with everything else it observed.
    drop(table);
    // The host's own closing records are written even when it is stopping.
    recorder.halted_by(None);
    http.settle(Duration::from_secs(2)).await;
    if let Some(connections) = late {
        recorder.record_host("egress", connections);
    }
    recorder.record_observed(true).map_err(|e| anyhow::anyhow!("{e}"))?;
    let taken = recorder.snapshot_now(files.handle(), "final")?;
    let last = recorder.snapshots.last().context("no snapshot")?;
    let (final_snapshot, final_root) = (taken.unwrap_or(last.id), last.root.clone());
    recorder.trace.finish()?;
    let chain_head = recorder.trace.head().to_string();
    let first_call_ms = recorder
        .first_call_at()
        .map(|t| t.saturating_duration_since(instantiated).as_secs_f64() * 1000.0);
    let (answer, answer_cut) = keep_answer(ended.answer.as_deref(), limits.answer_bytes);
    // An agent's error message is its words too: kept under the same cap.
    let (detail, detail_cut) = keep_answer(Some(&ended.detail), limits.answer_bytes);
    Ok(EpisodeEnd {
        reason: ended.reason,
        detail: detail.unwrap_or_default(),
        detail_cut,
        answer,
        answer_cut,
        steps: recorder.steps(),
        notes: episode.notes(),
        wall_ms: recorder.started.elapsed().as_millis() as u64,
        agent_memory_peak_bytes: memory.peak(),
        agent_log_dropped_bytes: log.dropped(),
        final_snapshot,
        final_root,
        chain_head,
        first_call_ms,
        validations: episode.validations().to_vec(),
        llm: llm.usage,
        network,
    })
}

/// What the agent is told about its task.
pub(super) fn task_info(task: &Task, limits: &Limits) -> TaskInfoRecord {
    TaskInfoRecord {
        name: task.spec.name.clone(),
        version: task.spec.version.clone(),
        research_problem: task.spec.research_problem.clone(),
        metric: task.spec.metric.name.clone(),
        higher_is_better: task.spec.metric.higher_is_better,
        baseline: task.spec.metric.baseline,
        max_steps: limits.max_steps,
        wall_seconds: limits.wall_seconds,
        llm_tokens: limits.llm_tokens,
        llm_cost_usd: limits.llm_cost_usd,
    }
}
