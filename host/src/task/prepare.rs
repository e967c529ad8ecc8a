//! The prepare step: run once per task version in the sandbox, cached under
//! `<cache>/prepared/<key>/`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::sealed::{publish, seal, unseal};
use super::{Layout, Task, mlagentbench, populate, pylib};
use crate::sandbox::{self, Mount, Outcome, Sandbox};

/// The smoke profile's stand-in for what MLAgentBench folders download.
const STAND_IN: &str = "/mlrb/lib/mlrb_standin_mlab.py";
/// The longest a prepare step may run.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(1800);

/// The prepared data of a task: what the workspace is made from, and what
/// only the evaluator sees.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Names this preparation in records.
    pub key: String,
    /// The folder that holds the prepared data.
    pub dir: PathBuf,
    /// Whether the data were prepared before, not by this call.
    pub from_cache: bool,
    /// Copied into the workspace (after `env/`, unless `includes_env`).
    pub public: PathBuf,
    /// Mounted for the evaluator only.
    pub hidden: PathBuf,
    /// True when `public` is the whole prepared `env/` (MLAgentBench layout).
    pub includes_env: bool,
}

impl Prepared {
    fn at(task: &Task, dir: PathBuf, from_cache: bool) -> Self {
        let key = task.prepare_key();
        match task.layout {
            Layout::Native => Self {
                key,
                public: dir.join("public"),
                hidden: dir.join("hidden"),
                includes_env: false,
                dir,
                from_cache,
            },
            Layout::MlAgentBench => Self {
                key,
                public: dir.join("env"),
                hidden: dir.join("scripts"),
                includes_env: true,
                dir,
                from_cache,
            },
        }
    }

    /// The hidden answers an evaluation of `part` is given: the part's
    /// folder where the task splits them, else all of them.
    pub fn hidden_part(&self, part: super::split::Part) -> PathBuf {
        super::split::part_dir(&self.dir, &self.hidden, part)
    }

    /// Where this task's prepared data are (or would be) cached.
    pub fn cache_path(task: &Task, cache_dir: &Path) -> PathBuf {
        cache_dir.join("prepared").join(task.prepare_key())
    }

    /// The prepared data if they already exist, without preparing anything.
    pub fn existing(task: &Task, cache_dir: &Path) -> Option<Self> {
        // A folder with nothing to prepare is used in place, unless its
        // evaluator is to fetch its data now (`--network`: the warm-up).
        let warm_up = task.prepare_network() && !task.root.join("scripts/prepared").is_file();
        // The smoke profile's data are its stand-in's, never a folder's real ones.
        let in_place = mlagentbench::prepared_in_place(&task.root) && !task.smoke();
        let dir = Self::cache_path(task, cache_dir);
        let cached = dir.join("complete").is_file();
        // Real data fetched before (`--network`) are used offline after.
        if task.layout == Layout::MlAgentBench && in_place && !warm_up && !cached {
            return Some(Self::at(task, task.root.clone(), true));
        }
        if !cached {
            return None;
        }
        // Data prepared by an older mlrb were not sealed: seal them now.
        use std::os::unix::fs::PermissionsExt;
        if std::fs::metadata(&dir).is_ok_and(|m| m.permissions().mode() & 0o222 != 0)
            && let Err(error) = seal(&dir)
        {
            tracing::warn!(error = %format!("{error:#}"), "sealing prepared data");
        }
        // Data in use survive `mlrb cache prune`; the mark is beside them,
        // so the sealed data themselves never change.
        let _ = std::fs::File::create(used_marker(&dir)).and_then(|f| f.set_modified(std::time::SystemTime::now()));
        Some(Self::at(task, dir, true))
    }
}

