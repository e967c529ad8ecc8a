//! The WIT `exec` interface: an agent's script, run in the sandbox with the
//! workspace mounted read-write, the task's read-only files mounted
//! read-only over it, and nothing else of the host. Each run is a step,
//! followed by a snapshot; a read-only file a script managed to change is
//! put back.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use serde_json::json;

use super::files::{WorkspaceFiles, normalize};
use super::mlrb::agent::exec as wit;
use super::recorder::{Recorder, host_fault};
use super::tool_error::{ToolError, ToolResult};
use super::{HostResult, to_wit};
use crate::limits::Limits;
use crate::record::snapshot::{ManifestEntry, ObjectReader};
use crate::record::trace::text;
use crate::record::walk::{self, DirHandle, Opened, Usage};
use crate::sandbox::egress::gateway::Gateway;
use crate::sandbox::{self, EpisodeSandbox, EpisodeSetup, Mount, Reach, Stopper, Termination};

/// How often the workspace's filesystem is looked at while a script runs.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// How long a script killed from outside waits for the host's own stop
/// before it is recorded as killed: a stop signals the host and its
/// scripts at once, and a loaded host may act on its signal seconds later.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Where the workspace appears inside the sandbox.
pub const GUEST_WORKSPACE: &str = "/workspace";

/// What the agent learns about a finished script.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ExecOutcome {
    /// The exit status; `None` when the process was ended by a signal.
    pub exit_code: Option<i32>,
    /// The script's standard output, up to the output cap.
    pub stdout: String,
    /// The script's standard error, up to the output cap, with any host note.
    pub stderr: String,
    /// True when stdout was cut at the output cap.
    pub stdout_truncated: bool,
    /// True when stderr was cut at the output cap.
    pub stderr_truncated: bool,
    /// How long the script ran, in milliseconds.
    pub duration_ms: u64,
    /// How the script ended.
    pub termination: Termination,
    /// Ended by a stop the host did not send (see `Outcome::ended_from_outside`).
    #[serde(skip)]
    pub ended_from_outside: bool,
}

/// Runs an episode's scripts, one after another, in its sandbox.
pub struct ScriptRunner {
    sandbox: Box<dyn EpisodeSandbox>,
    limits: Limits,
    log_dir: PathBuf,
    runs: u64,
    /// The episode's egress proxy, when its task grants a network.
    gateway: Option<Gateway>,
    /// What every script runs with in the task's profile (its offline
    /// hub): the environment added, and the command its argv goes through.
    profile: (Vec<(String, String)>, Vec<String>),
}

impl ScriptRunner {
    /// A runner for `sandbox` under `limits`, keeping script logs in `log_dir`.
    pub fn new(sandbox: Box<dyn EpisodeSandbox>, limits: Limits, log_dir: PathBuf) -> Self {
        Self {
            sandbox,
            limits,
            log_dir,
            runs: 0,
            gateway: None,
            profile: Default::default(),
        }
    }

    /// Every script runs with `env` added, its argv after `prefix` (the
    /// task's offline hub, which the sandbox was opened with, mounted).
    pub fn in_profile(mut self, (env, prefix): (Vec<(String, String)>, Vec<String>)) -> Self {
        self.profile = (env, prefix);
        self
    }

    /// Numbers its scripts' logs after those already in its folder (a
    /// resumed episode: the dead host's logs are kept, none overwritten).
    pub fn numbered_after_existing_logs(mut self) -> Self {
        let numbers = std::fs::read_dir(&self.log_dir).into_iter().flatten().filter_map(|e| {
            let name = e.ok()?.file_name();
            name.to_str()?.split('.').next()?.parse::<u64>().ok()
        });
        self.runs = numbers.max().unwrap_or(0);
        self
    }

    /// Scripts reach the network through `gateway` (which the sandbox was
    /// opened with).
    pub fn with_gateway(mut self, gateway: Option<Gateway>) -> Self {
        self.gateway = gateway;
        self
    }

    /// After the sandbox closed: the connections not yet recorded, once
    /// those it held open have ended (a second at most).
    pub async fn last_connections(&self) -> Option<serde_json::Value> {
        self.gateway.as_ref()?.settle(Duration::from_secs(1)).await;
        self.new_connections()
    }

    /// What the scripts' connections came to (`None` without any).
    pub fn network_use(&self) -> Option<crate::sandbox::egress::NetworkUse> {
        crate::sandbox::egress::NetworkUse::of(&self.gateway.as_ref()?.connections())
    }

