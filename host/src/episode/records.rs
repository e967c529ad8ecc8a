//! `episode.json` (provenance and how the episode ended) and `score.json`
//! (what the evaluator said, against the baseline).

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::end::EndReason;
use super::{EpisodeRequest, ForkOrigin};
use crate::capability::episode::ValidationRecord;
use crate::limits::Limits;
use crate::llm::LlmUsage;
use crate::process::HostProcess;
use crate::task::{Evaluation, Prepared, Task};

/// Which agent component an episode ran, and how it was loaded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentProvenance {
    /// Where the component was read from.
    pub path: String,
    /// The component file's SHA-256, in hex.
    pub sha256: String,
    /// The component file's size, in bytes.
    pub size: u64,
    /// Whether the compiled code came from the cache.
    pub compiled_from_cache: bool,
    /// Reading, compiling or loading from the cache, and type-checking.
    pub load_ms: f64,
    /// The contract it was built against, e.g. `mlrb:agent@0.2.0` (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wit: Option<String>,
}

/// Which task an episode ran, and against which prepared data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskProvenance {
    /// The task's name.
    pub name: String,
    /// The task's version.
    pub version: String,
    /// The task folder, as an absolute path.
    pub root: String,
    /// Names the prepared data the workspace was made from.
    pub prepare_key: String,
    /// The name of the task's metric.
    pub metric: String,
    /// Whether a higher score is better.
    pub higher_is_better: bool,
    /// The metric's baseline score, when the task declares one.
    pub baseline: Option<f64>,
    /// The blake3 of the task folder's content (see `Task::content_hash`).
    #[serde(default)]
    pub content_hash: String,
}

/// The host that ran an episode: versions, platform and sandbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostProvenance {
    /// The mlrb host version.
    pub mlrb: String,
    /// The WIT package the host implements.
    pub wit: String,
    /// The wasmtime version.
    pub wasmtime: String,
    /// The operating system, e.g. "linux".
    pub os: String,
    /// The CPU architecture, e.g. "x86_64".
    pub arch: String,
    /// The sandbox the scripts ran in, e.g. "local (bubblewrap 0.8.0)".
    pub sandbox: String,
    /// The host process running the episode, to tell a running episode
    /// from one whose host was killed.
    #[serde(default)]
    pub process: Option<HostProcess>,
    /// The id (`sha256:…`) of the image scripts ran in; none for bubblewrap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
}

/// How an episode ended, and what it used.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpisodeEnd {
    /// Why the episode ended.
    pub reason: EndReason,
    /// Why it ended, in words.
    pub detail: String,
    /// The agent's answer, when it returned one (at most its head when cut).
    pub answer: Option<String>,
    /// Set when the answer was longer than the host keeps: its full length
    /// and blake3 (`answer` holds its head).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_cut: Option<AnswerCut>,
    /// Set when `detail` (an agent's error message) was longer than the
    /// host keeps: its full length and blake3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail_cut: Option<AnswerCut>,
    /// Steps the agent took.
    pub steps: u32,
    /// Notes the agent wrote to its research log.
    pub notes: u32,
    /// Wall-clock time of the episode, in milliseconds.
    pub wall_ms: u64,
    /// The most linear memory the agent used at once, in bytes.
    pub agent_memory_peak_bytes: usize,
    /// Bytes the agent printed that were not kept in `agent.log`.
    pub agent_log_dropped_bytes: u64,
    /// The id of the workspace snapshot taken at the end.
    pub final_snapshot: u64,
    /// That snapshot's root tree hash: the final workspace, content addressed.
    #[serde(default)]
    pub final_root: String,
    /// The blake3 of the last line of `events.jsonl`: the hash chain's head,
    /// which binds every event before it.
    #[serde(default)]
    pub chain_head: String,
    /// From the start of instantiation to the agent's first host call.
    pub first_call_ms: Option<f64>,
    /// Intermediate scorings through `episode.validate()`, in order.
    #[serde(default)]
    pub validations: Vec<ValidationRecord>,
    /// What the agent's LLM calls used and cost.
    #[serde(default)]
    pub llm: LlmUsage,
    /// Where the episode's scripts connected, when its task grants a network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::network::NetworkUse>,
}

