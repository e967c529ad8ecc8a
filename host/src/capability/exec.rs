//! The exec capability: an agent's script, run in the sandbox with the
//! workspace mounted read-write, the task's read-only files mounted
//! read-only over it, and nothing else of the host.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::tool_error::{ToolError, ToolResult};
use super::workspace::{Workspace, normalize};
use crate::record::walk::{self, DirHandle, Usage};
use crate::sandbox::{self, EpisodeSandbox, EpisodeSetup, Mount, Stopper, Termination};

/// How often the workspace's filesystem is looked at while a script runs.
const WATCH_EVERY: Duration = Duration::from_millis(250);

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
    /// Bytes of one argument, and of all of them together.
    pub max_arg_bytes: usize,
    pub max_total_arg_bytes: usize,
    /// What the workspace may hold while scripts run (bytes on disk and
    /// apparent, entries); a script that grows it past this is stopped.
    pub workspace: Usage,
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

    /// Refuses argument lists a script could not be started with, as an
    /// error of the call (never a script that fails to start).
    fn check_args(&self, args: &[String]) -> ToolResult<()> {
        let limits = &self.limits;
        if args.len() > limits.max_args {
            return Err(ToolError::InvalidArgument(format!(
                "{} arguments; at most {}",
                args.len(),
                limits.max_args
            )));
        }
        if args.iter().any(|a| a.contains('\0')) {
            return Err(ToolError::InvalidArgument("arguments may not contain NUL bytes".into()));
        }
        if let Some(long) = args.iter().find(|a| a.len() > limits.max_arg_bytes) {
            return Err(ToolError::TooLarge(format!(
                "an argument of {} bytes; each may be at most {} bytes (pass large input in a file)",
                long.len(),
                limits.max_arg_bytes
            )));
        }
        let total: usize = args.iter().map(String::len).sum();
        if total > limits.max_total_arg_bytes {
            return Err(ToolError::TooLarge(format!(
                "arguments of {total} bytes in all; at most {} bytes (pass large input in a file)",
                limits.max_total_arg_bytes
            )));
        }
        Ok(())
    }

    /// Runs `script` in the episode's sandbox. `used` is what the workspace
    /// held before (its last snapshot), for the watch on its caps.
    pub async fn execute(
        &mut self,
        workspace: &Workspace,
        script: &str,
        args: &[String],
        timeout_seconds: Option<u32>,
        deadline: Instant,
        used: Usage,
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
        workspace.check_regular_file(script).map_err(|e| match e {
            ToolError::NotFound(_) => ToolError::NotFound(format!("{script}: no such script in the workspace")),
            other => other,
        })?;
        self.check_args(args)?;
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
        let stop = Stopper::default();
        let exec = sandbox::Exec {
            argv,
            env: Vec::new(),
            timeout,
            output_cap: self.limits.output_cap,
            output_kill_bytes: self.limits.output_kill_bytes,
            log_prefix: Some(self.log_dir.join(format!("{:04}", self.runs))),
            stop: stop.clone(),
        };
        let root = workspace
            .handle()
            .try_clone()
            .map_err(|e| ToolError::Io(format!("the workspace: {e}")))?;
        let watch = watch_workspace(root, used, self.limits.workspace, stop);
        let outcome = tokio::select! {
            outcome = self.sandbox.exec(exec) => outcome,
            never = watch => match never {},
        }
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

/// Watches the workspace's filesystem while a script runs and stops the
/// script once the workspace is past its caps. Cheap: `statvfs` each tick;
/// the workspace itself is counted only when the filesystem as a whole grew
/// by more than the room left (other writers share the filesystem).
async fn watch_workspace(root: DirHandle, used: Usage, caps: Usage, stop: Stopper) -> std::convert::Infallible {
    let used_of = |v: &rustix::fs::StatVfs| (v.f_blocks - v.f_bfree) * v.f_frsize;
    let mut base = rustix::fs::fstatvfs(&root).ok();
    let mut known = used;
    let root = std::sync::Arc::new(root);
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let (Some(start), Ok(now)) = (base.as_ref(), rustix::fs::fstatvfs(&*root)) else {
            continue;
        };
        let grown_bytes = used_of(&now).saturating_sub(used_of(start));
        let grown_entries = start.f_ffree.saturating_sub(now.f_ffree);
        if known.allocated_bytes + grown_bytes <= caps.allocated_bytes && known.entries + grown_entries <= caps.entries
        {
            continue;
        }
        let tree = root.clone();
        let limit = caps;
        let Ok(Ok(counted)) = tokio::task::spawn_blocking(move || walk::usage(&tree, &limit)).await else {
            continue;
        };
        if counted.allocated_bytes > caps.allocated_bytes || counted.bytes > caps.bytes {
            stop.stop(format!(
                "the workspace grew past its cap of {} MiB",
                caps.allocated_bytes >> 20
            ));
        } else if counted.entries > caps.entries {
            stop.stop(format!(
                "the workspace grew past its cap of {} files and folders",
                caps.entries
            ));
        }
        // Someone else's growth: measure from here.
        base = Some(now);
        known = counted;
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
        max_file_bytes: limits.workspace.bytes,
    }
}
