//! `mlrb worker`: runs episodes leased from a served bench until its queue
//! is empty, its time limit nears, or it is told to stop (SIGTERM/SIGINT).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;

use super::{say, terminated};
use crate::{cluster, paths};

/// Options of `mlrb worker`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  mlrb worker --server http://login1:8700 --token-file runs/r1/cluster/token\n  MLRB_TOKEN=... mlrb worker --server http://10.0.0.5:8700 --time-limit 3600"
)]
pub struct WorkerArgs {
    /// The URL of the run's `mlrb serve`.
    #[arg(long, value_name = "URL")]
    server: String,
    /// The run's token (visible to other users in `ps`: prefer --token-file or MLRB_TOKEN).
    #[arg(long, env = "MLRB_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the run's token (the run's cluster/token); taken over MLRB_TOKEN.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Episodes at once [default: as many as this node's CPUs and GPUs allow].
    #[arg(long)]
    parallel: Option<usize>,
    /// This worker's time limit in seconds (its job's): no episode is
    /// leased that could not end before it.
    #[arg(long, value_name = "SECONDS")]
    time_limit: Option<u64>,
    /// The name leases are taken under [default: host and process id].
    #[arg(long)]
    name: Option<String>,
    /// Where episodes are written before they are uploaded [default: mlrb's cache].
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Seconds the server may be unreachable before the worker gives up.
    #[arg(long, default_value_t = 300)]
    grace: u64,
    /// The GPUs of this node the worker may use, by device id [default: the plan's];
    /// in a Slurm job, its allocation ($SLURM_JOB_GPUS).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    gpus: Vec<String>,
    /// Print what the worker did as JSON.
    #[arg(long)]
    json: bool,
}

impl WorkerArgs {
    /// Runs the worker; exits 0 when it stopped as asked or found nothing left.
    pub async fn run(self) -> Result<ExitCode> {
        let token = match (&self.token_file, &self.token) {
            (Some(file), _) => cluster::read_token(file)?,
            (None, Some(token)) => token.trim().to_string(),
            (None, None) => {
                bail!("the worker needs the run's token: --token-file FILE (the run's cluster/token) or MLRB_TOKEN")
            }
        };
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let options = cluster::worker::WorkerOptions {
            server: self.server.clone(),
            token,
            parallel: self.parallel,
            time_limit: self.time_limit.map(Duration::from_secs),
            name: self
                .name
                .clone()
                .unwrap_or_else(|| format!("{}-{}", host.trim(), std::process::id())),
            work_dir: self
                .work_dir
                .clone()
                .unwrap_or_else(|| paths::cache_dir().join("worker")),
            grace: Duration::from_secs(self.grace),
            gpus: self.gpus.iter().filter(|g| !g.trim().is_empty()).cloned().collect(),
        };
        let outcome = cluster::worker::run(options, &paths::cache_dir(), terminated()).await?;
        if self.json {
            say!("{}", serde_json::to_string_pretty(&outcome)?);
        } else {
            eprintln!(
                "worker: {} results reported, {} superseded, {} leases given back; stopped: {}",
                outcome.reported, outcome.superseded, outcome.released, outcome.stopped
            );
        }
        Ok(ExitCode::SUCCESS)
    }
}
