//! `mlrb replay`: a recorded episode run again, hermetically. The same
//! agent component runs with every host call answered from the recording:
//! no script runs, no model is called, no clock is read, nothing is written
//! to the episode. The first call that differs ends the replay, naming it; a
//! replay that finishes is compared with how the recording ended.

use std::path::Path;
use std::time::Instant;

use anyhow::{Result, bail};
use serde::Serialize;
use serde_json::Value;

use super::end::EndReason;
use super::records::{EpisodeEnd, keep_answer};
use super::run::recorded_task;
use super::{EpisodeRecord, LoadedAgent, Runner};
use crate::capability::agent_log::AgentLog;
use crate::capability::exec::ScriptRunner;
use crate::capability::files::WorkspaceFiles;
use crate::capability::recorder::Recorder;
use crate::capability::replay::Replay;
use crate::capability::{AgentState, Parts};
use crate::llm::LlmSource;
use crate::network::Tally;
use crate::record::recording::Recording;
use crate::record::snapshot::{self, SnapshotStore};
use crate::record::trace::Trace;
use crate::sandbox::egress::proxy::Resolver;
use crate::sandbox::{EpisodeSandbox, Exec, Outcome};

/// What a replay found.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    /// The episode replayed.
    pub episode: String,
    /// Empty when the replay is identical to the recording; else each
    /// difference, the first call that diverged first.
    pub differences: Vec<String>,
    /// Recorded calls answered.
    pub calls: usize,
    /// Steps the replayed agent took.
    pub steps: u32,
    /// How long the replay took, in milliseconds.
    pub wall_ms: f64,
    /// How long the recorded episode took, in milliseconds.
    pub recorded_wall_ms: u64,
}

impl ReplayReport {
    /// Whether the replay did exactly what the recording did.
    pub fn identical(&self) -> bool {
        self.differences.is_empty()
    }
}

/// A sandbox that runs nothing: in a replay every script's result comes
/// from the recording, so reaching this is a bug worth a loud error.
pub struct Hermetic;

#[async_trait::async_trait]
impl crate::sandbox::Sandbox for Hermetic {
    fn describe(&self) -> String {
        "none (a replay runs no script)".into()
    }

    async fn run(&self, _: crate::sandbox::Command) -> Result<Outcome> {
        bail!("a replay runs no script: every result comes from the recording")
    }

    async fn open_episode(&self, _: crate::sandbox::EpisodeSetup) -> Result<Box<dyn EpisodeSandbox>> {
        Ok(Box::new(Hermetic))
    }
}

#[async_trait::async_trait]
impl EpisodeSandbox for Hermetic {
    async fn exec(&self, _: Exec) -> Result<Outcome> {
        bail!("a replay runs no script: every result comes from the recording")
    }

    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

impl Runner {
    /// A runner that can replay and nothing else: no sandbox, no model.
    pub fn hermetic(cache_dir: &Path) -> Result<Self> {
        Self::new(cache_dir, std::sync::Arc::new(Hermetic))
    }

