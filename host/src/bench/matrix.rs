//! A plan opened to run any one of its episodes on request (what a
//! cluster worker runs its leases with).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;

use anyhow::{Context, Result, bail};

use super::journal::Journal;
use super::opened::Bench;
use super::plan::{Cell, Plan};
use super::progress::Progress;
use super::result_line::ResultLine;

/// A plan opened to run any one of its episodes on request: what a
/// cluster worker runs the episodes it leases with. Episodes are written
/// under its own directory (with its own journal), retried after
/// infrastructure failures as in a local bench.
pub struct Matrix {
    bench: Bench,
    cells: Vec<Cell>,
    journal: tokio::sync::Mutex<Journal>,
    progress: Progress,
}

impl Matrix {
    /// Opens `plan` (its tasks, agents, sandbox and model source) to run
    /// episodes into `dir`, a new directory.
    pub async fn open(plan: Plan, dir: &Path, cache_dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let bench = Bench::open(plan, dir, cache_dir).await?;
        let cells = bench.cells();
        let journal = Journal::create(&dir.join("journal.jsonl"))?;
        let progress = Progress::new(cells.len() as u64, 0, true);
        Ok(Self {
            bench,
            cells,
            journal: tokio::sync::Mutex::new(journal),
            progress,
        })
    }

    /// Where the folder of episode `id` is written.
    pub fn episode_dir(&self, id: &str) -> PathBuf {
        self.bench.dir.join(id)
    }

    /// The most CPUs and GPUs one episode of the plan takes.
    pub fn largest_episode(&self) -> (f64, u32) {
        let cpus = self
            .bench
            .tasks
            .iter()
            .map(|t| t.task.spec.resources.cpus)
            .fold(1.0, f64::max);
        let gpus = self
            .bench
            .tasks
            .iter()
            .map(|t| t.task.spec.resources.gpus)
            .max()
            .unwrap_or(0);
        (cpus, gpus)
    }

    /// The GPUs this host may hand out.
    pub fn gpu_count(&self) -> usize {
        self.bench.runner.gpu_count()
    }

    /// The longest wall-clock budget of an episode of the plan, in seconds.
    pub fn longest_episode_seconds(&self) -> u64 {
        self.bench
            .tasks
            .iter()
            .map(|t| t.limits.wall_seconds)
            .max()
            .unwrap_or(0)
    }

    /// Runs episode `id` to its final result (retrying infrastructure
    /// failures); None when `stop` ended it first.
    pub async fn run(&self, id: &str, stop: &tokio_util::sync::CancellationToken) -> Result<Option<ResultLine>> {
        let Some(cell) = self.cells.iter().find(|c| c.id == id) else {
            bail!("{id}: not an episode of this plan");
        };
        let ran = AtomicU32::new(0);
        self.bench
            .run_cell(cell, 0, &self.journal, &self.progress, stop, &ran)
            .await
    }
}
