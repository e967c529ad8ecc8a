//! The `task.toml` format and its checks, with one-line errors naming the
//! file and field at fault.

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

/// A task's `task.toml`: what the agent must do, how it is scored, and its limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// The task's name, as `mlrb` commands and records use it.
    pub name: String,
    /// The task's version; a new one invalidates its prepared data.
    pub version: String,
    /// The group the task belongs to (`cpu`, `ml-research-benchmark`, ...),
    /// for listing and for `mlrb tasks test --suite`.
    #[serde(default = "default_suite")]
    pub suite: String,
    /// A one-line description, for listings and reports.
    #[serde(default)]
    pub description: String,
    /// `mlagentbench` for a `task.toml` beside an MLAgentBench folder's own
    /// files, declaring what the folder does not say (metric, direction,
    /// range, baseline); its research problem and read-only files then
    /// come from `scripts/` unless given here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<super::Layout>,
    /// What the agent is asked to do.
    #[serde(default)]
    pub research_problem: String,
    /// How a submission is scored.
    pub metric: Metric,
    /// What an episode may spend.
    #[serde(default)]
    pub budget: Budget,
    /// What the task's scripts and workspace may use.
    #[serde(default)]
    pub resources: Resources,
    /// Files of the workspace with special rules.
    #[serde(default)]
    pub files: Files,
    /// Intermediate scoring through `episode.validate()`.
    #[serde(default)]
    pub validation: Validation,
    /// What the evaluator does with the workspace.
    #[serde(default)]
    pub scoring: Scoring,
    /// What preparation must produce.
    #[serde(default)]
    pub prepare: PrepareSpec,
    /// The models, datasets and protocols the task takes from elsewhere,
    /// each with where it was confirmed (or why it could not be).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<Source>,
    /// How `mlrb tasks test --smoke` runs the starter on toy models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smoke: Option<Smoke>,
}

/// `[smoke]`: how the smoke profile (`mlrb tasks test --smoke`: the real
/// scripts on the CPU, against the stand-in hub's toy models and synthetic
/// data) gets a submission from the task in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Smoke {
    /// Appended to `python3 train.py` (a few steps, small batches).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub starter_args: Vec<String>,
    /// A script under `scripts/` run in the workspace instead of the
    /// starter, for a starter that cannot run on a CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submission: Option<String>,
    /// Why the starter cannot run on a CPU (with `submission`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Smoke {
    /// What is wrong with this table, as (field, what), if anything.
    fn fault(&self) -> Option<(&'static str, &'static str)> {
        let Some(script) = &self.submission else {
            return self
                .reason
                .is_some()
                .then_some(("smoke.reason", "is only for a `smoke.submission` script"));
        };
        if !self.starter_args.is_empty() {
            return Some(("smoke.submission", "replaces the starter: drop `smoke.starter_args`"));
        }
        if script.starts_with('/') || script.split('/').any(|p| p == ".." || p.is_empty()) || !script.ends_with(".py") {
            return Some((
                "smoke.submission",
                "must be a .py file's path under scripts/, such as `smoke/submission.py`",
            ));
        }
        if self.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
            return Some(("smoke.reason", "must say why the starter cannot run on a CPU"));
        }
        None
    }
}

/// `[scoring]`: how the evaluator uses the agent's workspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scoring {
    /// What the submission is to the evaluator.
    pub submission: SubmissionUse,
    /// For an MLAgentBench folder: one of mlrb's own evaluators (a module
    /// of its Python helpers, `mlrb_mlab_<task>.py`) in place of the
    /// folder's `scripts/eval.py`, where that one cannot be trusted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<String>,
}

/// What a submission is to its evaluator, as `mlrb tasks check` tells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubmissionUse {
    /// Files the evaluator reads and checks (predictions, a text).
    #[default]
    Data,
    /// Model weights the evaluator loads and runs with its own code
    /// (safetensors, checked TorchScript graphs): no program of the agent's.
    Model,
    /// Programs the evaluator runs and times: each run goes to a sandbox of
    /// its own through mlrb's submission runner (`mlrb_eval.run_submission`),
    /// with neither the hidden files nor the evaluator's result in reach.
    Code,
}

