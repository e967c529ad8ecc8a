//! Tasks: finding a task folder by name or path, loading it (an mlrb
//! `task.toml` folder or an MLAgentBench folder, unchanged), the cached
//! prepare step, evaluation with the hidden evaluator, the checks a host
//! makes before it starts anything, and the task's own quality tests.
//!
//! A task folder holds `env/` (what the agent starts with) and the hidden
//! `scripts/` (prepare, evaluation, answers, reference solution). The agent
//! and its scripts never see `scripts/` or what prepare writes to the hidden
//! side.

pub mod baseline;
pub mod check;
pub mod code_scan;
pub mod content;
mod dry_run;
mod evaluate;
mod failure;
pub mod feedback;
mod fetch;
mod hf_snapshot;
pub mod hub;
pub mod imports;
pub mod item;
mod kaggle;
mod mlab_smoke;
pub mod mlagentbench;
pub mod mlagentbench_table;
pub mod overrides;
mod populate;
mod prepare;
pub mod pylib;
mod real_data;
mod refusals;
pub mod requirements;
mod sealed;
pub mod self_report;
pub mod selftest;
pub mod smoke;
pub mod spec;
pub mod split;
mod starter;
pub mod submission;
pub mod suite;
mod zip_listing;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};
use serde::Serialize;

pub use evaluate::{EvalRequest, Evaluation, SPREAD_FLOOR, Spread, evaluate};
pub use populate::{apply_reference, populate};
pub use prepare::{Prepared, prepare, prepare_from};
pub use spec::TaskSpec;

use crate::limits::Limits;
use crate::sandbox;

/// How a task folder is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// `task.toml`, `env/`, `scripts/prepare.py <public> <hidden>`,
    /// `scripts/eval.py <workspace> <hidden>` printing `{"score": ...}`.
    Native,
    /// MLAgentBench's: `env/`, `scripts/research_problem.txt`,
    /// `scripts/prepare.py` writing into `../env`, `scripts/eval.py` with
    /// `get_score(folder)`, `scripts/read_only_files.txt`; a task.toml
    /// beside them may declare what they do not (`layout = "mlagentbench"`).
    #[serde(rename = "mlagentbench")]
    MlAgentBench,
}

/// A task folder, loaded and checked.
#[derive(Debug, Clone)]
pub struct Task {
    /// The task folder, as an absolute path.
    pub root: PathBuf,
    /// What `task.toml` (or the MLAgentBench folder) declares.
    pub spec: TaskSpec,
    /// How the folder is laid out.
    pub layout: Layout,
    /// Whether the user let preparation reach the network (`--network`),
    /// beyond what the task itself grants.
    pub prepare_network: bool,
    /// The offline hub its scripts use instead of the Hugging Face hub:
    /// the smoke profile's stand-in (`mlrb tasks test --smoke`), or one
    /// assembled from files a user brought (`mlrb tasks prepare --from`).
    pub hub: Option<hub::Hub>,
}

impl Task {
    /// Loads the task folder at `root`: its `task.toml`, or else an
    /// MLAgentBench layout. Errors are one line naming the file and field.
    pub fn load(root: &Path) -> Result<Self> {
        // Absolute, so provenance records and container mounts do not
        // depend on the working directory.
        let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
        let toml_path = root.join("task.toml");
        let (spec, layout) = if toml_path.is_file() {
            let text = std::fs::read_to_string(&toml_path)
                .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", toml_path.display()))?;
            let spec: TaskSpec = toml::from_str(&text).map_err(|e| spec::toml_error(&toml_path, &text, &e))?;
            spec.check(&toml_path)?;
            match spec.layout {
                Some(Layout::MlAgentBench) => (mlagentbench::declared(&root, spec)?, Layout::MlAgentBench),
                _ => (spec, Layout::Native),
            }
        } else if mlagentbench::looks_like(&root) {
            (mlagentbench::spec(&root)?, Layout::MlAgentBench)
        } else {
            bail!(
                "{}: not a task folder: it needs a task.toml, or MLAgentBench's env/ and scripts/research_problem.txt",
                root.display()
            );
        };
        let mut task = Self {
            root,
            spec,
            layout,
            prepare_network: false,
            hub: None,
        };
        task.check_files()?;
        // A baseline measured on this host (`mlrb tasks baseline`) is what
        // this host's scores are judged against.
        if let Some(measured) = baseline::load(&task, &crate::paths::cache_dir()) {
            let metric = &mut task.spec.metric;
            metric.declared_baseline = Some((metric.baseline, metric.baseline_source()));
            task.spec.metric.baseline = Some(measured.mean);
            task.spec.metric.baseline_from = Some(measured.source());
        }
        // Real data fetched from the Hugging Face hub are read from the
        // offline hub kept with them, not the network.
        task.hub = real_data::prepared_hub(&task, &crate::paths::cache_dir());
        Ok(task)
    }