/// What an over-long answer was, before it was cut.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AnswerCut {
    /// The answer's full length, in bytes.
    pub bytes: u64,
    /// The blake3 hash of the full answer, in hex.
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
    /// The seed for the agent's randomness.
    pub seed: u64,
    /// When the episode started, as an RFC 3339 UTC time.
    pub started_at: String,
    /// When the episode ended, as an RFC 3339 UTC time; null while it runs.
    pub ended_at: Option<String>,
    /// The agent that ran.
    pub agent: AgentProvenance,
    /// The task it ran on.
    pub task: TaskProvenance,
    /// The host that ran it.
    pub host: HostProvenance,
    /// The limits the episode ran under.
    pub limits: Limits,
    /// Where completions came from: "none", "live (aliases)", "replay of <dir>".
    #[serde(default)]
    pub llm: String,
    /// The GPU devices the episode held (its scripts' and evaluator's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
    /// Set for a fork: the episode it started from, and after which step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<ForkRecord>,
    /// Each time the episode went on after its host died, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumes: Vec<super::resume::ResumeRecord>,
    /// Set for a person's episode (`mlrb human`): who worked, and whether
    /// the session is paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub person: Option<PersonRecord>,
    /// Set when the episode ran in its task's smoke profile (`--smoke`:
    /// stand-in data and toy models), whose scores measure nothing. Its
    /// trace's `host run` event binds it, so `mlrb verify` sees it edited.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub smoke: bool,
    /// How the episode ended; null while it runs or if the host was killed.
    pub end: Option<EpisodeEnd>,
}

/// The person who worked on a task in place of an agent.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PersonRecord {
    /// The name they gave (`--name`).
    pub name: String,
    /// When they paused the session, as an RFC 3339 UTC time; null while
    /// it is open or once it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<String>,
}

impl PersonRecord {
    /// The agent name a person's episodes go by in tables: `human:NAME`.
    pub fn agent_name(&self) -> String {
        format!("human:{}", self.name)
    }
}

/// Where a fork came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ForkRecord {
    /// The parent episode's folder.
    pub parent: String,
    /// The parent's id (`<task>/<agent>/<seed>` of its run), for display.
    pub parent_id: String,
    /// The parent's step the fork starts after.
    pub at_step: u32,
    /// True when another agent went on from there (started fresh).
    pub new_agent: bool,
}

fn now() -> String {
    crate::format::now_rfc3339()
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value)?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

impl EpisodeRecord {
    /// The task the episode ran, loaded from where it was (or, moved, by
    /// its name), to score or run it again.
    pub fn load_task(&self) -> Result<Task> {
        Task::load(Path::new(&self.task.root))
            .or_else(|_| crate::task::resolve(&self.task.name))
            .with_context(|| format!("task `{}` of the episode", self.task.name))
    }

    /// The record of an episode starting now.
    pub fn new(request: &EpisodeRequest, prepared: &Prepared, sandbox: &dyn crate::sandbox::Sandbox) -> Result<Self> {
        let agent = &request.agent;
        let provenance = AgentProvenance {
            path: agent.path.display().to_string(),
            sha256: agent.sha256.clone(),
            size: agent.size,
            compiled_from_cache: agent.from_cache,
            load_ms: agent.load_ms,
            wit: agent.wit.clone(),
        };
        let mut record = Self::starting(
            provenance,
            (&request.task, &request.limits),
            request.seed,
            prepared,
            sandbox,
        )?;
        record.fork = request.fork.as_ref().map(ForkOrigin::record);
        Ok(record)
    }