/// Runs the task's prepare step once per task version, in the sandbox,
/// without network unless the task grants it, with stdin closed.
pub async fn prepare(task: &Task, sandbox: &dyn Sandbox, cache_dir: &Path) -> Result<Prepared> {
    if let Some(prepared) = Prepared::existing(task, cache_dir) {
        return Ok(prepared);
    }
    let dir = Prepared::cache_path(task, cache_dir);
    let base = dir
        .parent()
        .context("prepared data have a parent folder")?
        .to_path_buf();
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let staging = tempfile::Builder::new().prefix(".staging-").tempdir_in(&base)?;
    // Real data mlrb fetches itself: on the host, then prepare.py offline.
    let fetched = super::real_data::fetch(task, &base).await?;
    // Kept until preparation is over: the way out its grant gives.
    let (reach, _gateway) = match fetched.is_some() {
        true => (sandbox::Reach::Nothing, None),
        false => task.reach(true)?,
    };
    if let Some(command) = prepare_command(task, staging.path(), cache_dir, &reach, fetched.as_ref())? {
        let outcome = sandbox.run(command).await?;
        let failure = match outcome.success() {
            false => Some(prepare_failure(&outcome, task)),
            true => missing_outputs(task, staging.path()).map(|missing| {
                format!("prepare step exited 0 but did not produce what the task needs ({missing}): a failed download?")
            }),
        };
        if let Some(why) = failure {
            let log = keep_failed_log(staging.path(), &dir);
            bail!("task {}: {why}; log: {}", task.spec.name, log.display());
        }
    }
    // Fetched data are whole: no run of the evaluator to download more.
    if fetched.is_none() {
        warm_up(task, sandbox, staging.path(), cache_dir, &reach).await?;
    }
    drop(fetched);
    if let Some(command) = split_command(task, staging.path(), cache_dir)? {
        let outcome = sandbox.run(command).await?;
        if !outcome.success() {
            let cause = super::failure::failure_cause(&outcome.stderr.text);
            let log = keep_failed_log(staging.path(), &dir);
            bail!(
                "task {}: its hidden answers could not be split ({cause}); log: {}",
                task.spec.name,
                log.display()
            );
        }
    }
    if let Some(stand_in) = task.hub.as_ref().filter(|h| h.stand_in) {
        std::fs::write(staging.path().join(super::smoke::PREPARED_MARK), &stand_in.key)?;
    }
    std::fs::write(staging.path().join("complete"), task.prepare_key())?;
    publish(staging, &dir)?;
    Ok(Prepared::at(task, dir, false))
}