    fn check_files(&self) -> Result<()> {
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

    /// `env/`: the files the agent's workspace starts with.
    pub fn env_dir(&self) -> PathBuf {
        self.root.join("env")
    }
    /// `scripts/`: the hidden scripts, never shown to the agent.
    pub fn scripts_dir(&self) -> PathBuf {
        self.root.join("scripts")
    }
    /// The prepare script, `scripts/prepare.py`.
    pub fn prepare_script(&self) -> PathBuf {
        self.scripts_dir().join("prepare.py")
    }
    /// The hidden evaluator, `scripts/eval.py`.
    pub fn eval_script(&self) -> PathBuf {
        self.scripts_dir().join("eval.py")
    }
    /// Files that replace or join `env/` to make the reference solution.
    pub fn reference_dir(&self) -> PathBuf {
        self.scripts_dir().join("reference")
    }

    /// The blake3 of everything in the task folder (its definition, scripts,
    /// evaluator, hidden files and data), for provenance: a result can be
    /// traced to exactly the folder it was scored with.
    pub fn content_hash(&self) -> Result<String> {
        content::hash_folder(&self.root, &[""], u64::MAX, |_| false)
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
        // A split is part of the prepared data (its parts' folders).
        if let Some(split) = self.spec.validation.split.as_ref().filter(|s| s.splits()) {
            hasher.update(b"\0split\0");
            hasher.update(split.splitter_spec(&self.split_seed()).to_string().as_bytes());
        }
        // What preparation runs with is part of what it made.
        for (name, value) in &self.spec.resources.env {
            hasher.update(format!("\0env\0{name}={value}").as_bytes());
        }
        // The smoke profile's data are prepared from its stand-in, apart.
        if let Some(stand_in) = self.hub.as_ref().filter(|h| h.stand_in) {
            hasher.update(b"\0smoke\0");
            hasher.update(stand_in.key.as_bytes());
        }
        let hash = hasher.finalize().to_hex();
        let profile = if self.smoke() { "smoke-" } else { "" };
        format!("{profile}{}-{}-{}", self.spec.name, self.spec.version, &hash[..16])
    }

    /// The part of the hidden answers a final score reads: the private one
    /// where the task splits them.
    pub fn final_part(&self) -> split::Part {
        match &self.spec.validation.split {
            Some(split) if split.splits() => split::Part::Private,
            _ => split::Part::Whole,
        }
    }

    /// The seed of the task's split: fixed per task version.
    pub fn split_seed(&self) -> String {
        format!("{}@{}", self.spec.name, self.spec.version)
    }

    /// Whether the task runs in the smoke profile (its hub is the stand-in).
    pub fn smoke(&self) -> bool {
        self.hub.as_ref().is_some_and(|h| h.stand_in)
    }

    /// `command`, one of the task's scripts, as its profile runs it: with
    /// the task's environment (`resources.env`) and its offline hub, when
    /// it has one.
    pub fn in_profile(&self, mut command: sandbox::Command) -> sandbox::Command {
        command.env.extend(self.env());
        match &self.hub {
            Some(hub) => hub.apply(command),
            None => command,
        }
    }

    /// What each of an episode's scripts runs with, as [`Self::in_profile`]
    /// gives the task's own: the hub's mounts (for the sandbox's opening),
    /// the environment and the command the argv goes through.
    pub fn episode_profile(&self) -> hub::EpisodeProfile {
        let (mounts, (mut env, wrapper)) = self.hub.as_ref().map(|h| h.for_episode()).unwrap_or_default();
        env.splice(0..0, self.env());
        (mounts, (env, wrapper))
    }

    /// The task's own environment variables, as (name, value).
    fn env(&self) -> Vec<(String, String)> {
        self.spec
            .resources
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Whether preparation may reach the network: the task grants it, or the user did.
    pub fn prepare_network(&self) -> bool {
        self.spec.resources.network.granted() || self.prepare_network
    }

    /// How the task's own scripts reach the network, and the egress proxy
    /// that must live as long as they run: the host's network for
    /// preparation when the user passed `--network` (`host_allowed`), else
    /// the task's grant through a proxy, else none.
    pub fn reach(&self, host_allowed: bool) -> Result<(sandbox::Reach, Option<sandbox::egress::gateway::Gateway>)> {
        if host_allowed && self.prepare_network {
            return Ok((sandbox::Reach::Host, None));
        }
        let Some(grant) = self.spec.resources.network.allow_list() else {
            return Ok((sandbox::Reach::Nothing, None));
        };
        let gateway = sandbox::egress::gateway::Gateway::start(grant.clone(), crate::network::Tally::shared())?;
        Ok((sandbox::Reach::Proxy(gateway.socket()), Some(gateway)))
    }

    /// The limits an episode of this task runs under, before the user's
    /// overrides: its budget and resources, mlrb's defaults for the rest.
    pub fn limits(&self) -> Limits {
        let (budget, resources) = (&self.spec.budget, &self.spec.resources);
        Limits {
            max_steps: budget.max_steps,
            wall_seconds: budget.wall_seconds,
            llm_tokens: budget.llm_tokens,
            llm_cost_usd: budget.llm_cost_usd,
            script_timeout_seconds: resources.script_timeout_seconds,
            script_memory_bytes: resources.memory_mb << 20,
            script_max_processes: resources.pids,
            script_cpus: resources.cpus,
            network: resources.network.clone(),
            prepare_network: self.prepare_network,
            workspace_bytes: resources.workspace_mb << 20,
            // Room for the workspace three times over: every step may change it.
            snapshot_bytes: 3 * (resources.workspace_mb << 20),
            workspace_files: resources.workspace_files,
            ..Limits::default()
        }
    }

    /// Sandbox limits for the task's own scripts (prepare, evaluate).
    pub fn task_script_limits(&self, timeout: Duration) -> sandbox::CommandLimits {
        sandbox::CommandLimits::new(&self.limits(), timeout)
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
    if as_path.join("task.toml").is_file() || mlagentbench::looks_like(as_path) {
        return Task::load(as_path);
    }
    let builtin = builtin_tasks_dir().join(name_or_path);
    if !name_or_path.contains('/') && builtin.join("task.toml").is_file() {
        return Task::load(&builtin);
    }
    if as_path.is_dir() {
        return Task::load(as_path);
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

/// Removes prepared data not used for `unused_for`, staging folders of
/// interrupted prepares, `mlrb tasks test` leftovers and Python helpers of
/// other mlrb versions; returns what was removed and its size.
pub fn prune_cache(cache_dir: &Path, unused_for: Duration) -> Result<Vec<(PathBuf, u64)>> {
    let now = std::time::SystemTime::now();
    let current_pylib = pylib::install(cache_dir)?;
    let mut removed = Vec::new();
    for (sub, keep) in [("prepared", true), ("task-test", false), ("pylib", true)] {
        let Ok(entries) = std::fs::read_dir(cache_dir.join(sub)) else {
            continue;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(data) = name.strip_suffix(prepare::USED_SUFFIX) {
                // A marker whose data are gone goes too.
                if !path.with_file_name(data).exists() {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            }
            let modified = |p: &Path| std::fs::symlink_metadata(p).and_then(|m| m.modified()).ok();
            let last_used = modified(&path).max(modified(&prepare::used_marker(&path)));
            let age = last_used.and_then(|t| now.duration_since(t).ok()).unwrap_or_default();
            let stale = match sub {
                _ if name.starts_with(".staging-") => age > Duration::from_secs(3600),
                "pylib" => path != current_pylib,
                _ => !keep || age > unused_for,
            };
            if stale {
                let size: u64 = walkdir::WalkDir::new(&path)
                    .into_iter()
                    .filter_map(|e| e.ok())
                    .filter_map(|e| e.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
                    .sum();
                sealed::unseal(&path)?;
                std::fs::remove_dir_all(&path)?;
                removed.push((path, size));
            }
        }
    }
    Ok(removed)
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

        // A task's environment may not set what mlrb sets for every script.
        for (name, field) in [
            ("PATH", "PATH"),
            ("HF_HOME", "HF_HOME"),
            ("LD_PRELOAD", "LD_PRELOAD"),
            ("lower", "lower"),
        ] {
            write_task(tmp.path(), &format!("{GOOD}[resources.env]\n{name} = \"x\"\n"));
            let err = Task::load(tmp.path()).unwrap_err().to_string();
            assert!(err.contains("resources.env") && err.contains(field), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
        write_task(
            tmp.path(),
            &format!("{GOOD}[resources.env]\nKERAS_BACKEND = \"torch\"\n"),
        );
        let task = Task::load(tmp.path()).unwrap();
        let command = task.in_profile(sandbox::Command {
            argv: vec!["python3".into()],
            cwd: "/".into(),
            mounts: Vec::new(),
            env: Vec::new(),
            network: sandbox::Reach::Nothing,
            limits: task.task_script_limits(std::time::Duration::from_secs(1)),
            gpus: Vec::new(),
            log_prefix: None,
            stop: Default::default(),
            meter: Default::default(),
        });
        assert!(
            command.env.contains(&("KERAS_BACKEND".into(), "torch".into())),
            "{:?}",
            command.env
        );
        let (_, (env, _)) = task.episode_profile();
        assert_eq!(env, vec![("KERAS_BACKEND".to_string(), "torch".to_string())]);

        write_task(tmp.path(), "this is [not toml");
        let err = Task::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("task.toml (line 1"), "{err}");
    }

    #[test]
    fn validate_may_tell_a_number_only_of_a_public_part() {
        let tmp = tempfile::tempdir().unwrap();
        // hide_score defaults to true: validity only.
        write_task(tmp.path(), &format!("{GOOD}[validation]\nenabled = true\n"));
        let task = Task::load(tmp.path()).unwrap();
        assert!(!task.spec.validation.reveals());
        // Telling the score of the whole test set is refused, naming the field.
        write_task(
            tmp.path(),
            &format!("{GOOD}[validation]\nenabled = true\nhide_score = false\n"),
        );
        let err = Task::load(tmp.path()).unwrap_err().to_string();
        assert!(
            err.contains("task.toml") && err.contains("validation.hide_score"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        // With a split, it tells the public part's.
        let split = "[validation.split]\nfile = \"answers.csv\"\nid = \"id\"\npublic = 0.3\n";
        write_task(
            tmp.path(),
            &format!("{GOOD}[validation]\nenabled = true\nhide_score = false\n{split}"),
        );
        let task = Task::load(tmp.path()).unwrap();
        assert!(task.spec.validation.reveals());
        assert_eq!(task.spec.validation.part(), split::Part::Public);
        write_task(
            tmp.path(),
            &format!("{GOOD}[validation]\nenabled = true\nmax_calls = 0\n"),
        );
        let err = Task::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("validation.max_calls"), "{err}");
    }

    #[test]
    fn every_built_in_task_declares_the_range_of_its_scores() {
        let tasks = list(&builtin_tasks_dir());
        assert!(tasks.len() > 20);
        for task in tasks {
            let task = task.unwrap();
            let metric = &task.spec.metric;
            assert!(metric.range.is_some(), "{}: metric.range", task.spec.name);
            assert!(metric.out_of_range(f64::MAX).is_some() || metric.range.unwrap()[1].is_infinite());
            assert!(
                metric.out_of_range(-1.0).is_some(),
                "{}: a negative score is invalid",
                task.spec.name
            );
        }
    }

    #[test]
    fn a_source_says_where_it_was_confirmed_or_why_not() {
        let tmp = tempfile::tempdir().unwrap();
        let source = |fields: &str| format!("{GOOD}[[sources]]\nkind = \"dataset\"\n{fields}\n");
        write_task(
            tmp.path(),
            &source("id = \"o/d\"\nrevision = \"abc123\"\nsplits = [\"test\"]\nconfirmed = \"o/r@1 README.md\""),
        );
        let task = Task::load(tmp.path()).unwrap();
        assert_eq!(
            task.spec.sources[0].describe(),
            "dataset o/d@abc123 splits test (confirmed: o/r@1 README.md)"
        );
        for (fields, says) in [
            ("id = \"o/d\"", "say where it was `confirmed`"),
            (
                "id = \"o/d\"\nconfirmed = \"x\"\nunconfirmed = \"y\"",
                "exclude each other",
            ),
            ("id = \"o d\"\nconfirmed = \"x\"", "`id` must be a hub id"),
            ("id = \"o/d\"\nrevision = \"\"\nconfirmed = \"x\"", "`revision` must be"),
            ("id = \"o/d\"\nconfirmed = \"x\"\nlicence = \"mit\"", "licence"),
        ] {
            write_task(tmp.path(), &source(fields));
            let err = Task::load(tmp.path()).unwrap_err().to_string();
            assert!(err.contains("task.toml") && err.contains(says), "{fields}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }

    #[test]
    fn a_smoke_table_names_a_script_under_scripts_and_why() {
        let tmp = tempfile::tempdir().unwrap();
        let smoke = |fields: &str| format!("{GOOD}[smoke]\n{fields}\n");
        write_task(tmp.path(), &smoke("starter_args = [\"--max-steps\", \"2\"]"));
        let task = Task::load(tmp.path()).unwrap();
        assert_eq!(task.spec.smoke.unwrap().starter_args, ["--max-steps", "2"]);
        for (fields, says) in [
            ("submission = \"smoke/s.py\"", "smoke.reason"),
            ("submission = \"../../etc/s.py\"\nreason = \"gpu\"", "under scripts/"),
            ("submission = \"/s.py\"\nreason = \"gpu\"", "under scripts/"),
            ("submission = \"smoke/s.sh\"\nreason = \"gpu\"", "under scripts/"),
            (
                "submission = \"s.py\"\nreason = \"gpu\"\nstarter_args = [\"-x\"]",
                "replaces the starter",
            ),
            ("reason = \"gpu\"", "only for a `smoke.submission`"),
            ("starter_args = \"--fast\"", "starter_args"),
        ] {
            write_task(tmp.path(), &smoke(fields));
            let err = Task::load(tmp.path()).unwrap_err().to_string();
            assert!(err.contains("task.toml") && err.contains(says), "{fields}: {err}");
            assert_eq!(err.lines().count(), 1, "{err}");
        }
    }

    /// Every ml-research-benchmark task names its models, datasets and
    /// protocol, and where each was confirmed or why it could not be.
    #[test]
    fn every_research_benchmark_task_lists_its_sources() {
        for task in list(&builtin_tasks_dir()) {
            let task = task.unwrap();
            if task.spec.suite != "ml-research-benchmark" {
                continue;
            }
            let kinds: Vec<_> = task.spec.sources.iter().map(|s| s.kind).collect();
            for kind in [spec::SourceKind::Protocol, spec::SourceKind::Dataset] {
                assert!(kinds.contains(&kind), "{}: no {kind:?} in [[sources]]", task.spec.name);
            }
        }
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