    /// The record of a person's episode (`mlrb human`) starting now: its
    /// "agent" is `human:NAME`, with no component.
    pub fn of_person(
        name: &str,
        configured: (&Task, &Limits),
        seed: u64,
        prepared: &Prepared,
        sandbox: &dyn crate::sandbox::Sandbox,
    ) -> Result<Self> {
        let person = PersonRecord {
            name: name.to_string(),
            paused_at: None,
        };
        let provenance = AgentProvenance {
            path: person.agent_name(),
            sha256: String::new(),
            size: 0,
            compiled_from_cache: false,
            load_ms: 0.0,
            wit: None,
        };
        let mut record = Self::starting(provenance, configured, seed, prepared, sandbox)?;
        record.person = Some(person);
        Ok(record)
    }

    fn starting(
        agent: AgentProvenance,
        (task, limits): (&Task, &Limits),
        seed: u64,
        prepared: &Prepared,
        sandbox: &dyn crate::sandbox::Sandbox,
    ) -> Result<Self> {
        Ok(Self {
            seed,
            started_at: now(),
            ended_at: None,
            agent,
            task: TaskProvenance {
                name: task.spec.name.clone(),
                version: task.spec.version.clone(),
                root: task.root.display().to_string(),
                prepare_key: prepared.key.clone(),
                metric: task.spec.metric.name.clone(),
                higher_is_better: task.spec.metric.higher_is_better,
                baseline: task.spec.metric.baseline,
                content_hash: task.content_hash()?,
            },
            host: HostProvenance {
                mlrb: env!("CARGO_PKG_VERSION").to_string(),
                wit: crate::capability::WIT_PACKAGE.to_string(),
                wasmtime: env!("MLRB_WASMTIME_VERSION").to_string(),
                os: std::env::consts::OS.to_string(),
                arch: std::env::consts::ARCH.to_string(),
                sandbox: sandbox.describe(),
                process: HostProcess::current(),
                image_digest: sandbox.image_digest(),
            },
            limits: limits.clone(),
            llm: String::new(),
            gpus: Vec::new(),
            fork: None,
            resumes: Vec::new(),
            person: None,
            smoke: task.smoke(),
            end: None,
        })
    }

    /// Records how the episode ended.
    pub fn finish(&mut self, end: EpisodeEnd) {
        self.ended_at = Some(now());
        self.end = Some(end);
    }

    /// Writes the record to `episode.json` in `dir`, atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_json(&dir.join("episode.json"), self)
    }

    /// How the episode ended, "running" while its host runs, "paused" (a
    /// person's, to go on with), or "host killed" when the host died
    /// before it could end it.
    pub fn status(&self) -> String {
        let paused = self.person.as_ref().is_some_and(|p| p.paused_at.is_some());
        match (&self.end, &self.host.process) {
            (Some(end), _) => end.reason.name(),
            (None, _) if paused => "paused".into(),
            (None, Some(process)) if process.alive() => "running".into(),
            (None, _) => "host killed".into(),
        }
    }

    /// Reads `episode.json` from the episode directory `dir`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join("episode.json");
        let text = crate::record::read_record_file(&path, crate::record::MAX_JSON_RECORD)?;
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not an mlrb episode record: {e}", path.display()))
    }
}