    /// Replays the episode in `dir` with `agent`, which must be the
    /// component it ran (same SHA-256).
    pub async fn replay(&self, dir: &Path, agent: &LoadedAgent) -> Result<ReplayReport> {
        let record = EpisodeRecord::read(dir)?;
        let Some(recorded) = record.end.clone() else {
            bail!(
                "{}: this episode never ended ({}); only an ended episode can be replayed",
                dir.display(),
                record.status()
            );
        };
        if agent.sha256 != record.agent.sha256 {
            bail!(
                "{}: the episode ran the agent with SHA-256 {}, but {} has {}: replay needs the same component (`mlrb fork --agent` runs another)",
                dir.display(),
                record.agent.sha256,
                agent.path.display(),
                agent.sha256
            );
        }
        let recording = Recording::open(dir)?;
        let recorded_random = last_event(&recording, "wasi", "random").map(|e| e["result"].clone());
        let chained_root = last_event(&recording, "host", "snapshot").map(|e| e["args"]["root"].clone());
        let scratch = tempfile::Builder::new().prefix("mlrb-replay-").tempdir()?;
        let state = replay_state(&record, &recorded, recording, scratch.path())?;
        let started = Instant::now();
        let (ended, state) = self.drive(agent, state, &record.limits, std::future::pending()).await;
        let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
        let calls = state.recorder.replay().map_or(0, |r| r.calls_answered());
        let steps = state.recorder.steps();
        let differences = differences(dir, &record, &ended, &state, (recorded_random, chained_root));
        Ok(ReplayReport {
            episode: dir.display().to_string(),
            differences,
            calls,
            steps,
            wall_ms,
            recorded_wall_ms: recorded.wall_ms,
        })
    }
}

/// The agent's store for a replay: an empty workspace and a trace in
/// `scratch`, no sandbox, no model, the recording answering every call.
fn replay_state(
    record: &EpisodeRecord,
    recorded: &EpisodeEnd,
    recording: Recording,
    scratch: &Path,
) -> Result<AgentState> {
    let limits = &record.limits;
    let workspace = scratch.join("workspace");
    std::fs::create_dir_all(&workspace)?;
    let files = WorkspaceFiles::open(&workspace, &scratch.join("history"), &[], limits.clone())?;
    let log = AgentLog::create(&scratch.join("agent.log"), limits.agent_log_bytes)?;
    let scripts = ScriptRunner::new(Box::new(Hermetic), limits.clone(), scratch.join("exec"));
    let started = Instant::now();
    let snapshots = SnapshotStore::create(&scratch.join("snapshots"), limits)?;
    let trace = Trace::create(&scratch.join("events.jsonl"), started, u64::MAX)?;
    let mut recorder = Recorder::new(trace, snapshots, limits.max_steps, started, started + limits.wall());
    let told = recorded_task(&recording)?;
    let mut replay = Replay::new(recording, None);
    replay.ending = recorded.reason.stop().map(|stop| (stop, recorded.detail.clone()));
    recorder.replaying(replay)?;
    Ok(AgentState::new(Parts {
        limits,
        seed: record.seed,
        log: &log,
        recorder,
        files,
        scripts,
        task: told,
        validation: None,
        llm: LlmSource::None,
        network: (
            Tally::shared(),
            Resolver::from_environment().map_err(|e| format!("{e:#}")),
        ),
    }))
}

/// The last `interface function` event of a recording.
fn last_event(recording: &Recording, interface: &str, function: &str) -> Option<Value> {
    recording
        .events
        .iter()
        .rev()
        .find(|e| e["interface"] == interface && e["function"] == function)
        .cloned()
}

/// Every way the replay's end differs from the recording's; a divergence
/// (a call that differs) is the whole story and comes alone.
fn differences(
    dir: &Path,
    record: &EpisodeRecord,
    ended: &super::run::Ended,
    state: &AgentState,
    (recorded_random, chained_root): (Option<Value>, Option<Value>),
) -> Vec<String> {
    let Some(recorded) = &record.end else {
        return vec!["the recording has no end".into()];
    };
    if ended.reason == EndReason::ReplayDiverged && recorded.reason != EndReason::ReplayDiverged {
        return vec![ended.detail.clone()];
    }
    let mut out = Vec::new();
    let mut differ = |what: &str, recorded: String, replayed: String| {
        if recorded != replayed {
            out.push(format!("{what}: recorded {recorded}, replayed {replayed}"));
        }
    };
    differ("end", recorded.reason.name(), ended.reason.name());
    let (answer, cut) = keep_answer(ended.answer.as_deref(), record.limits.answer_bytes);
    let recorded_cut = recorded.answer_cut.as_ref().map(|c| &c.blake3);
    differ(
        "answer",
        format!("{:?}", (&recorded.answer, recorded_cut)),
        format!("{:?}", (&answer, cut.as_ref().map(|c| &c.blake3))),
    );
    differ("steps", recorded.steps.to_string(), state.recorder.steps().to_string());
    differ("notes", recorded.notes.to_string(), state.episode.notes().to_string());
    let scores = |v: &[crate::capability::episode::ValidationRecord]| {
        format!("{:?}", v.iter().map(|v| v.score).collect::<Vec<_>>())
    };
    differ(
        "validations",
        scores(&recorded.validations),
        scores(state.episode.validations()),
    );
    let llm = |calls: u32, input: u64, output: u64| format!("{calls} calls, {input}+{output} tokens");
    let usage = &state.llm.usage;
    differ(
        "model use",
        llm(
            recorded.llm.calls,
            recorded.llm.input_tokens,
            recorded.llm.output_tokens,
        ),
        llm(usage.calls, usage.input_tokens, usage.output_tokens),
    );
    let observed = &state.recorder.observed;
    if let Some(why) = observed.diverged() {
        out.push(why);
    }
    if observed.unanswered() > 0 {
        out.push(format!(
            "clocks: the recording read them {} more times than the replay",
            observed.unanswered()
        ));
    }
    if let Some(recorded_random) = recorded_random
        && recorded_random != observed.random_summary()
    {
        out.push(format!(
            "random bytes: recorded {recorded_random}, replayed {}",
            observed.random_summary()
        ));
    }
    if let Some(replay) = state.recorder.replay()
        && replay.calls_left() > 0
    {
        out.push(format!(
            "the agent ended with {} recorded calls still to make",
            replay.calls_left()
        ));
    }
    if let Err(why) = final_workspace(dir, recorded, chained_root) {
        out.push(why);
    }
    out
}

/// The final workspace the records name is the one stored: the manifest
/// of the final snapshot has the root `episode.json` binds, and that root
/// is the last the hash chain recorded.
fn final_workspace(dir: &Path, recorded: &EpisodeEnd, chained_root: Option<Value>) -> Result<(), String> {
    let snapshots = dir.join("snapshots");
    let manifest =
        snapshot::read_manifest(&snapshots, recorded.final_snapshot).map_err(|e| format!("final workspace: {e:#}"))?;
    if !recorded.final_root.is_empty() && manifest.root != recorded.final_root {
        return Err(format!(
            "final workspace: snapshot {} has root {}, episode.json says {}",
            manifest.id, manifest.root, recorded.final_root
        ));
    }
    if chained_root.as_ref().and_then(Value::as_str) != Some(manifest.root.as_str()) {
        return Err(format!(
            "final workspace: snapshot {} has root {}, the last the hash chain recorded is {}",
            manifest.id,
            manifest.root,
            chained_root.unwrap_or(Value::Null)
        ));
    }
    Ok(())
}
