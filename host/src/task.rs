//! Tasks: the `task.toml` format, finding a task by name or path, the cached
//! prepare step, and evaluation with the hidden evaluator.
//!
//! A task folder holds `task.toml`, `env/` (what the agent starts with) and
//! the hidden `scripts/prepare.py` and `scripts/eval.py`. The agent and its
//! scripts never see `scripts/` or what prepare writes to the hidden side.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::sandbox::{self, Mount, Sandbox};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub name: String,
    pub version: String,
    #[serde(default)]
    pub description: String,
    pub research_problem: String,
    pub metric: Metric,
    #[serde(default)]
    pub budget: Budget,
    #[serde(default)]
    pub resources: Resources,
    #[serde(default)]
    pub files: Files,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    pub name: String,
    pub higher_is_better: bool,
    /// The score of the unmodified starter code.
    pub baseline: Option<f64>,
    /// How far a re-run of the starter code may land from the baseline.
    #[serde(default)]
    pub tolerance: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budget {
    pub max_steps: u32,
    pub wall_seconds: u64,
    pub llm_tokens: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_steps: 50,
            wall_seconds: 1800,
            llm_tokens: 0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Resources {
    pub cpus: f64,
    pub memory_mb: u64,
    pub pids: u32,
    pub network: bool,
    /// The longest a single script may run.
    pub script_timeout_seconds: u64,
    /// The container image for `--sandbox docker` (default: `mlrb image build`'s).
    pub image: Option<String>,
    /// GPUs each episode needs, served from the host's `--gpus` pool.
    pub gpus: u32,
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            cpus: 2.0,
            memory_mb: 2048,
            pids: 256,
            network: false,
            script_timeout_seconds: 600,
            image: None,
            gpus: 0,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Files {
    /// Glob patterns, relative to the workspace root, of files the agent may not change.
    pub read_only: Vec<String>,
}

/// A task folder, loaded and checked.
#[derive(Debug, Clone)]
pub struct Task {
    pub root: PathBuf,
    pub spec: TaskSpec,
}

/// The one-line form of a TOML parse error, with its line and column.
fn toml_error(path: &Path, text: &str, error: &toml::de::Error) -> anyhow::Error {
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

impl Task {
    /// Loads the task folder at `root`, with one-line errors naming the file
    /// and field at fault.
    pub fn load(root: &Path) -> Result<Self> {
        let toml_path = root.join("task.toml");
        let text = std::fs::read_to_string(&toml_path)
            .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", toml_path.display()))?;
        let spec: TaskSpec = toml::from_str(&text).map_err(|e| toml_error(&toml_path, &text, &e))?;
        // Absolute, so provenance records and container mounts do not
        // depend on the working directory.
        let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        let task = Self { root, spec };
        task.check()?;
        Ok(task)
    }

    fn check(&self) -> Result<()> {
        let toml_path = self.root.join("task.toml");
        let at = |field: &str, what: &str| anyhow::anyhow!("{}: field `{field}` {what}", toml_path.display());
        let spec = &self.spec;
        if spec.name.trim().is_empty() || spec.name.contains(['/', '\\']) || spec.name.starts_with('.') {
            return Err(at("name", "must be a non-empty name without slashes"));
        }
        if spec.version.trim().is_empty() {
            return Err(at("version", "must not be empty"));
        }
        if spec.research_problem.trim().is_empty() {
            return Err(at("research_problem", "must say what the agent should do"));
        }
        if spec.metric.baseline.is_some_and(|b| !b.is_finite()) {
            return Err(at("metric.baseline", "must be a finite number"));
        }
        if !spec.metric.tolerance.is_finite() || spec.metric.tolerance < 0.0 {
            return Err(at("metric.tolerance", "must be a non-negative number"));
        }
        if spec.budget.max_steps == 0 {
            return Err(at("budget.max_steps", "must be at least 1"));
        }
        if spec.budget.wall_seconds == 0 {
            return Err(at("budget.wall_seconds", "must be at least 1"));
        }
        let r = &spec.resources;
        if !(r.cpus > 0.0 && r.cpus.is_finite()) {
            return Err(at("resources.cpus", "must be a positive number"));
        }
        if r.memory_mb < 64 {
            return Err(at("resources.memory_mb", "must be at least 64"));
        }
        if r.pids < 8 {
            return Err(at("resources.pids", "must be at least 8"));
        }
        if r.script_timeout_seconds == 0 {
            return Err(at("resources.script_timeout_seconds", "must be at least 1"));
        }
        for pattern in &spec.files.read_only {
            globset::Glob::new(pattern)
                .map_err(|e| at("files.read_only", &format!("has an invalid pattern `{pattern}`: {e}")))?;
        }
        if !self.env_dir().is_dir() {
            bail!(
                "{}: missing: a task needs an env/ folder with the agent's starting files",
                self.env_dir().display()
            );
        }
        if !self.eval_script().is_file() {
            bail!(
                "{}: missing: a task needs a hidden evaluator",
                self.eval_script().display()
            );
        }
        Ok(())
    }

    pub fn env_dir(&self) -> PathBuf {
        self.root.join("env")
    }
    pub fn scripts_dir(&self) -> PathBuf {
        self.root.join("scripts")
    }
    pub fn prepare_script(&self) -> PathBuf {
        self.scripts_dir().join("prepare.py")
    }
    pub fn eval_script(&self) -> PathBuf {
        self.scripts_dir().join("eval.py")
    }

    /// Identifies the prepared data: task name and version, plus the content
    /// of the prepare script so an edited script never reuses stale data.
    pub fn prepare_key(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        hasher.update(self.spec.name.as_bytes());
        hasher.update(b"\0");
        hasher.update(self.spec.version.as_bytes());
        hasher.update(b"\0");
        if let Ok(bytes) = std::fs::read(self.prepare_script()) {
            hasher.update(&bytes);
        }
        let hash = hasher.finalize().to_hex();
        format!("{}-{}-{}", self.spec.name, self.spec.version, &hash[..16])
    }

    /// Sandbox limits for the task's own scripts (prepare, evaluate).
    pub fn task_script_limits(&self, timeout: Duration) -> sandbox::Limits {
        sandbox::Limits {
            timeout,
            memory_bytes: self.spec.resources.memory_mb << 20,
            max_processes: self.spec.resources.pids,
            cpus: self.spec.resources.cpus,
            ..sandbox::Limits::default()
        }
    }
}

/// Where built-in tasks live: `$MLRB_TASKS_DIR`, `./tasks`, or the tasks
/// folder of the source tree this binary was built from.
pub fn builtin_tasks_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MLRB_TASKS_DIR") {
        return PathBuf::from(dir);
    }
    let local = PathBuf::from("tasks");
    if local.join(".").is_dir()
        && std::fs::read_dir(&local)
            .map(|mut d| d.any(|e| e.is_ok_and(|e| e.path().join("task.toml").is_file())))
            .unwrap_or(false)
    {
        return local;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks")
}

/// Finds a task by folder path or by built-in name.
pub fn resolve(name_or_path: &str) -> Result<Task> {
    let as_path = Path::new(name_or_path);
    if as_path.join("task.toml").is_file() {
        return Task::load(as_path);
    }
    if as_path.is_dir() {
        bail!("{name_or_path}: no task.toml in this folder");
    }
    let builtin = builtin_tasks_dir().join(name_or_path);
    if !name_or_path.contains('/') && builtin.join("task.toml").is_file() {
        return Task::load(&builtin);
    }
    bail!(
        "no task named `{name_or_path}`: `mlrb tasks list` shows the built-in tasks, or pass the path of a task folder"
    )
}

/// Every loadable task under `dir`, with the error of each one that is not.
pub fn list(dir: &Path) -> Vec<Result<Task>> {
    let mut roots: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.join("task.toml").is_file())
                .collect()
        })
        .unwrap_or_default();
    roots.sort();
    roots.iter().map(|root| Task::load(root)).collect()
}