impl SubmissionUse {
    /// What the evaluation step does with submitted code, in words.
    pub fn describe(self) -> &'static str {
        match self {
            SubmissionUse::Data => "reads the submission as data; runs none of its code",
            SubmissionUse::Model => {
                "loads and runs the submission's model weights with its own code; runs no program of the agent's"
            }
            SubmissionUse::Code => {
                "runs submitted code, each run in a sandbox of its own (no hidden files, no result channel, killed as a whole)"
            }
        }
    }
}

/// What a task source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// Weights on a model hub.
    Model,
    /// A dataset on a hub.
    Dataset,
    /// How the original benchmark scores, limits or words the task.
    Protocol,
}

/// One model, dataset or protocol a task takes from elsewhere (`[[sources]]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// A model, a dataset or a protocol.
    pub kind: SourceKind,
    /// The hub id (`owner/name`) of a model or dataset; a short name for a protocol.
    pub id: String,
    /// The hub revision (a commit) the task is pinned to, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The dataset configuration (subset) used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// The splits used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub splits: Vec<String>,
    /// What the task takes from it, in words.
    #[serde(default)]
    pub used_for: String,
    /// Where it was confirmed: `owner/repo@commit path`, or a card's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<String>,
    /// Why it could not be confirmed (instead of `confirmed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<String>,
}

impl Source {
    /// What is wrong with this entry, if anything.
    fn fault(&self) -> Option<String> {
        let blank = |v: &Option<String>| v.as_deref().is_none_or(|v| v.trim().is_empty());
        if self.id.trim().is_empty() || self.id.contains(char::is_whitespace) {
            return Some("`id` must be a hub id such as `owner/name` (no spaces)".into());
        }
        if self
            .revision
            .as_deref()
            .is_some_and(|r| r.is_empty() || r.contains(char::is_whitespace))
        {
            return Some(format!("{}: `revision` must be a commit, branch or tag", self.id));
        }
        match (blank(&self.confirmed), blank(&self.unconfirmed)) {
            (true, true) => Some(format!(
                "{}: say where it was `confirmed` (repository@commit path, or a card's URL) or why it is `unconfirmed`",
                self.id
            )),
            (false, false) => Some(format!("{}: `confirmed` and `unconfirmed` exclude each other", self.id)),
            _ => None,
        }
    }

    /// One line: kind, id, revision, config, splits, and where it was confirmed.
    pub fn describe(&self) -> String {
        let kind = match self.kind {
            SourceKind::Model => "model",
            SourceKind::Dataset => "dataset",
            SourceKind::Protocol => "protocol",
        };
        let mut line = format!("{kind} {}", self.id);
        if let Some(revision) = &self.revision {
            line.push_str(&format!("@{revision}"));
        }
        if let Some(config) = &self.config {
            line.push_str(&format!(" config {config}"));
        }
        if !self.splits.is_empty() {
            line.push_str(&format!(" splits {}", self.splits.join(",")));
        }
        match (&self.confirmed, &self.unconfirmed) {
            (Some(at), _) => line.push_str(&format!(" (confirmed: {at})")),
            (None, Some(why)) => line.push_str(&format!(" (NOT CONFIRMED: {why})")),
            (None, None) => {}
        }
        line
    }
}

/// What a task's preparation must produce: a prepare step that exits 0
/// without it (a failed download) failed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrepareSpec {
    /// Glob patterns, relative to the prepared folder (`public/`, `hidden/`
    /// for a task.toml task; `env/`, `scripts/` for an MLAgentBench one),
    /// each of which must match at least one non-empty file.
    pub outputs: Vec<String>,
}

fn default_suite() -> String {
    "custom".into()
}

