//! `mlrb serve`: serves the queue of a cluster bench already made (by
//! `mlrb bench --on ...`) to its workers until every episode has a result;
//! or, with `--submissions`, a submission service folder.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;

use super::{EXIT_INTERRUPTED, ctrl_c, say};
use crate::http_server::Settings;
use crate::http_server::connections::Caps;
use crate::submissions::service::limiter::Rate;
use crate::submissions::service::serving::{Options, serve};
use crate::{cluster, report};

/// A whole number of seconds, at least one.
fn seconds(n: u64) -> std::time::Duration {
    std::time::Duration::from_secs(n.max(1))
}

/// Options of `mlrb serve`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  mlrb bench --plan plan.toml --on server   # makes and serves the run\n  mlrb serve runs/20261125-101500            # serves it again after a restart\n  mlrb serve --submissions service/ --listen 0.0.0.0:8787   # the submission service"
)]
pub struct ServeArgs {
    /// The run directory of a bench made with `--on server|slurm|k8s`.
    #[arg(required_unless_present = "submissions", conflicts_with = "submissions")]
    run: Option<PathBuf>,
    /// Serve this submission service folder (`mlrb submissions init`):
    /// uploads, the queue of submissions and the leaderboard.
    #[arg(long, value_name = "DIR")]
    submissions: Option<PathBuf>,
    /// Where the submission service listens.
    #[arg(long, default_value = "127.0.0.1:8787", requires = "submissions")]
    listen: String,
    /// Requests a second each client address may go on with (the service).
    #[arg(long, default_value_t = 5.0, requires = "submissions")]
    rate: f64,
    /// Requests each client address may make at once (the service).
    #[arg(long, default_value_t = 30.0, requires = "submissions")]
    burst: f64,
    /// Connections one client address may hold at once (the service); past
    /// it, the address's oldest idle one is closed for the new one.
    #[arg(long, default_value_t = 32, value_name = "N", requires = "submissions")]
    max_connections_per_address: usize,
    /// Connections the service holds at once, from all addresses.
    #[arg(long, default_value_t = 1024, value_name = "N", requires = "submissions")]
    max_connections: usize,
    /// Seconds a request's head may take to arrive (the service).
    #[arg(long, default_value_t = 10, value_name = "SECONDS", requires = "submissions")]
    header_timeout: u64,
    /// Seconds a connection may stay idle (the service).
    #[arg(long, default_value_t = 60, value_name = "SECONDS", requires = "submissions")]
    idle_timeout: u64,
    /// Seconds an upload's body may take to arrive (the service).
    #[arg(long, default_value_t = 300, value_name = "SECONDS", requires = "submissions")]
    upload_timeout: u64,
    /// No progress display.
    #[arg(long, short)]
    quiet: bool,
}

impl ServeArgs {
    /// Serves until the queue drains; prints the summary.
    pub async fn run(self) -> Result<ExitCode> {
        let Some(run) = self.run.clone() else {
            return self.serve_submissions().await;
        };
        if !cluster::is_cluster_run(&run) {
            bail!(
                "{}: not a cluster bench (no cluster/queue.sqlite): make one with `mlrb bench --on server`",
                run.display()
            );
        }
        let watch = cluster::Watch {
            quiet: self.quiet,
            rerun_stale: false,
        };
        let outcome = cluster::bench(None, &run, watch, ctrl_c()).await?;
        say!("{}", report::summary_tables(&outcome.summary, false));
        if outcome.interrupted {
            eprintln!("interrupted: `mlrb serve {}` goes on", run.display());
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
        Ok(ExitCode::SUCCESS)
    }
}

impl ServeArgs {
    async fn serve_submissions(self) -> Result<ExitCode> {
        let dir = self.submissions.unwrap_or_default();
        let options = Options {
            listen: self.listen,
            rate: Rate {
                burst: self.burst.max(1.0),
                per_second: self.rate.max(0.001),
            },
            cache_dir: crate::paths::cache_dir(),
            connections: Settings {
                header_timeout: Some(seconds(self.header_timeout)),
                idle_timeout: Some(seconds(self.idle_timeout)),
                body_timeout: Some(seconds(self.upload_timeout)),
                caps: Caps {
                    per_address: self.max_connections_per_address.max(1),
                    total: self.max_connections.max(1),
                },
                ..Settings::public()
            },
        };
        let shown = dir.clone();
        let ready = move |at: std::net::SocketAddr| {
            eprintln!("serving submissions of {} at http://{at}/", shown.display());
        };
        serve(&dir, options, ready, ctrl_c()).await?;
        eprintln!("stopped: a submission left running resumes at the next `mlrb serve --submissions`");
        Ok(ExitCode::SUCCESS)
    }
}
