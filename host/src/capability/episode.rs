//! The WIT `episode` interface: what the agent is asked to do, what it has
//! spent, its research log (notes) and intermediate scoring (`validate`),
//! which scores a copy of the last snapshot with the task's evaluator in a
//! sandbox the agent cannot reach.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use super::HostResult;
use super::llm::LlmState;
use super::mlrb::agent::{episode as wit, types as wit_types};
use super::recorder::{Call, Stop, end, from_recorded, host_fault, recorded, result_json};
use super::tool_error::{ToolError, ToolResult};
use crate::record::trace::raw;

/// What an evaluator said of a workspace copy.
#[derive(Debug, Clone)]
pub struct Scored {
    /// The metric's value, when the evaluator reported one.
    pub score: Option<f64>,
    /// Whether the submission passed the task's validity checks.
    pub valid: bool,
    /// Why the submission is invalid, or why the evaluator failed.
    pub error: Option<String>,
    /// True when the evaluator itself failed (not the agent's fault).
    pub evaluator_failed: bool,
    /// What the agent may be told when the submission is invalid or the
    /// evaluator failed: a short message the host built, never the
    /// evaluator's raw output (which may quote the hidden answers).
    pub told: String,
}

/// Scores a copy of the agent's workspace for `episode.validate()`, in a
/// sandbox the agent cannot reach, with the hidden answers beside it.
#[async_trait::async_trait]
pub trait Validator: Send + Sync {
    /// Scores `workspace_copy` as validation number `number` (the step), within `timeout`.
    async fn validate(&self, workspace_copy: &Path, number: u32, timeout: Duration) -> anyhow::Result<Scored>;
}

/// How the task allows intermediate scoring.
pub struct ValidationPolicy {
    /// What scores the workspace copies.
    pub validator: Arc<dyn Validator>,
    /// Whether the agent is told only validity, not the score.
    pub hide_score: bool,
    /// Whether the score is worth keeping in the records: a public part's
    /// (or a task's without hidden answers), not the whole test set's when
    /// only validity is told.
    pub keep_score: bool,
    /// What the score told is of, for the agent: e.g. "on the public part of
    /// the test set".
    pub told_of: &'static str,
    /// How many validations the episode may make.
    pub max_calls: u32,
}

/// What `validate` answers the agent.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ScoreReportRecord {
    /// The score told to the agent; `None` when hidden or the submission is invalid.
    pub score: Option<f64>,
    /// Whether the submission is valid.
    pub valid: bool,
    /// A sentence for the agent saying what the validation found.
    pub message: String,
}

/// One intermediate scoring, as the records keep it (the score is kept
/// even when the agent was not told it).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ValidationRecord {
    /// The step the validation took.
    pub step: u32,
    /// When it was recorded, in milliseconds since the trace started.
    pub t_ms: u64,
    /// The id of the snapshot that was scored.
    pub snapshot: u64,
    /// The evaluator's score, whether or not the agent was told it.
    pub score: Option<f64>,
    /// Whether the submission was valid.
    pub valid: bool,
    /// Why the submission is invalid, or why the evaluator failed.
    pub error: Option<String>,
}

/// What the agent is told about its task (the host-side twin of the WIT record).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct TaskInfoRecord {
    /// The task's name.
    pub name: String,
    /// The task's version.
    pub version: String,
    /// The problem statement the agent works on.
    pub research_problem: String,
    /// Name of the metric the evaluator reports, e.g. "accuracy".
    pub metric: String,
    /// Whether a larger metric value is better.
    pub higher_is_better: bool,
    /// The score of the task's starter code, when declared.
    pub baseline: Option<f64>,
    /// The most steps the episode may take.
    pub max_steps: u32,
    /// The episode's wall-clock budget, in seconds.
    pub wall_seconds: u64,
    /// The LLM token budget (input and output together); 0 means no limit.
    pub llm_tokens: u64,
    /// The LLM spending budget, in US dollars; 0 means no limit.
    #[serde(default)]
    pub llm_cost_usd: f64,
}

impl From<TaskInfoRecord> for wit_types::TaskInfo {
    fn from(t: TaskInfoRecord) -> Self {
        Self {
            name: t.name,
            version: t.version,
            research_problem: t.research_problem,
            metric: t.metric,
            higher_is_better: t.higher_is_better,
            baseline: t.baseline,
            budget: wit_types::Budget {
                max_steps: t.max_steps,
                wall_seconds: t.wall_seconds,
                llm_tokens: t.llm_tokens,
                llm_cost_usd: t.llm_cost_usd,
            },
        }
    }
}

/// What the episode has spent so far (the host-side twin of the WIT record).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct UsageRecord {
    /// Steps taken so far.
    pub steps: u32,
    /// The most steps the episode may take.
    pub max_steps: u32,
    /// Time since the episode started, in milliseconds.
    pub elapsed_ms: u64,
    /// LLM input tokens used so far.
    pub input_tokens: u64,
    /// LLM output tokens used so far.
    pub output_tokens: u64,
    /// What the LLM calls cost so far, in US dollars.
    pub llm_cost_usd: f64,
}