/// The metric a task's evaluator reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    /// The metric's name, e.g. `accuracy`.
    pub name: String,
    /// Whether a higher score is better.
    pub higher_is_better: bool,
    /// The score of the unmodified starter code.
    pub baseline: Option<f64>,
    /// Where the baseline comes from (e.g. "mean of seeds 1-3 of the
    /// baseline agent"); a measured baseline (`mlrb tasks baseline`) says so.
    #[serde(default)]
    pub baseline_from: Option<String>,
    /// The score of the task's reference solution (`scripts/reference/`);
    /// with the baseline it defines the normalised score.
    #[serde(default)]
    pub reference: Option<f64>,
    /// How far a re-run of the starter code may land from the baseline, and,
    /// for a metric that is not deterministic, two evaluations of one workspace
    /// from each other.
    #[serde(default)]
    pub tolerance: f64,
    /// False for a metric that measures time: the same workspace then gets
    /// the same score only within `tolerance`.
    #[serde(default = "yes")]
    pub deterministic: bool,
    /// The scores a valid submission can have, `[low, high]` (inclusive);
    /// anything else (an evaluator's mark of a missing submission such as
    /// 1e10, a negative accuracy) is an invalid submission, never a score.
    #[serde(default)]
    pub range: Option<[f64; 2]>,
    /// A magnitude from which an evaluator's value marks a missing
    /// submission rather than a score (MLAgentBench's 1e10), while nobody
    /// declared a range: kept apart from `range`, so that no output shows
    /// it as one.
    #[serde(skip)]
    pub missing_mark: Option<f64>,
    /// Whether the metric's direction is known (declared by the task, an
    /// overlay or the user); when it is not, no improvement or success is
    /// judged. Always true for a `task.toml`, which must declare it.
    #[serde(skip, default = "yes")]
    pub direction_known: bool,
    /// The baseline the task itself declares and its source, where one
    /// measured on this host replaced it (`mlrb verify` accepts either).
    #[serde(skip)]
    pub declared_baseline: Option<(Option<f64>, Option<String>)>,
}

impl TaskSpec {
    /// The spec as JSON, as `mlrb tasks show --json` prints it: a metric
    /// whose direction nobody declared says `higher_is_better: null` and
    /// `direction_known: false`, never a direction.
    pub fn to_json(&self) -> Result<serde_json::Value> {
        let mut value = serde_json::to_value(self)?;
        value["metric"]["direction_known"] = self.metric.direction_known.into();
        if !self.metric.direction_known {
            value["metric"]["higher_is_better"] = serde_json::Value::Null;
        }
        Ok(value)
    }
}

impl Metric {
    /// The first field that does not hold, and what it must be.
    fn fault(&self) -> Option<(&'static str, &'static str)> {
        if self.baseline.is_some_and(|b| !b.is_finite()) {
            return Some(("metric.baseline", "must be a finite number"));
        }
        if self.reference.is_some_and(|b| !b.is_finite()) {
            return Some(("metric.reference", "must be a finite number"));
        }
        if !self.tolerance.is_finite() || self.tolerance < 0.0 {
            return Some(("metric.tolerance", "must be a non-negative number"));
        }
        let [low, high] = self.range?;
        if low.is_nan() || high.is_nan() || low > high {
            return Some(("metric.range", "must be [low, high] with low <= high (inf allowed)"));
        }
        for (field, value) in [("metric.baseline", self.baseline), ("metric.reference", self.reference)] {
            if value.is_some_and(|v| !(low..=high).contains(&v)) {
                return Some((field, "must lie within metric.range"));
            }
        }
        None
    }

    /// Where the baseline comes from, when there is one.
    pub fn baseline_source(&self) -> Option<String> {
        self.baseline?;
        Some(
            self.baseline_from
                .clone()
                .unwrap_or_else(|| "declared by the task".into()),
        )
    }

    /// Why `score` cannot be a valid submission's, if it cannot: outside
    /// the declared range, or, where none is declared, the evaluator's mark
    /// of a missing submission (a range the user declares replaces it).
    pub fn out_of_range(&self, score: f64) -> Option<String> {
        if let (None, Some(mark)) = (self.range, self.missing_mark)
            && (score.is_nan() || score.abs() >= mark)
        {
            return Some(format!(
                "the evaluator's {} of {score} is its mark of a missing submission (±{mark:e}, inf or NaN), not a score",
                self.name
            ));
        }
        let [low, high] = self.range?;
        (!(low..=high).contains(&score)).then(|| {
            format!(
                "the evaluator's {} of {score} is outside its valid range [{low}, {high}] (a mark of a missing or broken submission)",
                self.name
            )
        })
    }
}

fn yes() -> bool {
    true
}

/// What an episode may spend.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budget {
    /// Steps an episode may take.
    pub max_steps: u32,
    /// Wall-clock time an episode may run, in seconds.
    pub wall_seconds: u64,
    /// LLM tokens (input and output) per episode; 0: no limit.
    pub llm_tokens: u64,
    /// LLM spending per episode in USD; 0: no limit.
    pub llm_cost_usd: f64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_steps: 50,
            wall_seconds: 1800,
            llm_tokens: 0,
            llm_cost_usd: 0.0,
        }
    }
}

