//! The state one episode's tool calls share: the workspace, the script
//! runner, the step budget, the trace and the snapshot store.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use serde_json::{Value, json};

use super::exec::{ExecOutcome, ScriptRunner};
use super::tool_error::{ToolError, ToolResult};
use super::workspace::Workspace;
use crate::llm::replay::Replayed;
use crate::llm::{CallStats, Completion, LlmError, LlmRequest, LlmSource, LlmUsage};
use crate::record::snapshot::{ManifestEntry, SnapshotStore};
use crate::record::trace::{Event, Trace, raw};
use crate::record::walk::{DirHandle, Opened};
use crate::task::Evaluation;

/// Scores a copy of the agent's workspace for `episode.validate()`, in a
/// sandbox the agent cannot reach, with the hidden answers beside it.
#[async_trait::async_trait]
pub trait Validator: Send + Sync {
    async fn validate(&self, workspace_copy: &Path, number: u32, timeout: Duration) -> anyhow::Result<Evaluation>;
}

/// How the task allows intermediate scoring.
pub struct ValidationPolicy {
    pub validator: Arc<dyn Validator>,
    pub hide_score: bool,
    pub max_calls: u32,
}

/// What `validate` answers the agent.
#[derive(Debug, Clone, Serialize)]
pub struct ScoreReportRecord {
    pub score: Option<f64>,
    pub valid: bool,
    pub message: String,
}

/// One intermediate scoring, as the records keep it (the score is kept
/// even when the agent was not told it).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ValidationRecord {
    pub step: u32,
    pub t_ms: u64,
    pub snapshot: u64,
    pub score: Option<f64>,
    pub valid: bool,
    pub error: Option<String>,
}

/// What the agent is told about its task (the host-side twin of the WIT record).
#[derive(Debug, Clone, Serialize)]
pub struct TaskInfoRecord {
    pub name: String,
    pub version: String,
    pub research_problem: String,
    pub metric: String,
    pub higher_is_better: bool,
    pub baseline: Option<f64>,
    pub max_steps: u32,
    pub wall_seconds: u64,
    pub llm_tokens: u64,
    #[serde(default)]
    pub llm_cost_usd: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct UsageRecord {
    pub steps: u32,
    pub max_steps: u32,
    pub elapsed_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub llm_cost_usd: f64,
}

/// Why an episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndReason {
    /// The agent returned its answer.
    Completed,
    /// The agent returned an error of its own.
    AgentError,
    /// The agent trapped (a bug in the agent).
    Trap,
    /// The agent tried to use more memory than its limit.
    MemoryLimit,
    /// The wall-clock deadline passed.
    Timeout,
    /// The agent spent its step budget.
    StepBudget,
    /// The user interrupted the run.
    Interrupted,
    /// The host failed (disk full, sandbox broken): not the agent's fault.
    HostError,
    /// Under `--llm replay:`, the agent asked what the recording never did.
    ReplayDiverged,
    /// The agent's calls filled the trace's byte budget.
    TraceLimit,
}

/// A host call's request to end the episode now (raised as a trap).
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
pub struct EndEpisode {
    pub reason: EndReason,
    pub detail: String,
}

/// The text one LLM request may carry (every provider's context is smaller).
const MAX_LLM_REQUEST_BYTES: usize = 8 << 20;

/// Calls past an exhausted step budget that are answered with an error
/// before the episode is ended: enough for an agent to notice and return.
const CALLS_AFTER_BUDGET: u32 = 5;

pub struct Session {
    pub workspace: Workspace,
    pub scripts: ScriptRunner,
    pub trace: Trace,
    pub snapshots: SnapshotStore,
    pub task_info: TaskInfoRecord,
    pub started: Instant,
    pub deadline: Instant,
    steps: u32,
    refused_steps: u32,
    budget_hit: bool,
    notes: u32,
    first_call_at: Option<Instant>,
    /// Mirrors `steps` for a progress display in another task.
    progress: Option<Arc<AtomicU32>>,
    /// Read-only files as they were when the workspace was made.
    read_only_baseline: Vec<(String, ManifestEntry)>,
    validation: Option<ValidationPolicy>,
    validations: Vec<ValidationRecord>,
    llm: LlmSource,
    llm_usage: LlmUsage,
    /// Requests answered so far from a replayed recording.
    llm_replayed: usize,
    /// What the last snapshot refused, to record each change once.
    last_refused: (Vec<crate::record::snapshot::Refused>, Option<String>),
}