/// The prepared data of a task: `public/` for the workspace, `hidden/` for
/// the evaluator only.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub dir: PathBuf,
    pub from_cache: bool,
}

impl Prepared {
    pub fn public(&self) -> PathBuf {
        self.dir.join("public")
    }
    pub fn hidden(&self) -> PathBuf {
        self.dir.join("hidden")
    }
}

/// Runs the task's prepare step once per task version, in the sandbox,
/// caching the result under `cache_dir/prepared/`.
pub async fn prepare(task: &Task, sandbox: &dyn Sandbox, cache_dir: &Path) -> Result<Prepared> {
    let base = cache_dir.join("prepared");
    let dir = base.join(task.prepare_key());
    if dir.join("complete").is_file() {
        return Ok(Prepared { dir, from_cache: true });
    }
    std::fs::create_dir_all(&base)?;
    let staging = tempfile::Builder::new().prefix(".staging-").tempdir_in(&base)?;
    let public = staging.path().join("public");
    let hidden = staging.path().join("hidden");
    std::fs::create_dir_all(&public)?;
    std::fs::create_dir_all(&hidden)?;
    if task.prepare_script().is_file() {
        let command = sandbox::Command {
            argv: vec![
                "python3".into(),
                "/task/scripts/prepare.py".into(),
                "/out/public".into(),
                "/out/hidden".into(),
            ],
            cwd: "/task/scripts".into(),
            mounts: vec![
                Mount::read_only(task.scripts_dir(), "/task/scripts"),
                Mount::writable(&public, "/out/public"),
                Mount::writable(&hidden, "/out/hidden"),
            ],
            env: vec![],
            network: task.spec.resources.network,
            limits: task.task_script_limits(Duration::from_secs(1800)),
            log_prefix: Some(staging.path().join("prepare")),
        };
        let outcome = sandbox.run(command).await?;
        if !outcome.success() {
            let last = outcome.stderr.text.trim().lines().last().unwrap_or("").to_string();
            bail!(
                "task {}: prepare step failed ({:?}, exit code {:?}){}{}",
                task.spec.name,
                outcome.termination,
                outcome.exit_code,
                if last.is_empty() {
                    String::new()
                } else {
                    format!(": {last}")
                },
                if outcome.stderr.text.contains("EOFError") {
                    " (prepare asked for input; prepare steps must run unattended)"
                } else {
                    ""
                }
            );
        }
    }
    std::fs::write(staging.path().join("complete"), task.prepare_key())?;
    let staged = staging.keep();
    match std::fs::rename(&staged, &dir) {
        Ok(()) => {}
        // Another host prepared the same version first: use theirs.
        Err(_) if dir.join("complete").is_file() => {
            let _ = std::fs::remove_dir_all(&staged);
        }
        Err(e) => return Err(e).with_context(|| format!("storing prepared data in {}", dir.display())),
    }
    Ok(Prepared { dir, from_cache: false })
}