/// Prepares `task` offline from the models and datasets in `from` (checked
/// against its `[[sources]]`): its scripts see them as an offline hub, and
/// the data are the task's real prepared data, as a download would give.
/// Data already prepared are kept, and no hub is assembled for them.
pub async fn prepare_from(mut task: Task, sandbox: &dyn Sandbox, cache_dir: &Path, from: &Path) -> Result<Prepared> {
    if let Some(prepared) = Prepared::existing(&task, cache_dir) {
        return Ok(prepared);
    }
    let hub = super::hub::Hub::from_files(&task, sandbox, cache_dir, from).await?;
    let dir = hub.dir.clone();
    let missing = hub.missing(&task);
    let prepared = match missing.is_empty() {
        false => Err(anyhow::anyhow!(
            "task {}: --from {} lacks {}",
            task.spec.name,
            from.display(),
            missing.join(", ")
        )),
        true => {
            // Offline: whatever the task grants, the files brought are all it gets.
            task.spec.resources.network = Default::default();
            task.prepare_network = false;
            task.hub = Some(hub);
            prepare(&task, sandbox, cache_dir).await
        }
    };
    // The hub only links the files brought: the prepared data are what stay.
    let _ = unseal(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    prepared
}

/// The sandboxed command that prepares `task` into `staging` (none for a
/// task without a prepare step).
fn prepare_command(
    task: &Task,
    staging: &Path,
    cache_dir: &Path,
    reach: &sandbox::Reach,
    fetched: Option<&super::real_data::Fetched>,
) -> Result<Option<sandbox::Command>> {
    let (argv, mounts) = match task.layout {
        Layout::Native => {
            let (public, hidden) = (staging.join("public"), staging.join("hidden"));
            std::fs::create_dir_all(&public)?;
            std::fs::create_dir_all(&hidden)?;
            if !task.prepare_script().is_file() {
                return Ok(None);
            }
            let argv = ["python3", "/task/scripts/prepare.py", "/out/public", "/out/hidden"];
            let mounts = vec![
                Mount::read_only(task.scripts_dir(), "/task/scripts"),
                Mount::writable(&public, "/out/public"),
                Mount::writable(&hidden, "/out/hidden"),
            ];
            (argv.to_vec(), mounts)
        }
        Layout::MlAgentBench => {
            // MLAgentBench's prepare.py writes into ../env and next to
            // itself: give it copies, never the folder itself.
            let (env, scripts) = (staging.join("env"), staging.join("scripts"));
            std::fs::create_dir_all(&env)?;
            std::fs::create_dir_all(&scripts)?;
            populate::copy_tree(&task.env_dir(), &env)?;
            populate::copy_tree(&task.scripts_dir(), &scripts)?;
            let mounts = vec![
                Mount::writable(&env, "/task/env"),
                Mount::writable(&scripts, "/task/scripts"),
            ];
            if let Some(fetched) = fetched {
                // Real data mlrb fetched: put where the folder reads them, offline.
                let (argv, extra, env) = fetched.step(task, staging)?;
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                let mounts = mounts.into_iter().chain(extra).collect();
                let mut command = step(task, &argv, mounts, cache_dir, reach, staging.join("prepare"))?;
                command.env.extend(env);
                return Ok(Some(command));
            }
            if !task.prepare_script().is_file() {
                // Nothing of its own to run: the copies are the prepared data.
                return Ok(None);
            }
            match task.smoke() {
                // Its own prepare.py, with what it downloads stood in.
                true => (vec!["python3", STAND_IN, "prepare", task.spec.name.as_str()], mounts),
                false => (vec!["python3", "prepare.py"], mounts),
            }
        }
    };
    Ok(Some(step(
        task,
        &argv,
        mounts,
        cache_dir,
        reach,
        staging.join("prepare"),
    )?))
}

/// For a task with `[validation.split]`: the split of its hidden answers
/// into the public and private parts' folders (`split.rs`).
fn split_command(task: &Task, staging: &Path, cache_dir: &Path) -> Result<Option<sandbox::Command>> {
    let Some(split) = task.spec.validation.split.as_ref().filter(|s| s.splits()) else {
        return Ok(None);
    };
    if task.layout != Layout::Native {
        return Ok(None);
    }
    let spec = split.splitter_spec(&task.split_seed()).to_string();
    let splitter = format!("{}/mlrb_split.py", pylib::GUEST_DIR);
    let argv = ["python3", splitter.as_str(), "/out/hidden", "/out", spec.as_str()];
    let mounts = vec![
        Mount::read_only(task.scripts_dir(), "/task/scripts"),
        Mount::writable(staging, "/out"),
    ];
    let reach = sandbox::Reach::Nothing;
    Ok(Some(step(
        task,
        &argv,
        mounts,
        cache_dir,
        &reach,
        staging.join("split"),
    )?))
}

/// One of the task's own preparation steps: `argv` run in `/task/scripts`
/// with `mounts` and mlrb's Python library, under the task's script limits
/// and the preparation's reach, its output logged at `log`.
fn step(
    task: &Task,
    argv: &[&str],
    mounts: Vec<Mount>,
    cache_dir: &Path,
    reach: &sandbox::Reach,
    log: std::path::PathBuf,
) -> Result<sandbox::Command> {
    let (lib_mount, lib_env) = pylib::mount(cache_dir)?;
    Ok(task.in_profile(sandbox::Command {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        cwd: "/task/scripts".into(),
        mounts: mounts.into_iter().chain([lib_mount]).collect(),
        env: vec![lib_env],
        network: reach.clone(),
        limits: task.task_script_limits(PREPARE_TIMEOUT),
        gpus: Vec::new(),
        log_prefix: Some(log),
        stop: Default::default(),
        meter: Default::default(),
    }))
}

/// An evaluator that fetches its test data when it first runs gets it
/// now, into the hidden side, so that scoring needs no network.
async fn warm_up(
    task: &Task,
    sandbox: &dyn Sandbox,
    staging: &Path,
    cache_dir: &Path,
    reach: &sandbox::Reach,
) -> Result<()> {
    if let Some(command) = warm_up_command(task, staging, cache_dir, reach)? {
        let outcome = sandbox.run(command).await?;
        if !outcome.success() {
            tracing::warn!(task = %task.spec.name, cause = %super::failure::failure_cause(&outcome.stderr.text),
                "the evaluator's run during preparation failed");
        }
    }
    Ok(())
}

/// For an MLAgentBench folder whose preparation may reach the network: the
/// evaluator run once on the prepared env, in the prepared scripts folder
/// (its working directory at scoring time, so relative paths resolve as
/// they will then), with the network, whatever it scores.
fn warm_up_command(
    task: &Task,
    staging: &Path,
    cache_dir: &Path,
    reach: &sandbox::Reach,
) -> Result<Option<sandbox::Command>> {
    if task.layout != Layout::MlAgentBench || !task.prepare_network() || !task.eval_script().is_file() {
        return Ok(None);
    }
    let argv = [
        "python3",
        pylib::MLAGENTBENCH_ADAPTER,
        "/task/scripts/eval.py",
        "/task/env",
    ];
    let mounts = vec![
        Mount::read_only(staging.join("env"), "/task/env"),
        Mount::writable(staging.join("scripts"), "/task/scripts"),
    ];
    Ok(Some(step(
        task,
        &argv,
        mounts,
        cache_dir,
        reach,
        staging.join("warm-up"),
    )?))
}

/// What preparation should have produced and did not, in words: the
/// task's declared outputs (each must match a non-empty file), or without
/// any declared, at least one non-empty file of its own.
fn missing_outputs(task: &Task, staging: &Path) -> Option<String> {
    let files: Vec<(String, u64)> = walkdir::WalkDir::new(staging)
        .follow_links(false)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| {
            let rel = e.path().strip_prefix(staging).ok()?.to_string_lossy().into_owned();
            Some((rel, e.metadata().ok()?.len()))
        })
        .filter(|(rel, _)| !rel.starts_with("prepare.") && !rel.starts_with("warm-up."))
        .collect();
    let produced = |rel: &str| -> bool {
        match task.layout {
            // MLAgentBench's prepare works on a copy of the folder: only new or grown files count.
            Layout::MlAgentBench => std::fs::metadata(task.root.join(rel)).map_or(true, |m| m.len() == 0),
            Layout::Native => true,
        }
    };
    let outputs = &task.spec.prepare.outputs;
    if outputs.is_empty() {
        let any = files.iter().any(|(rel, size)| *size > 0 && produced(rel));
        return (!any).then(|| "no non-empty file at all".to_string());
    }
    let missing: Vec<&str> = outputs
        .iter()
        .filter(|pattern| {
            let Ok(glob) = globset::Glob::new(pattern) else {
                return true;
            };
            let matcher = glob.compile_matcher();
            !files.iter().any(|(rel, size)| *size > 0 && matcher.is_match(rel))
        })
        .map(String::as_str)
        .collect();
    (!missing.is_empty()).then(|| format!("nothing non-empty matches {}", missing.join(", ")))
}

