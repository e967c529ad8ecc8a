//! `episode.json` (provenance and how the episode ended) and `score.json`
//! (what the evaluator said, against the baseline).

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{EpisodeSpec, LoadedAgent};
use crate::capability::exec::ScriptLimits;
use crate::capability::session::EndReason;
use crate::capability::{Session, ValidationRecord};
use crate::llm::LlmUsage;
use crate::task::{self, Evaluation, Prepared, Task};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentProvenance {
    pub path: String,
    pub sha256: String,
    pub size: u64,
    pub compiled_from_cache: bool,
    /// Reading, compiling or loading from the cache, and type-checking.
    pub load_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskProvenance {
    pub name: String,
    pub version: String,
    pub root: String,
    pub prepare_key: String,
    pub metric: String,
    pub higher_is_better: bool,
    pub baseline: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostProvenance {
    pub mlrb: String,
    pub wit: String,
    pub wasmtime: String,
    pub os: String,
    pub arch: String,
    pub sandbox: String,
    /// The host process running the episode, to tell a running episode
    /// from one whose host was killed.
    #[serde(default)]
    pub process: Option<HostProcess>,
}

/// One process, told apart from a later one with the same pid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostProcess {
    pub pid: u32,
    /// Its start time (clock ticks since boot) and the boot it belongs to.
    pub started: u64,
    pub boot_id: String,
}

impl HostProcess {
    /// This process.
    pub fn current() -> Option<Self> {
        Self::of(std::process::id())
    }

    fn of(pid: u32) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name (which may hold spaces) are plain.
        let after = stat.rsplit_once(')')?.1;
        let started = after.split_whitespace().nth(19)?.parse().ok()?;
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        Some(Self {
            pid,
            started,
            boot_id: boot_id.trim().to_string(),
        })
    }

    /// Whether this process still runs.
    pub fn alive(&self) -> bool {
        Self::of(self.pid).as_ref() == Some(self)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpisodeLimits {
    pub max_steps: u32,
    pub wall_seconds: u64,
    #[serde(default)]
    pub llm_tokens: u64,
    #[serde(default)]
    pub llm_cost_usd: f64,
    pub agent_memory_bytes: usize,
    pub agent_log_bytes: u64,
    pub script_timeout_seconds: u64,
    pub script_memory_bytes: u64,
    pub script_max_processes: u32,
    pub script_cpus: f64,
    pub network: bool,
    /// Bytes the trace may hold (the agent's calls), and of the answer kept.
    #[serde(default)]
    pub trace_bytes: u64,
    #[serde(default)]
    pub answer_bytes: usize,
    /// What the workspace may hold.
    #[serde(default)]
    pub workspace_bytes: u64,
    #[serde(default)]
    pub workspace_files: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpisodeEnd {
    pub reason: EndReason,
    pub detail: String,
    pub answer: Option<String>,
    /// Set when the answer was longer than the host keeps: its full length
    /// and blake3 (`answer` holds its head).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_cut: Option<AnswerCut>,
    pub steps: u32,
    pub notes: u32,
    pub wall_ms: u64,
    pub agent_memory_peak_bytes: usize,
    pub agent_log_dropped_bytes: u64,
    pub final_snapshot: u64,
    /// From the start of instantiation to the agent's first host call.
    pub first_call_ms: Option<f64>,
    /// Intermediate scorings through `episode.validate()`, in order.
    #[serde(default)]
    pub validations: Vec<ValidationRecord>,
    /// What the agent's LLM calls used and cost.
    #[serde(default)]
    pub llm: LlmUsage,
}

/// What an over-long answer was, before it was cut.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnswerCut {
    pub bytes: u64,
    pub blake3: String,
}

/// The answer as kept: at most `cap` bytes (cut at a character boundary),
/// and what was cut.
pub fn keep_answer(answer: Option<&str>, cap: usize) -> (Option<String>, Option<AnswerCut>) {
    let Some(answer) = answer else {
        return (None, None);
    };
    if answer.len() <= cap {
        return (Some(answer.to_string()), None);
    }
    let mut end = cap;
    while !answer.is_char_boundary(end) {
        end -= 1;
    }
    let cut = AnswerCut {
        bytes: answer.len() as u64,
        blake3: blake3::hash(answer.as_bytes()).to_hex().to_string(),
    };
    (Some(answer[..end].to_string()), Some(cut))
}

/// `episode.json`: written when the agent starts (`end` is null while it
/// runs, and stays null if the host is killed), rewritten when it ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpisodeRecord {
    pub seed: u64,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub agent: AgentProvenance,
    pub task: TaskProvenance,
    pub host: HostProvenance,
    pub limits: EpisodeLimits,
    /// Where completions came from: "none", "live (aliases)", "replay of <dir>".
    #[serde(default)]
    pub llm: String,
    pub end: Option<EpisodeEnd>,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value)?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

impl EpisodeRecord {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        spec: &EpisodeSpec,
        agent: &LoadedAgent,
        task: &Task,
        prepared: &Prepared,
        sandbox: &str,
        max_steps: u32,
        wall: Duration,
        scripts: &ScriptLimits,
    ) -> Self {
        Self {
            seed: spec.seed,
            started_at: now(),
            ended_at: None,
            agent: AgentProvenance {
                path: agent.path.display().to_string(),
                sha256: agent.sha256.clone(),
                size: agent.size,
                compiled_from_cache: agent.from_cache,
                load_ms: agent.load_ms,
            },
            task: TaskProvenance {
                name: task.spec.name.clone(),
                version: task.spec.version.clone(),
                root: task.root.display().to_string(),
                prepare_key: prepared.key.clone(),
                metric: task.spec.metric.name.clone(),
                higher_is_better: task.spec.metric.higher_is_better,
                baseline: task.spec.metric.baseline,
            },
            host: HostProvenance {
                mlrb: env!("CARGO_PKG_VERSION").to_string(),
                wit: crate::capability::WIT_PACKAGE.to_string(),
                wasmtime: "48.0.8".to_string(),
                os: std::env::consts::OS.to_string(),
                arch: std::env::consts::ARCH.to_string(),
                sandbox: sandbox.to_string(),
                process: HostProcess::current(),
            },
            limits: EpisodeLimits {
                max_steps,
                wall_seconds: wall.as_secs(),
                llm_tokens: 0,
                llm_cost_usd: 0.0,
                agent_memory_bytes: spec.limits.memory_bytes,
                agent_log_bytes: spec.limits.log_bytes,
                script_timeout_seconds: scripts.max_timeout.as_secs(),
                script_memory_bytes: scripts.memory_bytes,
                script_max_processes: scripts.max_processes,
                script_cpus: scripts.cpus,
                network: scripts.network,
                trace_bytes: spec.limits.trace_bytes,
                answer_bytes: spec.limits.answer_bytes,
                workspace_bytes: scripts.workspace.bytes,
                workspace_files: scripts.workspace.entries,
            },
            llm: String::new(),
            end: None,
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn finish(
        &mut self,
        reason: EndReason,
        detail: &str,
        answer: Option<&str>,
        session: &Session,
        memory_peak: usize,
        log_dropped: u64,
        final_snapshot: u64,
        first_call_ms: Option<f64>,
    ) {
        self.ended_at = Some(now());
        let (answer, answer_cut) = keep_answer(answer, self.limits.answer_bytes);
        self.end = Some(EpisodeEnd {
            reason,
            detail: detail.to_string(),
            answer,
            answer_cut,
            steps: session.steps(),
            notes: session.notes(),
            wall_ms: session.started.elapsed().as_millis() as u64,
            agent_memory_peak_bytes: memory_peak,
            agent_log_dropped_bytes: log_dropped,
            final_snapshot,
            first_call_ms,
            validations: session.validations().to_vec(),
            llm: session.llm_usage().clone(),
        });
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        write_json(&dir.join("episode.json"), self)
    }

    /// How the episode ended, "running" while its host runs, or "host
    /// killed" when the host died before it could end it.
    pub fn status(&self) -> String {
        match (&self.end, &self.host.process) {
            (Some(end), _) => serde_json::to_value(end.reason)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            (None, Some(process)) if process.alive() => "running".into(),
            (None, _) => "host killed".into(),
        }
    }

    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join("episode.json");
        let text = std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not an mlrb episode record: {e}", path.display()))
    }
}

/// `score.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScoreRecord {
    pub task: String,
    pub metric: String,
    pub higher_is_better: bool,
    pub score: Option<f64>,
    pub valid: bool,
    pub baseline: Option<f64>,
    /// The score of the task's reference solution, when declared.
    #[serde(default)]
    pub reference: Option<f64>,
    /// Relative improvement over the baseline in the metric's direction.
    pub improvement: Option<f64>,
    /// The score on a scale where the baseline is 0 and the reference 1.
    #[serde(default)]
    pub normalized: Option<f64>,
    /// More than 10 % better than the baseline.
    pub success: bool,
    /// The best of the intermediate scores and the final one.
    #[serde(default)]
    pub best_score: Option<f64>,
    pub end_reason: Option<EndReason>,
    pub error: Option<String>,
    pub evaluator_failed: bool,
    pub snapshot: Option<u64>,
    pub evaluated_at: String,
}

