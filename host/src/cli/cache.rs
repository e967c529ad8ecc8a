//! `mlrb cache`: the cache of compiled agents and prepared task data.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use super::say;
use crate::paths;

/// `mlrb cache` commands.
#[derive(Subcommand, Debug)]
pub enum CacheCommand {
    /// Remove compiled agents of other mlrb versions or unused for a while,
    /// prepared data of tasks not run for a while, and leftovers of
    /// interrupted writes.
    Prune {
        /// Keep what was used within this many days.
        #[arg(long, default_value_t = 30)]
        unused_days: u64,
    },
}

impl CacheCommand {
    /// Prunes the cache and says how much it freed.
    pub fn run(self) -> Result<ExitCode> {
        let Self::Prune { unused_days } = self;
        let cache = paths::cache_dir();
        let unused_for = std::time::Duration::from_secs(unused_days * 86_400);
        let engine = crate::engine::AgentEngine::new(&cache)?;
        let mut removed = engine.cache().prune(unused_for)?;
        removed.extend(crate::task::prune_cache(&cache, unused_for)?);
        let bytes: u64 = removed.iter().map(|(_, size)| size).sum();
        for (path, _) in &removed {
            tracing::info!(path = %path.display(), "removed");
        }
        say!(
            "removed {} item(s), {:.1} MiB, from {}",
            removed.len(),
            bytes as f64 / (1 << 20) as f64,
            cache.display()
        );
        Ok(ExitCode::SUCCESS)
    }
}
