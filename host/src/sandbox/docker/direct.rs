//! A script run in the episode's container as an exec of its own (where
//! no launcher is kept between scripts).

use std::time::Instant;

use anyhow::{Context, Result, bail};
use bollard::exec::StartExecResults;

use super::episode::DockerEpisode;
use super::users::SANDBOX_USER;
use crate::sandbox::{Ending, Exec, Outcome};

impl DockerEpisode {
    /// Runs a script as an exec of its own.
    pub(super) async fn exec_directly(&self, exec: Exec) -> Result<Outcome> {
        let ooms = self.oom.count();
        let exec_id = self
            .container
            .create_exec(exec.argv.clone(), &exec.env, true, SANDBOX_USER, &self.setup.cwd)
            .await?;
        let started = Instant::now();
        let StartExecResults::Attached { output, .. } = self
            .container
            .docker
            .start_exec(&exec_id, None)
            .await
            .context("starting an exec")?
        else {
            bail!("the daemon started the exec detached");
        };
        let (ended_by_host, stdout, stderr) = self
            .container
            .collect(&exec, &self.setup.limits, &exec_id, output)
            .await;
        // Whatever the script started goes with it, on every ending.
        if !self.nothing_left() {
            self.container.end_processes().await?;
        }
        let duration = started.elapsed();
        let exit_code = self.container.exit_code(&exec_id).await?;
        let out_of_memory = self
            .out_of_memory(ooms, ended_by_host.is_none() && exit_code == Some(137))
            .await;
        let ending = Ending {
            exit_code,
            signal: None,
            ended_by_host,
            out_of_memory,
            memory_bytes: self.setup.limits.memory_bytes,
        };
        Ok(Outcome::from_ending(ending, duration, stdout.finish(), stderr.finish()))
    }
}
