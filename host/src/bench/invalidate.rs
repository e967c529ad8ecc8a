//! Invalidation: a task version, an image or an agent found wrong makes
//! every result that depended on it stale. Each such episode gets a
//! `stale.json` (its records are kept as they were); each run's
//! `results.jsonl`, `summary.json` and `report.html` are rewritten with the
//! result struck out and left out of the figures; `mlrb bench --resume
//! --rerun-stale` runs those episodes again.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::episode::{EpisodeRecord, StaleMark, episode_dirs};

/// What was found wrong.
#[derive(Debug, Clone)]
pub enum Invalidated {
    /// A task, by name and (optionally) version: `NAME[@VERSION]`.
    Task {
        /// The task's name.
        name: String,
        /// Its version; every version when `None`.
        version: Option<String>,
    },
    /// A sandbox image, by id (`sha256:…`, at least 12 hex digits of it).
    Image(String),
    /// An agent component, by SHA-256 (at least 12 hex digits of it).
    Agent(String),
}

impl Invalidated {
    /// Checks a hash prefix is long enough to name one thing.
    pub fn hash(kind: &str, given: &str) -> Result<String> {
        let hex = given.strip_prefix("sha256:").unwrap_or(given);
        if hex.len() < 12 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("--{kind} {given}: give at least 12 hex digits of the {kind}'s SHA-256 (as episode.json records it)");
        }
        Ok(hex.to_ascii_lowercase())
    }

    /// Whether the episode recorded in `record` depended on this.
    pub fn matches(&self, record: &EpisodeRecord) -> bool {
        match self {
            Self::Task { name, version } => {
                record.task.name == *name && version.as_ref().is_none_or(|v| *v == record.task.version)
            }
            Self::Image(hex) => record
                .host
                .image_digest
                .as_deref()
                .is_some_and(|d| d.strip_prefix("sha256:").unwrap_or(d).starts_with(hex.as_str())),
            Self::Agent(hex) => record.agent.sha256.starts_with(hex.as_str()),
        }
    }

    /// What was invalidated, in words.
    pub fn describe(&self) -> String {
        match self {
            Self::Task { name, version: Some(v) } => format!("task {name}@{v}"),
            Self::Task { name, version: None } => format!("task {name} (every version)"),
            Self::Image(hex) => format!("image sha256:{hex}"),
            Self::Agent(hex) => format!("agent {hex}"),
        }
    }
}

/// Marks every episode under `root` that depended on `what` stale, saying
/// `reason`; rewrites the outputs of each run holding one. Returns the
/// episodes marked.
pub fn invalidate(root: &Path, what: &Invalidated, reason: &str) -> Result<Vec<PathBuf>> {
    let why = match reason.trim() {
        "" => format!("{} was invalidated", what.describe()),
        reason => format!("{} was invalidated: {reason}", what.describe()),
    };
    let mut marked = Vec::new();
    let mut runs = BTreeSet::new();
    for dir in episode_dirs(root) {
        let Ok(record) = EpisodeRecord::read(&dir) else {
            continue;
        };
        if !what.matches(&record) {
            continue;
        }
        StaleMark::new(why.clone()).write(&dir)?;
        if let Some(run) = dir.ancestors().skip(1).find(|d| d.join("results.jsonl").is_file()) {
            runs.insert(run.to_path_buf());
        }
        marked.push(dir);
    }
    for run in runs {
        let mut results = super::read_results(&run)?;
        mark_stale(&run, &mut results);
        super::write_outputs(&run, &results)?;
    }
    Ok(marked)
}

/// Sets each result's `stale` from its episode's mark.
pub fn mark_stale(run: &Path, results: &mut [super::result_line::ResultLine]) {
    for result in results {
        result.stale = StaleMark::read(&run.join(&result.dir)).map(|m| m.reason);
    }
}