/// What the task's scripts and workspace may use.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Resources {
    /// CPUs each script may use.
    pub cpus: f64,
    /// Memory each script may use, in MiB.
    pub memory_mb: u64,
    /// Processes each script may run at once.
    pub pids: u32,
    /// Where scripts may connect: `false` (the default), `true` (any public
    /// destination) or `{ allow = ["host:port", ...], ... }`, always
    /// through the episode's egress proxy.
    pub network: crate::network::Network,
    /// The longest a single script may run.
    pub script_timeout_seconds: u64,
    /// The container image for `--sandbox docker` (default: `mlrb image build`'s).
    pub image: Option<String>,
    /// GPUs each episode needs, served from the host's `--gpus` pool.
    pub gpus: u32,
    /// Memory each of those GPUs must have, in GB (0: any).
    pub gpu_memory_gb: f64,
    /// Python modules that must import in the sandbox (e.g. `torch`).
    pub python_packages: Vec<String>,
    /// What the workspace may hold, in MiB (apparent and on disk, each).
    pub workspace_mb: u64,
    /// Files, folders and links the workspace may hold.
    pub workspace_files: u64,
    /// Environment variables every script of the task runs with (its
    /// preparation, starter and evaluator, and the agent's scripts), e.g.
    /// `{ KERAS_BACKEND = "torch" }`. Names mlrb sets itself are refused.
    pub env: std::collections::BTreeMap<String, String>,
}

impl Resources {
    /// What is wrong with these resources, as (field, what).
    fn fault(&self) -> Option<(&'static str, String)> {
        let bad = |field, what: &str| Some((field, what.to_string()));
        if !(self.cpus > 0.0 && self.cpus.is_finite()) {
            return bad("resources.cpus", "must be a positive number");
        }
        if self.memory_mb < 64 {
            return bad("resources.memory_mb", "must be at least 64");
        }
        if self.pids < 8 {
            return bad("resources.pids", "must be at least 8");
        }
        if self.script_timeout_seconds == 0 {
            return bad("resources.script_timeout_seconds", "must be at least 1");
        }
        if !(self.gpu_memory_gb >= 0.0 && self.gpu_memory_gb.is_finite()) {
            return bad("resources.gpu_memory_gb", "must be a non-negative number");
        }
        if self.gpu_memory_gb > 0.0 && self.gpus == 0 {
            return bad("resources.gpu_memory_gb", "is set but `resources.gpus` is 0");
        }
        if let Some((name, why)) = self.env.iter().find_map(|(k, v)| env_fault(k, v).map(|why| (k, why))) {
            return Some(("resources.env", format!("`{name}` {why}")));
        }
        let module = self.python_packages.iter().find(|m| !is_module_name(m))?;
        Some((
            "resources.python_packages",
            format!("has `{module}`, which is not a Python module name (e.g. `torch`, `transformers`)"),
        ))
    }
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            cpus: 2.0,
            memory_mb: 2048,
            pids: 256,
            network: Default::default(),
            script_timeout_seconds: 600,
            image: None,
            gpus: 0,
            gpu_memory_gb: 0.0,
            python_packages: Vec::new(),
            workspace_mb: 10 * 1024,
            workspace_files: 1_000_000,
            env: Default::default(),
        }
    }
}

/// What is wrong with a task's environment variable `name=value`: a name
/// that is not a shell identifier, one mlrb sets for every script (the
/// sandbox's paths and identity, the offline hub, the GPUs), or a value no
/// environment can hold.
fn env_fault(name: &str, value: &str) -> Option<&'static str> {
    const RESERVED: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "TMPDIR",
        "PYTHONPATH",
        "PYTHONHOME",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "TRANSFORMERS_OFFLINE",
        "MLRB_SMOKE",
    ];
    let identifier = name.chars().next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !identifier {
        return Some("is not a variable name (upper-case letters, digits and `_`)");
    }
    if RESERVED.contains(&name) || name.starts_with("HF_") || name.starts_with("LD_") {
        return Some("is set by mlrb for every script: drop it");
    }
    if value.contains('\0') || value.len() > 4096 {
        return Some("has a value no environment can hold (a NUL byte, or over 4096 bytes)");
    }
    None
}

/// Rules for files in the workspace.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Files {
    /// Glob patterns, relative to the workspace root, of files the agent may
    /// not change. A pattern starting with `fnmatch:` follows Python's fnmatch
    /// (`*` also matches `/`), as MLAgentBench's read_only_files.txt does.
    pub read_only: Vec<String>,
}