/// What the evaluator said of a workspace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Evaluation {
    pub score: Option<f64>,
    pub valid: bool,
    /// Why the submission is not valid, or why evaluation failed.
    pub error: Option<String>,
    /// True when the evaluator itself failed (a task or host problem, not the agent's).
    pub evaluator_failed: bool,
    pub duration_ms: u64,
}

#[derive(Deserialize)]
struct EvalLine {
    score: Option<f64>,
    #[serde(default)]
    error: Option<String>,
}

/// Scores `workspace` (read-only inside) with the task's hidden evaluator in
/// a fresh sandbox, the only place the hidden files are mounted.
pub async fn evaluate(
    task: &Task,
    sandbox: &dyn Sandbox,
    workspace: &Path,
    hidden: &Path,
    log_prefix: Option<PathBuf>,
) -> Result<Evaluation> {
    let command = sandbox::Command {
        argv: vec![
            "python3".into(),
            "/task/scripts/eval.py".into(),
            "/workspace".into(),
            "/hidden".into(),
        ],
        cwd: "/task/scripts".into(),
        mounts: vec![
            Mount::read_only(task.scripts_dir(), "/task/scripts"),
            Mount::read_only(workspace, "/workspace"),
            Mount::read_only(hidden, "/hidden"),
        ],
        env: vec![],
        network: false,
        limits: task.task_script_limits(Duration::from_secs(task.spec.resources.script_timeout_seconds.max(60))),
        log_prefix,
    };
    let outcome = sandbox.run(command).await?;
    let duration_ms = outcome.duration.as_millis() as u64;
    let failed = |error: String| Evaluation {
        score: None,
        valid: false,
        error: Some(error),
        evaluator_failed: true,
        duration_ms,
    };
    if !outcome.success() {
        let last = outcome.stderr.text.trim().lines().last().unwrap_or("").to_string();
        return Ok(failed(format!(
            "evaluator failed ({:?}, exit code {:?}): {last}",
            outcome.termination, outcome.exit_code
        )));
    }
    let Some(line) = outcome.stdout.text.lines().rev().find(|l| !l.trim().is_empty()) else {
        return Ok(failed(
            "evaluator printed nothing; it must print a JSON line with `score`".into(),
        ));
    };
    let parsed: EvalLine = match serde_json::from_str(line.trim()) {
        Ok(parsed) => parsed,
        Err(e) => {
            return Ok(failed(format!(
                "evaluator's last line is not JSON with `score` ({e}): {line}"
            )));
        }
    };
    Ok(match parsed.score.filter(|s| s.is_finite()) {
        Some(score) => Evaluation {
            score: Some(score),
            valid: true,
            error: None,
            evaluator_failed: false,
            duration_ms,
        },
        None => Evaluation {
            score: None,
            valid: false,
            error: Some(parsed.error.unwrap_or_else(|| "invalid submission".into())),
            evaluator_failed: false,
            duration_ms,
        },
    })
}