/// The episode interface's own state.
pub struct EpisodeState {
    /// What the agent is told about its task.
    pub task_info: TaskInfoRecord,
    validation: Option<ValidationPolicy>,
    validations: Vec<ValidationRecord>,
    notes: u32,
}

impl EpisodeState {
    /// A state for a task described by `task_info`, with validation off.
    pub fn new(task_info: TaskInfoRecord) -> Self {
        Self {
            task_info,
            validation: None,
            validations: Vec::new(),
            notes: 0,
        }
    }

    /// Allows intermediate scoring under `policy`.
    pub fn allow_validation(&mut self, policy: ValidationPolicy) {
        self.validation = Some(policy);
    }

    /// Every intermediate scoring so far.
    pub fn validations(&self) -> &[ValidationRecord] {
        &self.validations
    }

    /// The validations an episode made before it was paused (a person's,
    /// `mlrb human --resume`): they count against the same allowance.
    pub fn restore_validations(&mut self, earlier: Vec<ValidationRecord>) {
        self.validations = earlier;
    }

    /// How many validations the episode may make, where the task allows any.
    pub fn validation_allowance(&self) -> Option<u32> {
        self.validation.as_ref().map(|p| p.max_calls)
    }

    /// Notes written so far.
    pub fn notes(&self) -> u32 {
        self.notes
    }
}

link_view! {
    /// What the episode interface's host code sees: its state and the LLM usage.
    EpisodeCapability => EpisodeView<'a>, |state| {
        episode: &'a mut EpisodeState = &mut state.episode,
        llm: &'a LlmState = &state.llm,
    }
}

impl wit::Host for EpisodeView<'_> {
    async fn task(&mut self) -> wasmtime::Result<wit_types::TaskInfo> {
        let info = self.episode.task_info.clone();
        // A replay answers with the task the recorded run was given.
        if self.recorder.replayed(("episode", "task"), &Value::Null)?.is_some() {
            return Ok(info.into());
        }
        self.recorder
            .record_plain("episode", "task", Value::Null, json!({ "name": info.name }))?;
        Ok(info.into())
    }

    async fn current_usage(&mut self) -> wasmtime::Result<wit_types::Usage> {
        let usage = match self.recorder.replayed(("episode", "current-usage"), &Value::Null)? {
            Some(matched) => serde_json::from_value(matched.result)
                .map_err(|e| end(Stop::ReplayDiverged, format!("a recorded usage does not parse: {e}")))?,
            None => self.usage(),
        };
        if !self.recorder.is_replaying() {
            let recorded = serde_json::to_value(&usage).unwrap_or_default();
            self.recorder
                .record_plain("episode", "current-usage", Value::Null, recorded)?;
        }
        Ok(wit_types::Usage {
            steps: usage.steps,
            elapsed_ms: usage.elapsed_ms,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            llm_cost_usd: usage.llm_cost_usd,
        })
    }

    async fn note(&mut self, text: String) -> wasmtime::Result<()> {
        self.episode.notes += 1;
        let args = json!({ "text": crate::record::trace::text(&text) });
        if self.recorder.replayed(("episode", "note"), &args)?.is_some() {
            return Ok(());
        }
        self.recorder.record_plain("episode", "note", args, Value::Null)
    }

    async fn validate(&mut self) -> HostResult<wit::ScoreReport> {
        Ok(self
            .validate_recorded()
            .await?
            .map(|report| wit::ScoreReport {
                score: report.score,
                valid: report.valid,
                message: report.message,
            })
            .map_err(Into::into))
    }
}