/// How a tool result is recorded: `{"ok": value}` or `{"error": {...}}`.
#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum Recorded<'a, T> {
    Ok(&'a T),
    Error(&'a ToolError),
}

pub fn result_json<T: Serialize>(result: &ToolResult<T>) -> Value {
    serde_json::from_str(recorded(result).get()).unwrap_or(Value::Null)
}

fn recorded<T: Serialize>(result: &ToolResult<T>) -> Box<serde_json::value::RawValue> {
    match result {
        Ok(value) => raw(&Recorded::Ok(value)),
        Err(error) => raw(&Recorded::<T>::Error(error)),
    }
}

fn host_fault(what: &str, error: impl std::fmt::Display) -> wasmtime::Error {
    wasmtime::Error::new(EndEpisode {
        reason: EndReason::HostError,
        detail: format!("{what}: {error}"),
    })
}

impl Session {
    pub fn new(
        workspace: Workspace,
        scripts: ScriptRunner,
        trace: Trace,
        snapshots: SnapshotStore,
        task_info: TaskInfoRecord,
        started: Instant,
        deadline: Instant,
    ) -> Self {
        Self {
            workspace,
            scripts,
            trace,
            snapshots,
            task_info,
            started,
            deadline,
            steps: 0,
            refused_steps: 0,
            budget_hit: false,
            notes: 0,
            first_call_at: None,
            progress: None,
            read_only_baseline: Vec::new(),
            validation: None,
            validations: Vec::new(),
            llm: LlmSource::None,
            llm_usage: LlmUsage::default(),
            llm_replayed: 0,
            last_refused: (Vec::new(), None),
        }
    }

    /// Where this episode's completions come from.
    pub fn set_llm(&mut self, source: LlmSource) {
        self.llm = source;
    }

    /// The episode's LLM spending so far.
    pub fn llm_usage(&self) -> &LlmUsage {
        &self.llm_usage
    }

    /// Allows intermediate scoring under `policy`.
    pub fn allow_validation(&mut self, policy: ValidationPolicy) {
        self.validation = Some(policy);
    }

    /// Every intermediate scoring so far.
    pub fn validations(&self) -> &[ValidationRecord] {
        &self.validations
    }

    pub fn steps(&self) -> u32 {
        self.steps
    }

    pub fn budget_hit(&self) -> bool {
        self.budget_hit
    }

    /// Publishes the step count to `counter` as it changes.
    pub fn report_progress(&mut self, counter: Arc<AtomicU32>) {
        self.progress = Some(counter);
    }

    /// When the agent first called the host.
    pub fn first_call_at(&self) -> Option<Instant> {
        self.first_call_at
    }

    pub fn notes(&self) -> u32 {
        self.notes
    }

    pub fn usage(&self) -> UsageRecord {
        UsageRecord {
            steps: self.steps,
            max_steps: self.task_info.max_steps,
            elapsed_ms: self.started.elapsed().as_millis() as u64,
            input_tokens: self.llm_usage.input_tokens,
            output_tokens: self.llm_usage.output_tokens,
            llm_cost_usd: self.llm_usage.cost_usd,
        }
    }

    /// Takes the first snapshot and remembers the read-only files in it.
    pub fn initial_snapshot(&mut self) -> anyhow::Result<u64> {
        let id = self.snapshot_now("start")?.unwrap_or(0);
        let manifest = self.snapshots.last().expect("a first snapshot always exists");
        self.read_only_baseline = self
            .workspace
            .read_only()
            .paths()
            .filter_map(|p| manifest.entries.get(p).map(|e| (p.to_string(), e.clone())))
            .collect();
        Ok(id)
    }

    /// What the workspace held at the last snapshot.
    fn used(&self) -> crate::record::walk::Usage {
        let stats = self.snapshots.last().map(|m| m.stats.clone()).unwrap_or_default();
        crate::record::walk::Usage {
            entries: stats.entries,
            bytes: stats.bytes,
            allocated_bytes: stats.allocated_bytes,
        }
    }

    /// Snapshots the workspace if it changed; the new manifest's id.
    /// Entries the snapshot refused are recorded (a `host` event) whenever
    /// they change, so a cap that was hit is in the trace.
    pub fn snapshot_now(&mut self, label: &str) -> anyhow::Result<Option<u64>> {
        let Some(manifest) = self.snapshots.snapshot(self.workspace.handle(), label)? else {
            return Ok(None);
        };
        let id = manifest.id;
        let refused = (manifest.refused.clone(), manifest.stats.truncated.clone());
        if refused != self.last_refused && (!refused.0.is_empty() || refused.1.is_some()) {
            const SHOWN: usize = 20;
            let args = json!({
                "snapshot": id,
                "refused": refused.0.len(),
                "truncated": refused.1,
                "first": &refused.0[..refused.0.len().min(SHOWN)],
            });
            if let Err(error) = self.record_plain("host", "snapshot-refused", args, Value::Null) {
                tracing::warn!(%error, "recording what the snapshot refused");
            }
        }
        self.last_refused = refused;
        Ok(Some(id))
    }

    /// Counts a step, or refuses it when the budget is spent.
    fn begin_step(&mut self) -> Result<ToolResult<u32>, wasmtime::Error> {
        if self.steps >= self.task_info.max_steps {
            self.budget_hit = true;
            self.refused_steps += 1;
            if self.refused_steps > CALLS_AFTER_BUDGET {
                return Err(wasmtime::Error::new(EndEpisode {
                    reason: EndReason::StepBudget,
                    detail: format!(
                        "the agent kept calling tools after its budget of {} steps was spent",
                        self.task_info.max_steps
                    ),
                }));
            }
            return Ok(Err(ToolError::BudgetExhausted(format!(
                "all {} steps of this episode are spent; return your final answer",
                self.task_info.max_steps
            ))));
        }
        self.steps += 1;
        if let Some(progress) = &self.progress {
            progress.store(self.steps, Ordering::Relaxed);
        }
        Ok(Ok(self.steps))
    }

    #[allow(clippy::too_many_arguments)]
    fn write_event(
        &mut self,
        interface: &str,
        function: &str,
        step: Option<u32>,
        args: &serde_json::value::RawValue,
        result: &serde_json::value::RawValue,
        started: Instant,
        snapshot: Option<u64>,
        llm: Option<&serde_json::value::RawValue>,
    ) -> wasmtime::Result<()> {
        self.first_call_at.get_or_insert(started);
        let event = Event {
            seq: self.trace.next_seq(),
            t_ms: self.trace.elapsed_ms(),
            interface,
            function,
            step,
            args,
            result,
            duration_us: started.elapsed().as_micros() as u64,
            snapshot,
            llm,
        };
        self.trace
            .write(&event)
            .map_err(|e| host_fault("writing events.jsonl", e))?;
        if self.trace.spent() {
            return Err(wasmtime::Error::new(EndEpisode {
                reason: EndReason::TraceLimit,
                detail: format!(
                    "the agent's calls filled the trace's budget of {} MiB ({} calls recorded)",
                    self.trace.budget() >> 20,
                    self.trace.events()
                ),
            }));
        }
        Ok(())
    }

    /// A call that is not a step (task, usage, notes): recorded only, and
    /// counted against the trace's budget like every other call.
    pub fn record_plain(
        &mut self,
        interface: &str,
        function: &str,
        args: Value,
        result: Value,
    ) -> wasmtime::Result<()> {
        let now = Instant::now();
        self.write_event(interface, function, None, &raw(&args), &raw(&result), now, None, None)
    }

    /// One `llm.complete`: checked against the budget, answered by the
    /// episode's source, paid for, and recorded with both sides and how the
    /// call went. Not a step.
    pub async fn llm_complete(&mut self, request: LlmRequest) -> wasmtime::Result<Result<Completion, LlmError>> {
        let started = Instant::now();
        let (result, stats) = self.llm_answer(&request).await?;
        let (input_price, output_price) = self.llm.prices(&request.model);
        let mut cost = 0.0;
        if let Ok(completion) = &result {
            cost =
                (completion.input_tokens as f64 * input_price + completion.output_tokens as f64 * output_price) / 1e6;
            self.llm_usage.input_tokens += completion.input_tokens as u64;
            self.llm_usage.output_tokens += completion.output_tokens as u64;
            self.llm_usage.cost_usd += cost;
        }
        self.llm_usage.calls += 1;
        if let Some(stats) = &stats {
            self.llm_usage.waiting_ms += stats.queued_ms + stats.backoff_ms;
            self.llm_usage.provider_ms += stats.provider_ms;
        }
        let recorded = match &result {
            Ok(completion) => json!({ "ok": completion }),
            Err(error) => json!({ "error": error }),
        };
        let call = json!({ "source": self.llm_source_kind(), "stats": stats, "cost_usd": cost });
        self.write_event(
            "llm",
            "complete",
            None,
            &raw(&request),
            &raw(&recorded),
            started,
            None,
            Some(&raw(&call)),
        )?;
        Ok(result)
    }

    fn llm_source_kind(&self) -> &'static str {
        match self.llm {
            LlmSource::None => "none",
            LlmSource::Live(_) => "live",
            LlmSource::Local(_) => "local",
            LlmSource::Replay(_) => "replay",
        }
    }

    async fn llm_answer(
        &mut self,
        request: &LlmRequest,
    ) -> wasmtime::Result<(Result<Completion, LlmError>, Option<CallStats>)> {
        if let LlmSource::Replay(recording) = &self.llm {
            // A replay answers everything, refusals included, as recorded.
            return match recording.answer(self.llm_replayed, request) {
                Replayed::Answer(result) => {
                    self.llm_replayed += 1;
                    Ok((result, None))
                }
                Replayed::Diverged(why) => Err(wasmtime::Error::new(EndEpisode {
                    reason: EndReason::ReplayDiverged,
                    detail: why,
                })),
            };
        }
        if request.messages.is_empty() {
            return Ok((
                Err(LlmError::InvalidRequest("a request needs at least one message".into())),
                None,
            ));
        }
        let bytes: usize = request.messages.iter().map(|m| m.content.len()).sum::<usize>()
            + request.stop.iter().map(String::len).sum::<usize>();
        if bytes > MAX_LLM_REQUEST_BYTES {
            return Ok((
                Err(LlmError::InvalidRequest(format!(
                    "a request of {} KiB; at most {} KiB of messages per request",
                    bytes >> 10,
                    MAX_LLM_REQUEST_BYTES >> 10
                ))),
                None,
            ));
        }
        let used = self.llm_usage.input_tokens + self.llm_usage.output_tokens;
        let budget = &self.task_info;
        if budget.llm_tokens > 0 && used >= budget.llm_tokens {
            return Ok((
                Err(LlmError::BudgetExhausted(format!(
                    "all {} LLM tokens of this episode are spent ({used} used)",
                    budget.llm_tokens
                ))),
                None,
            ));
        }
        if budget.llm_cost_usd > 0.0 && self.llm_usage.cost_usd >= budget.llm_cost_usd {
            return Ok((
                Err(LlmError::BudgetExhausted(format!(
                    "the LLM budget of ${:.4} is spent (${:.4} used)",
                    budget.llm_cost_usd, self.llm_usage.cost_usd
                ))),
                None,
            ));
        }
        match &self.llm {
            LlmSource::Live(client) => {
                let client = client.clone();
                let (result, stats) = client.complete(request, self.deadline).await;
                Ok((result, Some(stats)))
            }
            LlmSource::Local(on_demand) => match on_demand.clone().client().await {
                Ok(client) => {
                    let (result, stats) = client.complete(request, self.deadline).await;
                    Ok((result, Some(stats)))
                }
                Err(why) => Ok((Err(LlmError::Unavailable(format!("the local model: {why}"))), None)),
            },
            _ => Ok((
                Err(LlmError::Unavailable(
                    "this host has no model configured: add [llm] to mlrb.toml (see mlrb.example.toml), install the local model (scripts/setup.sh), or run with --llm replay:<episode-dir>"
                        .into(),
                )),
                None,
            )),
        }
    }

    pub fn note(&mut self, text: String) -> wasmtime::Result<()> {
        self.notes += 1;
        self.record_plain("episode", "note", json!({ "text": text }), Value::Null)
    }

    /// Runs one synchronous workspace call as a step: budget, the call, a
    /// snapshot when it changed files, and its event.
    pub fn tool_call<T: Serialize>(
        &mut self,
        interface: &str,
        function: &str,
        args: Value,
        mutating: bool,
        call: impl FnOnce(&mut Self) -> ToolResult<T>,
    ) -> wasmtime::Result<ToolResult<T>> {
        let started = Instant::now();
        let (step, result) = match self.begin_step()? {
            Ok(step) => (Some(step), call(self)),
            Err(refused) => (None, Err(refused)),
        };
        let snapshot = if mutating && result.is_ok() {
            self.snapshot_now(&format!("step {}: {function}", step.unwrap_or(0)))
                .map_err(|e| host_fault("snapshot", format!("{e:#}")))?
        } else {
            None
        };
        self.write_event(
            interface,
            function,
            step,
            &raw(&args),
            &recorded(&result),
            started,
            snapshot,
            None,
        )?;
        Ok(result)
    }

    /// Runs a script as a step; afterwards snapshots whatever it changed and
    /// puts back any read-only file it managed to move or replace.
    pub async fn execute_script(
        &mut self,
        script: String,
        args: Vec<String>,
        timeout_seconds: Option<u32>,
    ) -> wasmtime::Result<ToolResult<ExecOutcome>> {
        let started = Instant::now();
        let call_args = json!({ "script": script, "args": args, "timeout_seconds": timeout_seconds });
        let (step, result) = match self.begin_step()? {
            Ok(step) => {
                let result = self
                    .scripts
                    .execute(
                        &self.workspace,
                        &script,
                        &args,
                        timeout_seconds,
                        self.deadline,
                        self.used(),
                    )
                    .await;
                (Some(step), result)
            }
            Err(refused) => (None, Err(refused)),
        };
        let mut snapshot = None;
        if step.is_some() {
            let label = format!("step {}: execute-script {script}", step.unwrap_or(0));
            snapshot = self
                .snapshot_now(&label)
                .map_err(|e| host_fault("snapshot", format!("{e:#}")))?;
            if self
                .restore_read_only()
                .map_err(|e| host_fault("restoring read-only files", format!("{e:#}")))?
            {
                snapshot = self
                    .snapshot_now(&format!("{label} (read-only files restored)"))
                    .map_err(|e| host_fault("snapshot", format!("{e:#}")))?
                    .or(snapshot);
            }
        }
        self.write_event(
            "exec",
            "execute-script",
            step,
            &raw(&call_args),
            &recorded(&result),
            started,
            snapshot,
            None,
        )?;
        Ok(result)
    }

    /// Scores a copy of the current workspace where the task allows it. A
    /// step; bounded by the task's number of validations and the deadline.
    pub async fn validate(&mut self) -> wasmtime::Result<ToolResult<ScoreReportRecord>> {
        let started = Instant::now();
        let Some(policy) = &self.validation else {
            let refused: ToolResult<ScoreReportRecord> = Err(ToolError::Unavailable(
                "this task does not offer intermediate scoring; the final workspace is scored when you return".into(),
            ));
            self.record_plain("episode", "validate", Value::Null, result_json(&refused))?;
            return Ok(refused);
        };
        let (hide_score, max_calls, validator) = (policy.hide_score, policy.max_calls, policy.validator.clone());
        let step = match self.begin_step()? {
            Ok(step) => step,
            Err(refused) => {
                let refused = Err(refused);
                self.write_event(
                    "episode",
                    "validate",
                    None,
                    &raw(&Value::Null),
                    &recorded(&refused),
                    started,
                    None,
                    None,
                )?;
                return Ok(refused);
            }
        };
        let (result, kept, snapshot) = if self.validations.len() as u32 >= max_calls {
            let refused = Err(ToolError::BudgetExhausted(format!(
                "all {max_calls} validations of this episode are used; the final workspace is still scored when you return"
            )));
            (refused, Value::Null, None)
        } else if Instant::now() >= self.deadline {
            (
                Err(ToolError::Timeout("the episode's time is up".into())),
                Value::Null,
                None,
            )
        } else {
            let snapshot = self
                .snapshot_now(&format!("step {step}: validate"))
                .map_err(|e| host_fault("snapshot", format!("{e:#}")))?;
            let (evaluation, manifest) = self
                .score_copy(validator.as_ref(), step)
                .await
                .map_err(|e| host_fault("validating", format!("{e:#}")))?;
            let record = ValidationRecord {
                step,
                t_ms: self.trace.elapsed_ms() as u64,
                snapshot: manifest,
                score: evaluation.score,
                valid: evaluation.valid,
                error: evaluation.error.clone(),
            };
            let kept = serde_json::to_value(&record).unwrap_or_default();
            self.validations.push(record);
            let result = if evaluation.evaluator_failed {
                Err(ToolError::Unavailable(format!(
                    "the task's evaluator failed, which is not your submission's fault: {}",
                    evaluation.error.unwrap_or_default()
                )))
            } else if evaluation.valid {
                Ok(ScoreReportRecord {
                    score: if hide_score { None } else { evaluation.score },
                    valid: true,
                    message: match (hide_score, evaluation.score) {
                        (false, Some(score)) => format!("valid submission; {} = {score}", self.task_info.metric),
                        _ => "valid submission (this task does not reveal intermediate scores)".into(),
                    },
                })
            } else {
                Ok(ScoreReportRecord {
                    score: None,
                    valid: false,
                    message: format!(
                        "invalid submission: {}",
                        evaluation.error.unwrap_or_else(|| "no reason given".into())
                    ),
                })
            };
            (result, kept, snapshot)
        };
        // The trace keeps what the agent was told and, apart, the full record.
        let recorded_result = json!({ "told": result_json(&result), "validation": kept });
        self.write_event(
            "episode",
            "validate",
            Some(step),
            &raw(&Value::Null),
            &raw(&recorded_result),
            started,
            snapshot,
            None,
        )?;
        Ok(result)
    }

    /// Materialises the latest snapshot (without links that leave it) and
    /// has the validator score it; returns the evaluation and the snapshot id.
    async fn score_copy(&mut self, validator: &dyn Validator, step: u32) -> anyhow::Result<(Evaluation, u64)> {
        let manifest = self.snapshots.last().context("no snapshot")?.clone();
        let snapshot_dir = self.snapshots.dir().to_path_buf();
        let scratch = tempfile::Builder::new()
            .prefix(".validate-")
            .tempdir_in(snapshot_dir.parent().unwrap_or(&snapshot_dir))?;
        let copy = scratch.path().join("workspace");
        crate::record::snapshot::materialize_contained(&snapshot_dir, &manifest, &copy)?;
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        let evaluation = validator.validate(&copy, step, remaining).await?;
        Ok((evaluation, manifest.id))
    }

    /// Puts every read-only file back as it was at the start; true if any
    /// had been changed (which the sandbox's read-only mounts should prevent).
    fn restore_read_only(&mut self) -> anyhow::Result<bool> {
        let Some(current) = self.snapshots.last() else {
            return Ok(false);
        };
        let changed: Vec<(String, ManifestEntry)> = self
            .read_only_baseline
            .iter()
            .filter(|(path, entry)| current.entries.get(path) != Some(entry))
            .cloned()
            .collect();
        if changed.is_empty() {
            return Ok(false);
        }
        let objects = DirHandle::open_root(self.snapshots.objects_dir())?;
        for (path, entry) in &changed {
            if let ManifestEntry::File { hash, executable, .. } = entry {
                restore_file(self.workspace.handle(), path, &objects, hash, *executable)
                    .with_context(|| format!("restoring read-only {path}"))?;
            }
        }
        let paths: Vec<&str> = changed.iter().map(|(p, _)| p.as_str()).collect();
        tracing::warn!(?paths, "a script changed read-only files; they were restored");
        if let Err(error) = self.record_plain("host", "restore-read-only", json!({ "paths": paths }), Value::Null) {
            tracing::warn!(%error, "recording the restore");
        }
        Ok(true)
    }
}

/// Puts object `hash` back at `rel` under `root`, replacing whatever a
/// script left on the way (a link, a file where a folder was) without ever
/// following a link.
fn restore_file(root: &DirHandle, rel: &str, objects: &DirHandle, hash: &str, executable: bool) -> anyhow::Result<()> {
    let (parents, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let mut dir = root.try_clone()?;
    for part in parents.split('/').filter(|p| !p.is_empty()) {
        dir = match dir.open_entry(part.as_bytes()) {
            Ok(Opened::Dir(sub, _)) => sub,
            Ok(_) => {
                dir.remove_entry(part.as_bytes())?;
                dir.create_dir(part.as_bytes())?
            }
            Err(_) => dir.create_dir(part.as_bytes())?,
        };
    }
    match dir.remove_entry(name.as_bytes()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let (source, _) = objects.open_file(hash.as_bytes())?;
    let out = dir.create_file(name.as_bytes(), if executable { 0o755 } else { 0o644 })?;
    crate::record::walk::copy_sparse(&source, &out)?;
    Ok(())
}
