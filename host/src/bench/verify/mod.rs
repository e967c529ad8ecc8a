//! `mlrb verify`: whether a run or episode directory is what it was when
//! it was recorded: each episode's records, its score re-computed by the
//! same task and its replay; the run's results and summary against its
//! episodes; its signature.

mod episode;
mod results;
mod signature;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::Serialize;

use crate::episode::{EpisodeRecord, HostSetup, Runner};
use crate::{paths, task};
pub use results::{check_results, check_run_records};

/// What to check, and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// A run directory (every episode under it) or one episode directory.
    pub dir: PathBuf,
    /// The signer's public key: the directory must carry a signature by it.
    pub key: Option<PathBuf>,
    /// Also replay each episode (hermetically) and require it identical.
    pub replay: bool,
    /// Do not re-run the evaluators (the records are still checked).
    pub no_eval: bool,
    /// How far (relative) a re-computed score may be from the recorded one.
    pub tolerance: f64,
    /// Where the evaluators run.
    pub setup: HostSetup,
}

/// What was found of one thing checked.
#[derive(Debug, Serialize)]
pub struct Finding {
    /// The episode (relative to the directory given), or `run`, `signature`.
    pub what: String,
    /// Empty when verified.
    pub failures: Vec<String>,
    /// An episode of the smoke profile (stand-in data and toy models):
    /// verified or not, its score measures nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub smoke: bool,
}

impl Finding {
    /// What `mlrb verify` prints of it: verified (saying so of a smoke
    /// episode), or what failed.
    pub fn line(&self) -> String {
        let smoke = match self.smoke {
            true => " (smoke profile: its score measures nothing)",
            false => "",
        };
        match self.failures.as_slice() {
            [] => format!("verified  {}{smoke}", self.what),
            failures => format!("FAILED    {}{smoke}: {}", self.what, failures.join("; ")),
        }
    }
}

/// Every finding, the signature's first; `progress` hears of each episode
/// checked (and, first, how many there are).
pub async fn verify(options: &Options, progress: &(dyn Fn(Progress) + Sync)) -> Result<Vec<Finding>> {
    let dir = &options.dir;
    if !dir.is_dir() {
        bail!("{}: no such directory", dir.display());
    }
    let episodes = crate::episode::episode_dirs(dir);
    if episodes.is_empty() {
        bail!("{}: no episode here (no episode.json at or under it)", dir.display());
    }
    let mut findings = vec![signature::finding(dir, options.key.as_deref())];
    let tasks = tasks(&episodes);
    let runner = runner(options, &tasks).await?;
    progress(Progress::Episodes(episodes.len()));
    for episode in &episodes {
        let failures = episode::failures(options, episode, &runner, &tasks).await;
        findings.push(Finding {
            what: relative(episode, dir),
            failures,
            smoke: EpisodeRecord::read(episode).is_ok_and(|r| r.smoke),
        });
        progress(Progress::Checked);
    }
    if dir.join("results.jsonl").is_file() {
        findings.push(Finding {
            what: "run (results.jsonl, summary.json)".into(),
            failures: check_results(dir),
            smoke: crate::bench::read_results(dir).is_ok_and(|r| r.iter().any(|l| l.smoke)),
        });
    }
    Ok(findings)
}

/// What `verify` reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// How many episodes there are to check.
    Episodes(usize),
    /// One more was checked.
    Checked,
}

/// The tasks episodes ran, by root: loaded from where they were (or by
/// name), or why they cannot be.
type Tasks = BTreeMap<String, Result<task::Task, String>>;

/// Each task an episode ran, loaded from where it was (by root).
/// Loaded under --no-eval too: a score's metric and baseline are checked
/// against its task, which must still be there.
fn tasks(episodes: &[PathBuf]) -> Tasks {
    let mut tasks = BTreeMap::new();
    for dir in episodes {
        let Ok(record) = EpisodeRecord::read(dir) else { continue };
        tasks.entry(record.task.root.clone()).or_insert_with(|| {
            record
                .load_task()
                .map_err(|e| format!("its score cannot be checked: {e:#}"))
        });
    }
    tasks
}

/// A runner for the evaluators of `tasks` (hermetic, without them).
async fn runner(options: &Options, tasks: &Tasks) -> Result<Runner> {
    if options.no_eval {
        return Runner::hermetic(&paths::cache_dir());
    }
    let loaded: Vec<task::Task> = tasks.values().filter_map(|t| t.as_ref().ok().cloned()).collect();
    options.setup.runner(&paths::cache_dir(), &loaded).await
}

fn relative(path: &Path, base: &Path) -> String {
    match path.strip_prefix(base) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}
