//! A recorded episode checked for what a reviewer should look at before its
//! score is trusted: calls the host refused (escapes, read-only data, special
//! files, the network), scripts that reach for the host's or the sandbox's
//! internals, code that names a run's result channel, a submission written
//! by hand, validations past the allowance or probing the public score
//! (hand edits, rows flipped), runs of submitted code refused for their
//! outputs, floods, and records that do not hold together. Nothing is run:
//! only the records are read.
//!
//! Each check is a file of its own; this one runs them over an episode.

mod caps;
mod channel;
mod denied;
mod evidence;
mod flag;
mod integrity;
mod internals;
mod links;
mod network;
mod read_only;
mod row_flips;
mod run_outputs;
mod script_endings;
mod shadowing;
mod special_files;
mod submission;
mod validations;

use std::path::Path;

use anyhow::Result;

pub use evidence::Evidence;
pub use flag::{Flag, Kind, ScanOptions, Severity};

/// Flags of one kind kept per episode; the rest are counted in one more.
const KEPT_PER_KIND: usize = 20;

/// A check: what it finds in one episode's evidence.
type Check = fn(&Evidence, &ScanOptions) -> Vec<Flag>;

/// Every check, each over the whole episode.
const CHECKS: [Check; 16] = [
    integrity::check,
    denied::check,
    read_only::check,
    special_files::check,
    links::check,
    submission::check,
    validations::check,
    row_flips::check,
    internals::check,
    channel::check,
    run_outputs::check,
    shadowing::check,
    script_endings::check,
    network::check,
    caps::check,
    caps::check_calls,
];

/// The flags of the episode recorded in `dir`, named by its last three path
/// components (`<task>/<agent>/<seed>`); an error when its records cannot be read.
pub fn scan_episode(dir: &Path) -> Result<Vec<Flag>> {
    scan_episode_with(dir, &super::episode_id_of(dir), &ScanOptions::default())
}

/// The flags of the episode recorded in `dir`, named `id`, under `options`.
pub fn scan_episode_with(dir: &Path, id: &str, options: &ScanOptions) -> Result<Vec<Flag>> {
    let evidence = Evidence::read(dir, id)?;
    let mut flags: Vec<Flag> = CHECKS.iter().flat_map(|check| check(&evidence, options)).collect();
    flags.sort_by_key(|f| (f.line.unwrap_or(usize::MAX), f.severity, f.kind));
    Ok(keep_per_kind(flags))
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

#[cfg(test)]
mod tests;