/// Keeps a failed preparation's log beside where its data would have
/// gone (`<key>.failed/`); its path.
fn keep_failed_log(staging: &Path, dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".failed");
    let kept = dir.with_file_name(name);
    let _ = std::fs::remove_dir_all(&kept);
    if std::fs::create_dir_all(&kept).is_ok() {
        for stream in ["stdout", "stderr"] {
            let _ = std::fs::copy(
                staging.join("prepare").with_extension(stream),
                kept.join(format!("prepare.{stream}")),
            );
        }
    }
    kept.join("prepare.stderr")
}

/// One line saying why prepare failed, and what would fix the usual causes.
fn prepare_failure(outcome: &Outcome, task: &Task) -> String {
    let (stderr, network) = (&outcome.stderr.text, task.prepare_network());
    let last = stderr.trim().lines().last().unwrap_or("").trim();
    // A folder whose real data mlrb fetches itself only needs `--network`.
    let fetched = || mlagentbench::known(&task.root).is_some_and(|k| k.fetch.is_some());
    let hint = if !network && stderr.contains("EOFError") && fetched() {
        " (prepare.py asked for input: give `--network` to `mlrb tasks prepare`, which fetches its data \
         on the host and answers its consent prompt; see its real-data needs in `mlrb tasks check`)"
    } else if stderr.contains("EOFError") {
        " (prepare.py asked for input, but prepare steps run unattended with stdin closed: \
         remove the input() call, or prepare the folder by hand first)"
    } else if !network
        && [
            "Temporary failure in name resolution",
            "Network is unreachable",
            "URLError",
            "ConnectionError",
        ]
        .iter()
        .any(|s| stderr.contains(s))
    {
        " (prepare.py needs the network, which this task does not grant: prepare the folder by hand first)"
    } else {
        ""
    };
    format!(
        "prepare step failed ({}){}{hint}",
        outcome.describe(),
        if last.is_empty() {
            String::new()
        } else {
            format!(": {last}")
        }
    )
}

/// What marks prepared data `<key>` as used: `<key>.used`, touched on use.
pub const USED_SUFFIX: &str = ".used";

/// The marker beside the prepared data at `dir`.
pub fn used_marker(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(USED_SUFFIX);
    dir.with_file_name(name)
}