    /// The connections the scripts made since the last call, as the trace
    /// records them (`None` when there were none).
    pub fn new_connections(&self) -> Option<serde_json::Value> {
        let connections = self.gateway.as_ref()?.take_new();
        (!connections.is_empty()).then(|| json!({ "connections": connections }))
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
        workspace: &WorkspaceFiles,
        script: &str,
        args: &[String],
        timeout_seconds: Option<u32>,
        deadline: Instant,
        used: Usage,
    ) -> ToolResult<ExecOutcome> {
        let rel = normalize(script, &self.limits)?;
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
        let mut argv = vec![interpreter.to_string(), format!("{GUEST_WORKSPACE}/{rel}")];
        argv.extend(args.iter().cloned());
        let run = Run {
            argv,
            timeout_seconds,
            deadline,
            used,
            stop: Stopper::default(),
        };
        let outcome = self.run_argv(workspace, run, script).await?;
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
            ended_from_outside: outcome.ended_from_outside,
        })
    }

    /// Where the next command's stdout and stderr are logged as they come
    /// (`<prefix>.stdout`, `.stderr`): what a terminal shows while it runs.
    pub fn next_log_prefix(&self) -> PathBuf {
        self.log_dir.join(format!("{:04}", self.runs + 1))
    }

    /// Runs `run.argv` in the episode's sandbox, its output logged, under
    /// the script timeout, the time left and the workspace's caps; `what`
    /// names it in an error.
    async fn run_argv(&mut self, workspace: &WorkspaceFiles, run: Run, what: &str) -> ToolResult<sandbox::Outcome> {
        let left = run.deadline.saturating_duration_since(Instant::now());
        if left < Duration::from_secs(1) {
            return Err(ToolError::Timeout(
                "the episode's wall-clock deadline has passed".into(),
            ));
        }
        let max = self.limits.script_timeout();
        let asked = run
            .timeout_seconds
            .map_or(max, |s| Duration::from_secs(s.max(1) as u64));
        let timeout = asked.min(max).min(left);

        self.runs += 1;
        let (env, prefix) = &self.profile;
        let exec = sandbox::Exec {
            argv: prefix.iter().cloned().chain(run.argv).collect(),
            env: env.clone(),
            timeout,
            log_prefix: Some(self.log_dir.join(format!("{:04}", self.runs))),
            stop: run.stop.clone(),
        };
        let root = workspace
            .handle()
            .try_clone()
            .map_err(|e| ToolError::Io(format!("the workspace: {e}")))?;
        let caps = Usage {
            entries: self.limits.workspace_files,
            bytes: self.limits.workspace_bytes,
            allocated_bytes: self.limits.workspace_bytes,
            uncounted: 0,
        };
        let watch = watch_workspace(root, run.used, caps, run.stop);
        tokio::select! {
            outcome = self.sandbox.exec(exec) => outcome,
            never = watch => match never {},
        }
        .map_err(|e| ToolError::Unavailable(format!("the sandbox could not run {what}: {e:#}")))
    }
}

/// One command for the sandbox: its argv, the timeout asked for, the
/// episode's deadline, what the workspace held before, and its stop.
struct Run {
    argv: Vec<String>,
    timeout_seconds: Option<u32>,
    deadline: Instant,
    used: Usage,
    stop: Stopper,
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
        } else if counted.uncounted > 0 {
            // Growth hidden in a folder the host cannot read (or too deep to
            // count) could fill the disk unseen.
            stop.stop(format!(
                "the workspace grew, and {} folder(s) of it cannot be counted (unreadable, or deeper than {} levels)",
                counted.uncounted,
                walk::USAGE_MAX_DEPTH
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
/// it a mount point a script cannot rename away. `network` is the way out
/// the episode's grant gives (its proxy's socket, or nothing).
pub fn episode_setup(
    name: &str,
    workspace: &WorkspaceFiles,
    limits: &Limits,
    gpus: Vec<String>,
    network: Reach,
) -> EpisodeSetup {
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
        network,
        limits: sandbox::CommandLimits::new(limits, limits.script_timeout()),
        gpus,
        lifetime: limits.wall() + Duration::from_secs(300),
    }
}

/// The exec interface's own state: the script runner, and the read-only
/// files as they were when the workspace was made.
pub struct ExecState {
    /// Runs the agent's scripts in the episode's sandbox.
    pub runner: ScriptRunner,
    read_only_baseline: Vec<(String, ManifestEntry)>,
}

impl ExecState {
    /// A state around `runner`, with no read-only files remembered yet.
    pub fn new(runner: ScriptRunner) -> Self {
        Self {
            runner,
            read_only_baseline: Vec::new(),
        }
    }

    /// Remembers the read-only files of the first snapshot, to put back.
    pub fn remember_read_only(&mut self, files: &WorkspaceFiles, recorder: &Recorder) {
        let snapshots = &recorder.snapshots;
        self.read_only_baseline = files
            .read_only()
            .paths()
            .filter_map(|p| snapshots.entry(p).map(|e| (p.to_string(), e)))
            .collect();
    }
}

link_view! {
    /// What the exec interface's host code sees: its state and the workspace.
    ExecCapability => ExecView<'a>, |state| {
        exec: &'a mut ExecState = &mut state.exec,
        files: &'a WorkspaceFiles = &state.files,
    }
}

impl From<ExecOutcome> for wit::ExecResult {
    fn from(o: ExecOutcome) -> Self {
        Self {
            exit_code: o.exit_code,
            stdout: o.stdout,
            stderr: o.stderr,
            stdout_truncated: o.stdout_truncated,
            stderr_truncated: o.stderr_truncated,
            duration_ms: o.duration_ms,
            termination: match o.termination {
                Termination::Exited => wit::Termination::Exited,
                Termination::TimedOut => wit::Termination::TimedOut,
                Termination::OutOfMemory => wit::Termination::OutOfMemory,
                Termination::Killed => wit::Termination::Killed,
            },
        }
    }
}

impl wit::Host for ExecView<'_> {
    async fn execute_script(
        &mut self,
        script: String,
        args: Vec<String>,
        timeout_seconds: Option<u32>,
    ) -> HostResult<wit::ExecResult> {
        let result = self.execute(script, args, timeout_seconds).await?;
        Ok(to_wit(result))
    }
}

