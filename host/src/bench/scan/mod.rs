//! `mlrb scan` over a run: every episode of a run directory (or the one
//! episode given) checked for what a reviewer should look at, each named by
//! its path in the run. Nothing is run: only the records are read.

pub mod table;

use std::path::Path;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::episode::episode_id_of;
use crate::episode::scan::{Flag, ScanOptions, Severity, scan_episode_with};

/// What a scan of a run found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunScan {
    /// Episodes scanned.
    pub episodes: usize,
    /// Flags for review.
    pub review: usize,
    /// Flags for information.
    pub info: usize,
    /// Every flag, episode by episode, in the order of their events.
    pub flags: Vec<Flag>,
}

impl RunScan {
    /// Whether anything needs a reviewer's look.
    pub fn needs_review(&self) -> bool {
        self.review > 0
    }
}

/// Scans every episode at or under `dir`; an error (naming the path) when
/// there is none or one's records cannot be read at all.
pub fn scan_run(dir: &Path, options: &ScanOptions) -> Result<RunScan> {
    if !dir.is_dir() {
        bail!("{}: no such directory", dir.display());
    }
    let episodes = crate::episode::episode_dirs(dir);
    if episodes.is_empty() {
        bail!("{}: no episode here (no episode.json at or under it)", dir.display());
    }
    let mut flags = Vec::new();
    for episode in &episodes {
        let id = match episode.strip_prefix(dir) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => episode_id_of(episode),
        };
        flags.extend(scan_episode_with(episode, &id, options)?);
    }
    let count = |severity: Severity| flags.iter().filter(|f| f.severity == severity).count();
    Ok(RunScan {
        episodes: episodes.len(),
        review: count(Severity::Review),
        info: count(Severity::Info),
        flags,
    })
}