/// Intermediate scoring through `episode.validate()` (with its split).
pub use super::split::Validation;

/// The one-line form of a TOML parse error, with its line and column.
pub fn toml_error(path: &Path, text: &str, error: &toml::de::Error) -> anyhow::Error {
    let location = error
        .span()
        .map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, str::len) + 1;
            // Name the key on that line, which the TOML message often omits.
            let line_text = text.lines().nth(line - 1).unwrap_or("");
            match line_text.split_once('=') {
                Some((key, _)) if !key.trim().is_empty() && !key.trim().starts_with('[') => {
                    format!(" (line {line}, column {column}, key `{}`)", key.trim())
                }
                _ => format!(" (line {line}, column {column})"),
            }
        })
        .unwrap_or_default();
    anyhow::anyhow!("{}{location}: {}", path.display(), error.message().trim())
}

impl TaskSpec {
    /// Checks the values serde cannot; `source` names the file in errors.
    pub fn check(&self, source: &Path) -> Result<()> {
        let at = |field: &str, what: &str| anyhow::anyhow!("{}: field `{field}` {what}", source.display());
        if self.name.trim().is_empty() || self.name.contains(['/', '\\']) || self.name.starts_with('.') {
            return Err(at("name", "must be a non-empty name without slashes"));
        }
        if self.version.trim().is_empty() {
            return Err(at("version", "must not be empty"));
        }
        if self.research_problem.trim().is_empty() && self.layout.is_none() {
            return Err(at("research_problem", "must say what the agent should do"));
        }
        for pattern in &self.prepare.outputs {
            if pattern.starts_with('/') || pattern.split('/').any(|p| p == "..") {
                return Err(at("prepare.outputs", "patterns are relative to the prepared folder"));
            }
            globset::Glob::new(pattern)
                .map_err(|e| at("prepare.outputs", &format!("has an invalid pattern `{pattern}`: {e}")))?;
        }
        if let Some((field, what)) = self.metric.fault() {
            return Err(at(field, what));
        }
        if self.budget.max_steps == 0 {
            return Err(at("budget.max_steps", "must be at least 1"));
        }
        if self.budget.wall_seconds == 0 {
            return Err(at("budget.wall_seconds", "must be at least 1"));
        }
        if let Some((field, what)) = self.resources.fault() {
            return Err(at(field, &what));
        }
        for pattern in &self.files.read_only {
            let (glob, _) = crate::relpath::read_only_glob(pattern);
            globset::Glob::new(glob)
                .map_err(|e| at("files.read_only", &format!("has an invalid pattern `{pattern}`: {e}")))?;
        }
        if let Some(what) = self.sources.iter().find_map(Source::fault) {
            return Err(at("sources", &what));
        }
        if let Some((field, what)) = self.smoke.as_ref().and_then(Smoke::fault) {
            return Err(at(field, what));
        }
        if let Some((field, what)) = self.scoring_fault() {
            return Err(at(field, what));
        }
        Ok(())
    }

    /// What is wrong with `[scoring]` and `[validation]`, as (field, what).
    fn scoring_fault(&self) -> Option<(&'static str, &'static str)> {
        if let Some(evaluator) = &self.scoring.evaluator
            && (self.layout != Some(super::Layout::MlAgentBench)
                || !super::pylib::files()
                    .iter()
                    .any(|(name, _)| name == evaluator && name.starts_with("mlrb_mlab_")))
        {
            return Some((
                "scoring.evaluator",
                "names one of mlrb's evaluators for MLAgentBench folders (mlrb_mlab_<task>.py), with layout = \"mlagentbench\"",
            ));
        }
        if let Some(fault) = self.validation.split.as_ref().and_then(|s| s.fault()) {
            return Some(fault);
        }
        if self.validation.enabled && !self.validation.hide_score && self.validation.split.is_none() {
            return Some((
                "validation.hide_score",
                "= false would tell the agent its score on the test set: declare [validation.split] \
                 (file and id of the hidden answers, whose public part validate() then scores), or \
                 `none = \"why\"` where the task has no hidden answers",
            ));
        }
        if self.validation.enabled && self.validation.max_calls == 0 {
            return Some(("validation.max_calls", "must be at least 1 when validation is enabled"));
        }
        None
    }
}

fn is_module_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        && !name.starts_with(|c: char| c.is_ascii_digit())
}