/// `score.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScoreRecord {
    /// The task's name.
    pub task: String,
    /// The name of the task's metric.
    pub metric: String,
    /// Whether a higher score is better; null where the direction is not
    /// known (records made before mlrb wrote null say `true` there, beside
    /// `direction_known: false`: read them through [`ScoreRecord::direction`]).
    pub higher_is_better: Option<bool>,
    /// The evaluator's score of the final snapshot; null when there is none.
    pub score: Option<f64>,
    /// The rounds a timed score was measured in (their lowest, highest and
    /// count): `mlrb verify` allows a re-scoring what they spread over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<crate::task::Spread>,
    /// Figures the evaluator kept beside the score (a timed task's median
    /// seconds, for a reader comparing with a number in seconds).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub measures: std::collections::BTreeMap<String, f64>,
    /// Whether the evaluator accepted the submission.
    pub valid: bool,
    /// Whether the metric's direction is known; when it is not, there is
    /// no improvement or success.
    #[serde(default = "known")]
    pub direction_known: bool,
    /// The metric's baseline score, when the task has one.
    pub baseline: Option<f64>,
    /// Where the baseline comes from (declared in task.toml, measured by
    /// `mlrb tasks baseline`, an overlay for an upstream task).
    #[serde(default)]
    pub baseline_source: Option<String>,
    /// The score of the task's reference solution, when declared.
    #[serde(default)]
    pub reference: Option<f64>,
    /// Relative improvement over the baseline in the metric's direction.
    pub improvement: Option<f64>,
    /// The score on a scale where the baseline is 0 and the reference 1.
    #[serde(default)]
    pub normalized: Option<f64>,
    /// More than 10 % better than the baseline; null where that cannot be
    /// judged (no baseline, or a metric whose direction is unknown).
    pub success: Option<bool>,
    /// The best of the intermediate scores and the final one, where they
    /// score the same answers; else the final one.
    #[serde(default)]
    pub best_score: Option<f64>,
    /// What `validate()` told the agent; none in records made before mlrb
    /// said (they told the score on the whole test set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<super::feedback::Feedback>,
    /// The public part's scores of the validations, where the task splits
    /// its hidden answers (the final `score` is the private part's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public: Option<super::feedback::PublicScores>,
    /// Relative improvement of the best public score over the public
    /// baseline (derived, like `improvement`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_improvement: Option<f64>,
    /// True when a public gain did not carry over to the private part: the
    /// private improvement is under half the public one (derived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_gain_lost: Option<bool>,
    /// Why the episode ended; null when it has no end record.
    pub end_reason: Option<EndReason>,
    /// Why the submission is not valid, or why it was not scored.
    pub error: Option<String>,
    /// True when the evaluator itself failed (not the agent's fault).
    pub evaluator_failed: bool,
    /// The id of the snapshot scored (or the final one, when not evaluated).
    pub snapshot: Option<u64>,
    /// When the score was made, as an RFC 3339 UTC time.
    pub evaluated_at: String,
    /// Set when the score is of the task's smoke profile (stand-in data
    /// and toy models): it measures nothing. `mlrb verify` holds it to
    /// what the episode's trace bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub smoke: bool,
    /// What this score is of: the episode's chain head and agent, the
    /// task's version and content, the snapshot scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<ScoreBinding>,
}

/// What a score is bound to, so that it cannot be moved to another episode,
/// agent, task or workspace without `mlrb verify` seeing it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScoreBinding {
    /// The episode's hash chain head (`episode.json`'s `end.chain_head`).
    pub chain_head: String,
    /// The agent component's SHA-256.
    pub agent_sha256: String,
    /// The task's version.
    pub task_version: String,
    /// The task folder's content hash.
    pub task_content_hash: String,
    /// The root tree hash of the snapshot scored.
    pub snapshot_root: String,
    /// The mlrb version that scored it.
    pub mlrb: String,
}