/// Relative improvement over the baseline in the metric's direction
/// (0.1 = 10 % better), as MLAgentBench defines it.
pub fn improvement(score: f64, baseline: f64, higher_is_better: bool) -> Option<f64> {
    if baseline == 0.0 {
        return None;
    }
    let delta = if higher_is_better {
        score - baseline
    } else {
        baseline - score
    };
    Some(delta / baseline.abs())
}

/// MLAgentBench's success rule: more than 10 % better than the baseline.
pub const SUCCESS_THRESHOLD: f64 = 0.10;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn improvement_follows_the_metric_direction() {
        assert!((improvement(0.99, 0.9, true).unwrap() - 0.1).abs() < 1e-9);
        assert!((improvement(80.0, 100.0, false).unwrap() - 0.2).abs() < 1e-9);
        assert!(improvement(120.0, 100.0, false).unwrap() < 0.0);
        assert!(improvement(1.0, 0.0, true).is_none());
    }

    fn write_task(dir: &Path, toml: &str) {
        std::fs::create_dir_all(dir.join("env")).unwrap();
        std::fs::create_dir_all(dir.join("scripts")).unwrap();
        std::fs::write(dir.join("scripts/eval.py"), "print('{\"score\": 1}')").unwrap();
        std::fs::write(dir.join("task.toml"), toml).unwrap();
    }

    const GOOD: &str = "name = \"t\"\nversion = \"1\"\nresearch_problem = \"do it\"\n[metric]\nname = \"acc\"\nhigher_is_better = true\n";

    #[test]
    fn malformed_task_toml_names_file_and_field() {
        let tmp = tempfile::tempdir().unwrap();
        write_task(tmp.path(), GOOD);
        assert!(Task::load(tmp.path()).is_ok());

        write_task(tmp.path(), "name = \"t\"\nversion = \"1\"\nresearch_problem = \"x\"\n");
        let err = Task::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("task.toml") && err.contains("metric"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");

        write_task(tmp.path(), &format!("{GOOD}[budget]\nmax_steps = \"many\"\n"));
        let err = Task::load(tmp.path()).unwrap_err().to_string();
        assert!(
            err.contains("line 8") && err.contains("max_steps") || err.contains("invalid type"),
            "{err}"
        );

        write_task(tmp.path(), &format!("{GOOD}[budget]\nmax_steps = 0\n"));
        let err = Task::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("budget.max_steps"), "{err}");

        write_task(tmp.path(), &format!("{GOOD}colour = \"blue\"\n"));
        let err = Task::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("colour"), "{err}");

        write_task(tmp.path(), "this is [not toml");
        let err = Task::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("task.toml (line 1"), "{err}");
    }

    #[test]
    fn missing_task_is_one_clear_line() {
        let err = resolve("no-such-task-anywhere").unwrap_err().to_string();
        assert!(
            err.contains("no task named") && err.contains("mlrb tasks list"),
            "{err}"
        );
    }
}
