//! The exec capability: an agent's script, run in the sandbox with the
//! workspace mounted read-write, the task's read-only files mounted
//! read-only over it, and nothing else of the host.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::tool_error::{ToolError, ToolResult};
use super::workspace::{Workspace, normalize};
use crate::sandbox::{self, EpisodeSandbox, EpisodeSetup, Mount, Termination};

/// Where the workspace appears inside the sandbox.
pub const GUEST_WORKSPACE: &str = "/workspace";

/// Limits every script of an episode runs under.
#[derive(Debug, Clone, Serialize)]
pub struct ScriptLimits {
    pub max_timeout: Duration,
    pub memory_bytes: u64,
    pub max_processes: u32,
    pub cpus: f64,
    pub network: bool,
    pub output_cap: usize,
    pub output_kill_bytes: u64,
    pub max_args: usize,
}

/// What the agent learns about a finished script.
#[derive(Debug, Clone, Serialize)]
pub struct ExecOutcome {
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration_ms: u64,
    pub termination: Termination,
}

pub struct ScriptRunner {
    sandbox: Box<dyn EpisodeSandbox>,
    limits: ScriptLimits,
    log_dir: PathBuf,
    runs: u64,
}

impl ScriptRunner {
    pub fn new(sandbox: Box<dyn EpisodeSandbox>, limits: ScriptLimits, log_dir: PathBuf) -> Self {
        Self {
            sandbox,
            limits,
            log_dir,
            runs: 0,
        }
    }

    pub fn limits(&self) -> &ScriptLimits {
        &self.limits
    }

    /// Closes the episode's sandbox (containers are removed).
    pub async fn close(&self) -> anyhow::Result<()> {
        self.sandbox.close().await
    }

    pub async fn execute(
        &mut self,
        workspace: &Workspace,
        script: &str,
        args: &[String],
        timeout_seconds: Option<u32>,
        deadline: Instant,
    ) -> ToolResult<ExecOutcome> {
        let rel = normalize(script)?;
        let interpreter = match rel.rsplit_once('.').map(|(_, ext)| ext) {
            Some("py") => "python3",
            Some("sh") => "sh",
            _ => {
                return Err(ToolError::InvalidArgument(format!(
                    "{script}: only Python (.py) and shell (.sh) scripts can be run"
                )));
            }
        };
        match std::fs::metadata(workspace.root().join(&rel)) {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => return Err(ToolError::InvalidArgument(format!("{script} is not a file"))),
            Err(_) => {
                return Err(ToolError::NotFound(format!(
                    "{script}: no such script in the workspace"
                )));
            }
        }
        if args.len() > self.limits.max_args {
            return Err(ToolError::InvalidArgument(format!(
                "at most {} arguments",
                self.limits.max_args
            )));
        }
        if args.iter().any(|a| a.contains('\0')) {
            return Err(ToolError::InvalidArgument("arguments may not contain NUL bytes".into()));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_secs(1) {
            return Err(ToolError::Timeout(
                "the episode's wall-clock deadline has passed".into(),
            ));
        }
        let asked = timeout_seconds.map_or(self.limits.max_timeout, |s| Duration::from_secs(s.max(1) as u64));
        let timeout = asked.min(self.limits.max_timeout).min(left);

        self.runs += 1;
        let mut argv = vec![interpreter.to_string(), format!("{GUEST_WORKSPACE}/{rel}")];
        argv.extend(args.iter().cloned());
        let exec = sandbox::Exec {
            argv,
            env: Vec::new(),
            timeout,
            output_cap: self.limits.output_cap,
            output_kill_bytes: self.limits.output_kill_bytes,
            log_prefix: Some(self.log_dir.join(format!("{:04}", self.runs))),
        };
        let outcome = self
            .sandbox
            .exec(exec)
            .await
            .map_err(|e| ToolError::Unavailable(format!("the sandbox could not run {script}: {e:#}")))?;
        let mut stderr = outcome.stderr.text;
        if let Some(note) = &outcome.note {
            stderr.push_str(&format!("\n[mlrb: {note}]\n"));
        }
        Ok(ExecOutcome {
            exit_code: outcome.exit_code,
            stdout: outcome.stdout.text,
            stderr,
            stdout_truncated: outcome.stdout.truncated,
            stderr_truncated: outcome.stderr.truncated,
            duration_ms: outcome.duration.as_millis() as u64,
            termination: outcome.termination,
        })
    }
}

/// The sandbox setup of an episode's scripts: the workspace read-write,
/// and each read-only file of the task mounted read-only over it. Each
/// folder holding a read-only file is bound onto itself first, which makes
/// it a mount point a script cannot rename away.
pub fn episode_setup(name: &str, workspace: &Workspace, limits: &ScriptLimits, gpus: Vec<String>) -> EpisodeSetup {
    let root = workspace.root();
    let mut mounts = vec![Mount::writable(root, GUEST_WORKSPACE)];
    let present: Vec<&str> = workspace
        .read_only()
        .paths()
        .filter(|path| root.join(path).symlink_metadata().is_ok_and(|m| m.is_file()))
        .collect();
    let mut folders: Vec<&str> = present
        .iter()
        .flat_map(|path| path.match_indices('/').map(move |(i, _)| &path[..i]))
        .collect();
    folders.sort_by_key(|f| (f.matches('/').count(), *f));
    folders.dedup();
    for folder in folders {
        if root.join(folder).symlink_metadata().is_ok_and(|m| m.is_dir()) {
            mounts.push(Mount::writable(
                root.join(folder),
                format!("{GUEST_WORKSPACE}/{folder}"),
            ));
        }
    }
    for path in present {
        mounts.push(Mount::read_only(root.join(path), format!("{GUEST_WORKSPACE}/{path}")));
    }
    EpisodeSetup {
        name: name.to_string(),
        mounts,
        cwd: GUEST_WORKSPACE.into(),
        network: limits.network,
        memory_bytes: limits.memory_bytes,
        max_processes: limits.max_processes,
        cpus: limits.cpus,
        gpus,
    }
}