impl ScoreBinding {
    /// The binding of a score of `record`'s snapshot whose root is `root`.
    pub fn of(record: &EpisodeRecord, root: &str) -> Self {
        Self {
            chain_head: record.end.as_ref().map(|e| e.chain_head.clone()).unwrap_or_default(),
            agent_sha256: record.agent.sha256.clone(),
            task_version: record.task.version.clone(),
            task_content_hash: record.task.content_hash.clone(),
            snapshot_root: root.to_string(),
            mlrb: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

fn known() -> bool {
    true
}

impl ScoreRecord {
    /// The metric's direction: whether a higher score is better, or none
    /// where it is not known (whatever `higher_is_better` an older record
    /// wrote beside `direction_known: false`).
    pub fn direction(&self) -> Option<bool> {
        self.higher_is_better.filter(|_| self.direction_known)
    }

    /// Reads `score.json` from the episode directory `dir`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join("score.json");
        let text = crate::record::read_record_file(&path, crate::record::MAX_JSON_RECORD)?;
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not an mlrb score record: {e}", path.display()))
    }

    /// The score record of an evaluation of snapshot `snapshot`, against the task's baseline and reference.
    pub fn from_evaluation(task: &Task, record: &EpisodeRecord, snapshot: (u64, &str), evaluation: Evaluation) -> Self {
        let mut score = Self {
            score: evaluation.score,
            spread: evaluation.spread,
            measures: evaluation.measures,
            valid: evaluation.valid,
            error: evaluation.error,
            evaluator_failed: evaluation.evaluator_failed,
            snapshot: Some(snapshot.0),
            binding: Some(ScoreBinding::of(record, snapshot.1)),
            ..Self::unscored(task, record)
        };
        let validations = record.end.as_ref().map_or(&[][..], |e| &e.validations[..]);
        score.public = super::feedback::PublicScores::of(task, validations);
        score.set_judgement(super::judgement::judge(&score, validations));
        score
    }

    /// Sets the fields that follow from the score, baseline and metric.
    pub fn set_judgement(&mut self, judgement: super::judgement::Judgement) {
        self.improvement = judgement.improvement;
        self.normalized = judgement.normalized;
        self.success = judgement.success;
        self.best_score = judgement.best_score;
        self.public_improvement = judgement.public_improvement;
        self.public_gain_lost = judgement.public_gain_lost;
    }

    /// The score record of an episode that was not evaluated, saying `why`.
    pub fn not_evaluated(task: &Task, record: &EpisodeRecord, why: &str) -> Self {
        Self {
            error: Some(why.to_string()),
            snapshot: record.end.as_ref().map(|e| e.final_snapshot),
            binding: record.end.as_ref().map(|e| ScoreBinding::of(record, &e.final_root)),
            ..Self::unscored(task, record)
        }
    }

    /// What every record of `task`'s episode `record` says before any score:
    /// the metric and its basis, nothing judged, nothing bound.
    fn unscored(task: &Task, record: &EpisodeRecord) -> Self {
        let metric = &task.spec.metric;
        Self {
            task: task.spec.name.clone(),
            metric: metric.name.clone(),
            higher_is_better: metric.direction_known.then_some(metric.higher_is_better),
            score: None,
            spread: None,
            measures: Default::default(),
            valid: false,
            direction_known: metric.direction_known,
            baseline: metric.baseline,
            baseline_source: metric.baseline_source(),
            reference: metric.reference,
            improvement: None,
            normalized: None,
            success: None,
            best_score: None,
            feedback: Some(super::feedback::Feedback::of(task)),
            public: None,
            public_improvement: None,
            public_gain_lost: None,
            end_reason: record.end.as_ref().map(|e| e.reason),
            error: None,
            evaluator_failed: false,
            snapshot: None,
            evaluated_at: now(),
            smoke: task.smoke() || record.smoke,
            binding: None,
        }
    }

    /// Writes the record to `score.json` in `dir`, atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_json(&dir.join("score.json"), self)
    }
}

/// `stale.json`: this episode's result depended on something invalidated
/// (`mlrb runs invalidate`), and why. Its records are kept as they were.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StaleMark {
    /// Why, in words (what was invalidated, and the user's reason).
    pub reason: String,
    /// When, as an RFC 3339 UTC time.
    pub invalidated_at: String,
}

impl StaleMark {
    /// A mark made now.
    pub fn new(reason: String) -> Self {
        Self {
            reason,
            invalidated_at: now(),
        }
    }

    /// The mark of the episode in `dir`, if it has one.
    pub fn read(dir: &Path) -> Option<Self> {
        let text = crate::record::read_record_file(&dir.join("stale.json"), 1 << 20).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes `stale.json` into the episode directory `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_json(&dir.join("stale.json"), self)
    }
}

/// The episode directories (those holding `episode.json`) at or under
/// `dir`, in path order.
pub fn episode_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    if dir.join("episode.json").is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut episodes: Vec<std::path::PathBuf> = walkdir::WalkDir::new(dir)
        .follow_links(false)
        .max_depth(6)
        .into_iter()
        .filter_entry(|e| {
            !matches!(
                e.file_name().to_str(),
                Some("snapshots" | "workspace" | "history" | "exec")
            )
        })
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file() && e.file_name() == "episode.json")
        .filter_map(|e| e.path().parent().map(Path::to_path_buf))
        .collect();
    episodes.sort();
    episodes
}