impl EpisodeView<'_> {
    /// Steps, time and LLM spending so far.
    pub fn usage(&self) -> UsageRecord {
        let llm = &self.llm.usage;
        UsageRecord {
            steps: self.recorder.steps(),
            max_steps: self.recorder.max_steps(),
            elapsed_ms: self.recorder.started.elapsed().as_millis() as u64,
            input_tokens: llm.input_tokens,
            output_tokens: llm.output_tokens,
            llm_cost_usd: llm.cost_usd,
        }
    }

    /// Scores a copy of the current workspace where the task allows it. A
    /// step; bounded by the task's number of validations and the deadline.
    pub async fn validate_recorded(&mut self) -> wasmtime::Result<ToolResult<ScoreReportRecord>> {
        if let Some(matched) = self.recorder.replayed(("episode", "validate"), &Value::Null)? {
            return self.replayed_validation(matched.result);
        }
        let started = Instant::now();
        let Some(policy) = &self.episode.validation else {
            let refused: ToolResult<ScoreReportRecord> = Err(ToolError::Unavailable(
                "this task does not offer intermediate scoring; the final workspace is scored when you return".into(),
            ));
            self.recorder
                .record_plain("episode", "validate", Value::Null, result_json(&refused))?;
            return Ok(refused);
        };
        let told_as = Told {
            hide_score: policy.hide_score,
            keep_score: policy.keep_score,
            of: policy.told_of,
        };
        let (max_calls, validator) = (policy.max_calls, policy.validator.clone());
        let step = match self.recorder.begin_step()? {
            Ok(step) => step,
            Err(refused) => {
                let refused = Err(refused);
                self.write("validate", None, &recorded(&refused), started, None)?;
                return Ok(refused);
            }
        };
        let (result, kept, snapshot) = if self.episode.validations.len() as u32 >= max_calls {
            let refused = Err(ToolError::BudgetExhausted(format!(
                "all {max_calls} validations of this episode are used; the final workspace is still scored when you return"
            )));
            (refused, Value::Null, None)
        } else if Instant::now() >= self.recorder.deadline {
            let refused = Err(ToolError::Timeout("the episode's time is up".into()));
            (refused, Value::Null, None)
        } else {
            self.score(validator.as_ref(), step, told_as).await?
        };
        // The trace keeps what the agent was told and, apart, the full record.
        let told = json!({ "told": result_json(&result), "validation": kept });
        self.write("validate", Some(step), &raw(&told), started, snapshot)?;
        Ok(result)
    }

    /// A recorded validation: what the agent was told, and the validation
    /// record kept for the episode's end.
    fn replayed_validation(&mut self, mut recorded: Value) -> wasmtime::Result<ToolResult<ScoreReportRecord>> {
        let Some(told) = recorded.get_mut("told").map(Value::take) else {
            return from_recorded(recorded);
        };
        if let Some(kept) = recorded.get_mut("validation").map(Value::take).filter(|v| !v.is_null()) {
            let record: ValidationRecord = serde_json::from_value(kept).map_err(|e| {
                end(
                    Stop::ReplayDiverged,
                    format!("a recorded validation does not parse: {e}"),
                )
            })?;
            self.episode.validations.push(record);
        }
        from_recorded(told)
    }

    fn write(
        &mut self,
        function: &str,
        step: Option<u32>,
        result: &serde_json::value::RawValue,
        started: Instant,
        snapshot: Option<u64>,
    ) -> wasmtime::Result<()> {
        self.recorder.write(Call {
            interface: "episode",
            function,
            step,
            args: &raw(&Value::Null),
            result,
            started,
            snapshot,
            llm: None,
        })
    }

    /// One validation: what the agent is told, the record kept, and the
    /// snapshot it scored.
    async fn score(
        &mut self,
        validator: &dyn Validator,
        step: u32,
        told_as: Told,
    ) -> wasmtime::Result<(ToolResult<ScoreReportRecord>, Value, Option<u64>)> {
        let (scored, snapshot) = self
            .score_copy(validator, step)
            .await
            .map_err(|e| host_fault("validating", format!("{e:#}")))?;
        let record = ValidationRecord {
            step,
            t_ms: self.recorder.trace.elapsed_ms() as u64,
            snapshot,
            score: scored.score.filter(|_| told_as.keep_score),
            valid: scored.valid,
            error: scored.error.clone(),
        };
        let kept = serde_json::to_value(&record).unwrap_or_default();
        self.episode.validations.push(record);
        let told = told(scored, told_as, &self.episode.task_info.metric);
        // Every change is snapshotted when it happens: validate takes none.
        Ok((told, kept, None))
    }

    /// Materialises the latest snapshot (without links that leave it) and
    /// has the validator score it; returns what it said and the snapshot id.
    async fn score_copy(&mut self, validator: &dyn Validator, step: u32) -> anyhow::Result<(Scored, u64)> {
        let manifest = self.recorder.snapshots.last_with_entries()?;
        let snapshot_dir = self.recorder.snapshots.dir().to_path_buf();
        let scratch = tempfile::Builder::new()
            .prefix(".validate-")
            .tempdir_in(snapshot_dir.parent().unwrap_or(&snapshot_dir))?;
        let copy = scratch.path().join("workspace");
        crate::record::snapshot::materialize_contained(&snapshot_dir, &manifest, &copy)?;
        let remaining = self.recorder.deadline.saturating_duration_since(Instant::now());
        let scored = validator.validate(&copy, step, remaining).await?;
        Ok((scored, manifest.id))
    }
}

/// How a validation's result is told and kept.
#[derive(Clone, Copy)]
struct Told {
    hide_score: bool,
    keep_score: bool,
    of: &'static str,
}

/// What the agent is told of a validation.
fn told(scored: Scored, how: Told, metric: &str) -> ToolResult<ScoreReportRecord> {
    let hide_score = how.hide_score;
    if scored.evaluator_failed {
        return Err(ToolError::Unavailable(scored.told));
    }
    if !scored.valid {
        return Ok(ScoreReportRecord {
            score: None,
            valid: false,
            message: scored.told,
        });
    }
    Ok(ScoreReportRecord {
        score: if hide_score { None } else { scored.score },
        valid: true,
        message: match (hide_score, scored.score) {
            (false, Some(score)) if how.of.is_empty() => format!("valid submission; {metric} = {score}"),
            (false, Some(score)) => format!("valid submission; {metric} {} = {score}", how.of),
            _ => "valid submission (this task does not reveal intermediate scores)".into(),
        },
    })
}
