//! A recorded episode checked for what a reviewer should look at before its
//! score is trusted: calls the host refused (escapes, read-only data, special
//! files, the network), scripts that reach for the host's or the sandbox's
//! internals, a submission written by hand, validations past the allowance
//! or probing the public score, floods, and records that do not hold
//! together. Nothing is run: only the records are read.
//!
//! Each check is a file of its own; this one holds the flag and the driver.

mod caps;
mod denied;
mod evidence;
mod integrity;
mod internals;
mod links;
mod network;
mod read_only;
mod script_endings;
mod shadowing;
mod special_files;
mod submission;
mod validations;

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};

pub use evidence::Evidence;

/// How much a flag asks of a reviewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// What an honest agent does not do: look at it before trusting the score.
    Review,
    /// Worth knowing, not a sign of cheating on its own.
    Info,
}

impl Severity {
    /// How tables name it.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Review => "review",
            Severity::Info => "info",
        }
    }
}

/// What a flag is about; its serialized name is the flag's stable id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A tool call refused for leaving the workspace (`..`, an absolute
    /// path, a link leading out).
    PathEscape,
    /// Any other tool call refused as not permitted.
    DeniedCall,
    /// A write to a read-only file refused, or one a script made that the
    /// host put back.
    ReadOnlyWrite,
    /// A tool call refused for naming a FIFO, socket or device, or entries
    /// of the workspace its snapshots refused to record.
    SpecialFile,
    /// A symbolic link made during the episode that leads out of the workspace.
    SymlinkOut,
    /// The task's submission file written by a tool call, not by a script.
    SubmissionWritten,
    /// `validate()` called again after the task's allowance was spent.
    ValidationsPastAllowance,
    /// Validations of a submission edited by hand, one after another: the
    /// public score searched row by row.
    ValidationProbing,
    /// More validations than the scan allows (`--max-validations`).
    ManyValidations,
    /// A script (or its arguments) naming the host's or the sandbox's
    /// internals: /proc, /sys, the evaluator's mounts, ptrace, docker.sock.
    ScriptInternals,
    /// A file written where it shadows a library an evaluator imports.
    LibraryShadowing,
    /// A script the host killed for flooding its output, growing the
    /// workspace past its caps or breaking the sandbox's launcher.
    ScriptKilled,
    /// A script that ran out of its time or memory.
    ScriptLimit,
    /// A connection or HTTP request refused by the task's network grant.
    NetworkRefused,
    /// The episode filled the run record's budget (trace or snapshots).
    TraceFlood,
    /// The agent kept calling tools after its step budget was spent.
    StepFlood,
    /// The agent printed past its log's cap, or answered past the answer's.
    OutputFlood,
    /// Calls refused for arguments or writes past the host's caps.
    OversizedCalls,
    /// The agent ran out of its memory limit.
    AgentMemoryLimit,
    /// The records fail `mlrb verify`'s checks (chain, store, bindings).
    RecordsBroken,
    /// The episode never ended (still running, or its host was killed).
    EpisodeUnfinished,
}

impl Kind {
    /// The stable id, as JSON and tables spell it.
    pub fn id(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    }
}

/// One thing a reviewer should look at, and where it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flag {
    /// What it is.
    pub kind: Kind,
    /// How much it asks of a reviewer.
    pub severity: Severity,
    /// The episode (`<task>/<agent>/<seed>`, or its path in the run scanned).
    pub episode: String,
    /// The agent's step it happened at, where it belongs to one.
    pub step: Option<u32>,
    /// The line of `events.jsonl` that records it (from 1), where one does.
    pub line: Option<usize>,
    /// What happened, in one line.
    pub detail: String,
}

/// What a scan allows beyond the task's own limits.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Validations an episode may make before `many_validations` is flagged
    /// (none: not checked).
    pub max_validations: Option<u32>,
}

/// Flags of one kind kept per episode; the rest are counted in one more.
const KEPT_PER_KIND: usize = 20;

/// A check: what it finds in one episode's evidence.
type Check = fn(&Evidence, &ScanOptions) -> Vec<Flag>;

const CHECKS: [Check; 13] = [
    integrity::check,
    denied::check,
    read_only::check,
    special_files::check,
    links::check,
    submission::check,
    validations::check,
    internals::check,
    shadowing::check,
    script_endings::check,
    network::check,
    caps::check,
    caps::check_calls,
];

/// The flags of the episode recorded in `dir`, named by its last three path
/// components (`<task>/<agent>/<seed>`); an error when its records cannot be read.
pub fn scan_episode(dir: &Path) -> Result<Vec<Flag>> {
    scan_episode_with(dir, &default_id(dir), &ScanOptions::default())
}

/// The flags of the episode recorded in `dir`, named `id`, under `options`.
pub fn scan_episode_with(dir: &Path, id: &str, options: &ScanOptions) -> Result<Vec<Flag>> {
    let evidence = Evidence::read(dir, id)?;
    let mut flags: Vec<Flag> = CHECKS.iter().flat_map(|check| check(&evidence, options)).collect();
    flags.sort_by_key(|f| (f.line.unwrap_or(usize::MAX), f.severity, f.kind));
    Ok(keep_per_kind(flags))
}

/// How an episode folder is named by default: `<task>/<agent>/<seed>`.
pub fn default_id(dir: &Path) -> String {
    let parts: Vec<String> = dir
        .components()
        .rev()
        .take(3)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

/// At most [`KEPT_PER_KIND`] flags of each kind, and one more counting the
/// rest (at the first left out), so a looping agent cannot bury the others.
fn keep_per_kind(flags: Vec<Flag>) -> Vec<Flag> {
    let mut seen = std::collections::BTreeMap::<Kind, usize>::new();
    let mut kept = Vec::new();
    let mut more: Vec<(Flag, usize)> = Vec::new();
    for flag in flags {
        let count = seen.entry(flag.kind).or_default();
        *count += 1;
        match *count {
            n if n <= KEPT_PER_KIND => kept.push(flag),
            n if n == KEPT_PER_KIND + 1 => more.push((flag, 1)),
            _ => {
                if let Some((_, left)) = more.iter_mut().find(|(f, _)| f.kind == flag.kind) {
                    *left += 1;
                }
            }
        }
    }
    for (mut flag, left) in more {
        flag.detail = format!("{left} more like the ones before, from here on");
        kept.push(flag);
    }
    kept.sort_by_key(|f| (f.line.unwrap_or(usize::MAX), f.severity, f.kind));
    kept
}

/// The first `max` characters of `text` on one line, marked where cut.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &flat[..at]),
        None => flat,
    }
}

#[cfg(test)]
mod tests;
