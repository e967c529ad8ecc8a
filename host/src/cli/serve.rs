//! `mlrb serve`: serves the queue of a cluster bench already made (by
//! `mlrb bench --on ...`) to its workers until every episode has a result.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

use super::{EXIT_INTERRUPTED, ctrl_c, say};
use crate::{cluster, report};

/// Options of `mlrb serve`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  mlrb bench --plan plan.toml --on server   # makes and serves the run\n  mlrb serve runs/20261125-101500            # serves it again after a restart"
)]
pub struct ServeArgs {
    /// The run directory of a bench made with `--on server|slurm|k8s`.
    run: PathBuf,
    /// No progress display.
    #[arg(long, short)]
    quiet: bool,
}

impl ServeArgs {
    /// Serves until the queue drains; prints the summary.
    pub async fn run(self) -> Result<ExitCode> {
        if !cluster::is_cluster_run(&self.run) {
            bail!(
                "{}: not a cluster bench (no cluster/queue.sqlite): make one with `mlrb bench --on server`",
                self.run.display()
            );
        }
        let watch = cluster::Watch {
            quiet: self.quiet,
            rerun_stale: false,
        };
        let outcome = cluster::bench(None, &self.run, watch, ctrl_c()).await?;
        say!("{}", report::summary_tables(&outcome.summary));
        if outcome.interrupted {
            eprintln!("interrupted: `mlrb serve {}` goes on", self.run.display());
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Ok(ExitCode::SUCCESS)
    }
}
