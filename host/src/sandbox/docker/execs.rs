//! An exec in a container: made, its output read until it ends or the
//! host ends it, its own process awaited, its exit code read.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use bollard::container::LogOutput;
use bollard::exec::CreateExecOptions;
use futures_util::StreamExt;

use super::container::Container;
use crate::sandbox::output::{HeadTail, flooded, log_file, timed_out};
use crate::sandbox::{CommandLimits, Exec, Termination};

/// How long the output of an exec whose process has exited may stay open
/// (held by a background process) before that process is killed.
const OUTPUT_GRACE: Duration = Duration::from_millis(300);

impl Container {
    /// Waits until the exec's own process has exited (its output may stay
    /// open while something it started in the background holds it).
    pub async fn exited(&self, exec_id: &str) {
        loop {
            match self.docker.inspect_exec(exec_id).await {
                // Not started yet, or still running (an exit code comes only with the end).
                Ok(inspected) if inspected.running == Some(true) || inspected.exit_code.is_none() => {}
                _ => return,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Creates an exec as `user` in the folder `cwd`, with its output
    /// attached or not (`attach`).
    pub async fn create_exec(
        &self,
        argv: Vec<String>,
        env: &[(String, String)],
        attach: bool,
        user: &str,
        cwd: &Path,
    ) -> Result<String> {
        let options = CreateExecOptions {
            cmd: Some(argv),
            env: (!env.is_empty()).then(|| env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            attach_stdout: Some(attach),
            attach_stderr: Some(attach),
            user: Some(user.to_string()),
            working_dir: Some(cwd.to_string_lossy().into_owned()),
            ..Default::default()
        };
        let created = self
            .docker
            .create_exec(&self.id, options)
            .await
            .context("creating an exec")?;
        Ok(created.id)
    }

    /// Reads the exec's output, kept within `limits`, until it closes, the
    /// script's own process exits (a background process may keep the
    /// output open), the timeout or a flood ends it, or the host stops it. The output is let go here:
    /// a daemon blocked on sending it would hold up the kill that follows.
    pub async fn collect(
        &self,
        exec: &Exec,
        limits: &CommandLimits,
        exec_id: &str,
        mut output: std::pin::Pin<
            Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
        >,
    ) -> (Option<(Termination, String)>, HeadTail, HeadTail) {
        let log = |stream| log_file(&exec.log_prefix, stream);
        let mut stdout = HeadTail::new(limits.output_cap, log("stdout"), limits.log_cap);
        let mut stderr = HeadTail::new(limits.output_cap, log("stderr"), limits.log_cap);
        let flood_limit = limits.output_kill_bytes;
        let drain = async {
            while let Some(Ok(chunk)) = output.next().await {
                match chunk {
                    LogOutput::StdOut { message } => stdout.push(&message),
                    LogOutput::StdErr { message } => stderr.push(&message),
                    _ => {}
                }
                if stdout.total() + stderr.total() > flood_limit {
                    return Some(flooded(flood_limit));
                }
            }
            None
        };
        let exited = async {
            self.exited(exec_id).await;
            tokio::time::sleep(OUTPUT_GRACE).await;
        };
        let ended_by_host = tokio::select! {
            drained = tokio::time::timeout(exec.timeout, drain) => match drained {
                Ok(flood) => flood,
                Err(_) => Some(timed_out(exec.timeout)),
            },
            _ = exited => None,
            why = exec.stop.stopped() => Some((Termination::Killed, format!("killed: {why}"))),
        };
        drop(output);
        (ended_by_host, stdout, stderr)
    }

    /// The exit code of a finished exec.
    pub async fn exit_code(&self, exec_id: &str) -> Result<Option<i32>> {
        for _ in 0..100 {
            let inspected = self.docker.inspect_exec(exec_id).await.context("inspecting an exec")?;
            if inspected.running != Some(true) {
                return Ok(inspected.exit_code.map(|c| c as i32));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(None)
    }
}