impl ScoreRecord {
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join("score.json");
        let text = std::fs::read_to_string(&path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not an mlrb score record: {e}", path.display()))
    }

    pub fn from_evaluation(task: &Task, record: &EpisodeRecord, snapshot: u64, evaluation: Evaluation) -> Self {
        let metric = &task.spec.metric;
        let improvement = match (evaluation.score, metric.baseline) {
            (Some(score), Some(baseline)) => task::improvement(score, baseline, metric.higher_is_better),
            _ => None,
        };
        let normalized = match (evaluation.score, metric.baseline, metric.reference) {
            (Some(score), Some(baseline), Some(reference)) if reference != baseline => {
                Some((score - baseline) / (reference - baseline))
            }
            _ => None,
        };
        let intermediate = record
            .end
            .iter()
            .flat_map(|end| end.validations.iter().filter_map(|v| v.score));
        let best_score = intermediate
            .chain(evaluation.score)
            .reduce(|a, b| if (b > a) == metric.higher_is_better { b } else { a });
        Self {
            task: task.spec.name.clone(),
            metric: metric.name.clone(),
            higher_is_better: metric.higher_is_better,
            score: evaluation.score,
            valid: evaluation.valid,
            baseline: metric.baseline,
            reference: metric.reference,
            improvement,
            normalized,
            success: improvement.is_some_and(|i| i > task::SUCCESS_THRESHOLD),
            best_score,
            end_reason: record.end.as_ref().map(|e| e.reason),
            error: evaluation.error,
            evaluator_failed: evaluation.evaluator_failed,
            snapshot: Some(snapshot),
            evaluated_at: now(),
        }
    }

    pub fn not_evaluated(task: &Task, record: &EpisodeRecord, why: &str) -> Self {
        Self {
            task: task.spec.name.clone(),
            metric: task.spec.metric.name.clone(),
            higher_is_better: task.spec.metric.higher_is_better,
            score: None,
            valid: false,
            baseline: task.spec.metric.baseline,
            reference: task.spec.metric.reference,
            improvement: None,
            normalized: None,
            success: false,
            best_score: None,
            end_reason: record.end.as_ref().map(|e| e.reason),
            error: Some(why.to_string()),
            evaluator_failed: false,
            snapshot: record.end.as_ref().map(|e| e.final_snapshot),
            evaluated_at: now(),
        }
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        write_json(&dir.join("score.json"), self)
    }
}
