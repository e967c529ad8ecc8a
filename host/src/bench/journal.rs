//! The bench journal: an append-only `journal.jsonl` in the run directory,
//! each line fsync'd before the bench goes on, so that after the host is
//! killed at any moment the run can be resumed exactly.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::result_line::ResultLine;

/// One line of the journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Entry {
    /// The episodes of the run, in order; written once, first.
    Plan {
        /// The episode ids, in run order.
        episodes: Vec<String>,
    },
    /// An attempt at an episode began.
    Start {
        /// The episode id.
        id: String,
        /// The attempt number, counting from 1.
        attempt: u32,
        /// Set when it went on from what a dead host left: the last step
        /// recorded whole, after which it went on live.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resumed_after_step: Option<u32>,
    },
    /// A stopped worker suspended the episode at a step boundary; its
    /// records wait for the next lease, which goes on after that step.
    Suspended {
        /// The episode id.
        id: String,
        /// The last step its records hold.
        after_step: u32,
    },
    /// The host or sandbox failed (not the agent); the attempt is void.
    InfraFailure {
        /// The episode id.
        id: String,
        /// The attempt number that failed, counting from 1.
        attempt: u32,
        /// The failure, as text.
        error: String,
    },
    /// The episode's final result: the agent's own failures included, and
    /// the infrastructure failure that exhausted the retries.
    Done {
        /// The episode id.
        id: String,
        /// The episode's result line.
        result: Box<ResultLine>,
    },
}

/// An open journal file, written one fsync'd line at a time.
pub struct Journal {
    file: File,
}

impl Journal {
    /// Creates a new journal; fails if one exists.
    pub fn create(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .with_context(|| format!("{}: creating the journal", path.display()))?;
        Ok(Self { file })
    }

    /// Opens an existing journal for more entries.
    pub fn append_to(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .with_context(|| format!("{}: opening the journal", path.display()))?;
        Ok(Self { file })
    }

    /// Appends one entry without waiting for the disk: for a journal that
    /// another store (a cluster run's queue) is the durable record of.
    pub fn write_unsynced(&mut self, entry: &Entry) -> Result<()> {
        let mut line = serde_json::to_vec(entry)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        Ok(())
    }

    /// Appends one entry and waits until it is on disk.
    pub fn write(&mut self, entry: &Entry) -> Result<()> {
        self.write_unsynced(entry)?;
        self.file.sync_data().context("syncing the journal")?;
        Ok(())
    }
}

/// What a journal says, read back.
#[derive(Debug, Default)]
pub struct State {
    /// The planned episode ids, in run order.
    pub episodes: Vec<String>,
    /// The final result of each finished episode, by id.
    pub results: BTreeMap<String, ResultLine>,
    /// The number of the last attempt started for each episode, by id.
    pub attempts: BTreeMap<String, u32>,
    /// Episodes with more than one final result (must never happen).
    pub duplicated: BTreeSet<String>,
}

/// Reads a journal. A last line cut short by a kill is ignored; any other
/// unreadable line is an error naming it.
pub fn read(path: &Path) -> Result<State> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: reading the journal", path.display()))?;
    let mut state = State::default();
    let lines: Vec<&str> = text.split('\n').collect();
    for (index, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry: Entry = match serde_json::from_str(line) {
            Ok(entry) => entry,
            // Only the very last line can be torn by a kill mid-write.
            Err(_) if index + 1 == lines.len() => break,
            Err(e) => anyhow::bail!("{}: line {}: not a journal entry: {e}", path.display(), index + 1),
        };
        match entry {
            Entry::Plan { episodes } => state.episodes = episodes,
            Entry::Start { id, attempt, .. } => {
                state.attempts.insert(id, attempt);
            }
            Entry::InfraFailure { .. } | Entry::Suspended { .. } => {}
            Entry::Done { id, result } => {
                if state.results.insert(id.clone(), *result).is_some() {
                    state.duplicated.insert(id);
                }
            }
        }
    }
    if state.episodes.is_empty() {
        anyhow::bail!(
            "{}: the journal has no plan entry: not an mlrb bench run",
            path.display()
        );
    }
    Ok(state)
}