impl ExecView<'_> {
    /// Runs a script as a step; afterwards snapshots whatever it changed and
    /// puts back any read-only file it managed to move or replace.
    async fn execute(
        &mut self,
        script: String,
        args: Vec<String>,
        timeout_seconds: Option<u32>,
    ) -> wasmtime::Result<ToolResult<ExecOutcome>> {
        let started = Instant::now();
        // More arguments than a script may get are refused: the trace keeps their count only.
        let recorded_args = match args.len() <= self.exec.runner.limits.max_args {
            true => json!(args.iter().map(|a| text(a)).collect::<Vec<_>>()),
            false => json!({ "count": args.len() }),
        };
        let call_args = json!({
            "script": text(&script),
            "args": recorded_args,
            "timeout_seconds": timeout_seconds,
        });
        let call = ("exec", "execute-script");
        if let Some(matched) = self.recorder.replayed(call, &call_args)? {
            return super::recorder::from_recorded(matched.result);
        }
        let (step, result) = match self.recorder.begin_step()? {
            Ok(step) => {
                let (deadline, used) = (self.recorder.deadline, self.recorder.used());
                let result = self
                    .exec
                    .runner
                    .execute(self.files, &script, &args, timeout_seconds, deadline, used)
                    .await;
                if result.as_ref().is_ok_and(|o| o.ended_from_outside) {
                    // Maybe the host's own stop, reaching the script first:
                    // if so the call is not recorded and runs again on resume.
                    self.recorder.await_stop(STOP_GRACE).await;
                }
                (Some(step), result)
            }
            Err(refused) => (None, Err(refused)),
        };
        let label = format!("execute-script {script}");
        self.record_step((call, step, &call_args, started), &result, &label)?;
        Ok(result)
    }

    /// A person's command line (`mlrb human`): run by `sh` in the episode's
    /// sandbox from `cwd`, as a step like a script (the same budget, caps
    /// and snapshot after it, read-only files put back), recorded as
    /// `shell command`; `stop` ends it early (the person's Ctrl-C).
    pub async fn command_line(
        &mut self,
        line: &str,
        cwd: &str,
        stop: Stopper,
    ) -> wasmtime::Result<ToolResult<CommandOutcome>> {
        let started = Instant::now();
        let call_args = json!({ "line": text(line), "cwd": text(cwd) });
        let call = ("shell", "command");
        let (step, result) = match self.recorder.begin_step()? {
            Ok(step) => {
                let argv: Vec<String> = ["sh", "-c", SHELL_LINE, "mlrb-shell", cwd, line]
                    .map(String::from)
                    .into();
                let run = Run {
                    argv,
                    timeout_seconds: None,
                    deadline: self.recorder.deadline,
                    used: self.recorder.used(),
                    stop,
                };
                let checked = self.exec.runner.check_args(&run.argv[3..]);
                let result = match checked {
                    Ok(()) => self.exec.runner.run_argv(self.files, run, "the command").await,
                    Err(refused) => Err(refused),
                };
                (Some(step), result.map(CommandOutcome::from))
            }
            Err(refused) => (None, Err(refused)),
        };
        self.record_step((call, step, &call_args, started), &result, "command")?;
        Ok(result)
    }

    /// After a step's run: the snapshot of what it changed, its event, and
    /// where it connected (or tried to), as the host's record.
    fn record_step<T: Serialize>(
        &mut self,
        (call, step, args, started): ((&str, &str), Option<u32>, &serde_json::Value, Instant),
        result: &ToolResult<T>,
        label: &str,
    ) -> wasmtime::Result<()> {
        let snapshot = match step {
            Some(step) => self.snapshot_and_restore(&format!("step {step}: {label}"))?,
            None => None,
        };
        self.recorder
            .write_result(call, step, args, result, started, snapshot)?;
        if let Some(connections) = self.exec.runner.new_connections() {
            self.recorder.record_host("egress", connections);
        }
        Ok(())
    }

    /// The snapshot after a script, and another if read-only files had to
    /// be put back.
    fn snapshot_and_restore(&mut self, label: &str) -> wasmtime::Result<Option<u64>> {
        let root = self.files.handle();
        let snapshot = self.recorder.snapshot(root, label)?;
        let restored = self
            .restore_read_only()
            .map_err(|e| host_fault("restoring read-only files", format!("{e:#}")))?;
        if !restored {
            return Ok(snapshot);
        }
        Ok(self
            .recorder
            .snapshot(root, &format!("{label} (read-only files restored)"))?
            .or(snapshot))
    }

    /// Puts every read-only file back as it was at the start; true if any
    /// had been changed (which the sandbox's read-only mounts should prevent).
    fn restore_read_only(&mut self) -> anyhow::Result<bool> {
        if self.recorder.snapshots.last().is_none() {
            return Ok(false);
        }
        let current = &self.recorder.snapshots;
        let changed: Vec<(String, ManifestEntry)> = self
            .exec
            .read_only_baseline
            .iter()
            .filter(|(path, entry)| current.entry(path).as_ref() != Some(entry))
            .cloned()
            .collect();
        if changed.is_empty() {
            return Ok(false);
        }
        let objects = self.recorder.snapshots.reader()?;
        for (path, entry) in &changed {
            if let ManifestEntry::File { hash, executable, .. } = entry {
                restore_file(self.files.handle(), path, &objects, hash, *executable)
                    .with_context(|| format!("restoring read-only {path}"))?;
            }
        }
        let paths: Vec<&str> = changed.iter().map(|(p, _)| p.as_str()).collect();
        tracing::warn!(paths = %paths.join(", "), "a script changed read-only files; they were restored");
        self.recorder
            .record_host("restore-read-only", json!({ "paths": paths }));
        Ok(true)
    }
}

/// How a person's command line runs: `sh -c` this, with the working
/// folder and the line as `$1` and `$2` (never spliced into the script).
const SHELL_LINE: &str = "cd -- \"$1\" || exit 125\neval \"$2\"";

/// What a person's command line came to: its exit status, time, the sizes
/// of its whole output and the head and tail of each stream.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct CommandOutcome {
    /// The exit status; `None` when the process was ended by a signal.
    pub exit_code: Option<i32>,
    /// How it ended.
    pub termination: Termination,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// Bytes it wrote to stdout in all.
    pub stdout_bytes: u64,
    /// Bytes it wrote to stderr in all.
    pub stderr_bytes: u64,
    /// The head and tail of its stdout.
    pub stdout: String,
    /// The head and tail of its stderr.
    pub stderr: String,
    /// Why the host ended it, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl From<sandbox::Outcome> for CommandOutcome {
    fn from(o: sandbox::Outcome) -> Self {
        Self {
            exit_code: o.exit_code,
            termination: o.termination,
            duration_ms: o.duration.as_millis() as u64,
            stdout_bytes: o.stdout.total_bytes,
            stderr_bytes: o.stderr.total_bytes,
            stdout: o.stdout.text,
            stderr: o.stderr.text,
            note: o.note,
        }
    }
}

/// Puts object `hash` back at `rel` under `root`, replacing whatever a
/// script left on the way (a link, a file where a folder was) without ever
/// following a link.
fn restore_file(
    root: &DirHandle,
    rel: &str,
    objects: &ObjectReader,
    hash: &str,
    executable: bool,
) -> anyhow::Result<()> {
    let (parents, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let mut dir = root.try_clone()?;
    for part in parents.split('/').filter(|p| !p.is_empty()) {
        dir = match dir.open_entry(part.as_bytes()) {
            Ok(Opened::Dir(sub, _)) => sub,
            Ok(_) => {
                dir.remove_entry(part.as_bytes())?;
                dir.create_dir(part.as_bytes())?
            }
            Err(_) => dir.create_dir(part.as_bytes())?,
        };
    }
    match dir.remove_entry(name.as_bytes()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    objects.restore(hash, &dir, name, executable, true)
}
