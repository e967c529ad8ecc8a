//! Where untrusted scripts run: the agent's scripts, and the task's own
//! prepare and evaluate steps. `local` is bubblewrap, the embedded default.

pub mod cgroup;
pub mod docker;
pub mod gpu;
pub mod image;
pub mod local;
pub mod output;
pub mod seccomp;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use output::CapturedOutput;

/// Which sandbox runs scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SandboxKind {
    /// bubblewrap on this machine (the default).
    #[default]
    Local,
    /// Containers of the local Docker engine.
    Docker,
}

/// Opens the sandbox of `kind`; `image` is the container image for Docker.
pub async fn open(kind: SandboxKind, image: &str) -> anyhow::Result<std::sync::Arc<dyn Sandbox>> {
    Ok(match kind {
        SandboxKind::Local => std::sync::Arc::new(local::LocalSandbox::detect()?),
        SandboxKind::Docker => std::sync::Arc::new(docker::DockerSandbox::connect(image).await?),
    })
}

/// A host path made visible inside the sandbox.
#[derive(Debug, Clone)]
pub struct Mount {
    pub host: PathBuf,
    pub guest: PathBuf,
    pub writable: bool,
}

impl Mount {
    pub fn read_only(host: impl Into<PathBuf>, guest: impl Into<PathBuf>) -> Self {
        Self {
            host: host.into(),
            guest: guest.into(),
            writable: false,
        }
    }
    pub fn writable(host: impl Into<PathBuf>, guest: impl Into<PathBuf>) -> Self {
        Self {
            host: host.into(),
            guest: guest.into(),
            writable: true,
        }
    }
}

/// Resource limits of one sandboxed command.
#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    pub timeout: Duration,
    pub memory_bytes: u64,
    pub max_processes: u32,
    pub cpus: f64,
    /// Bytes of each stream handed back to the caller (head and tail kept).
    pub output_cap: usize,
    /// Total bytes a command may print before it is killed.
    pub output_kill_bytes: u64,
    /// Bytes of each stream kept in the log file on disk.
    pub log_cap: u64,
    /// The largest file a command may write (`RLIMIT_FSIZE`): a sparse or
    /// runaway file fails with `EFBIG` instead of filling the disk.
    pub max_file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(600),
            memory_bytes: 2 << 30,
            max_processes: 256,
            cpus: 2.0,
            output_cap: 32 << 10,
            output_kill_bytes: 256 << 20,
            log_cap: 8 << 20,
            max_file_bytes: 10 << 30,
        }
    }
}

/// One command to run in a fresh sandbox.
#[derive(Debug, Clone)]
pub struct Command {
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    pub mounts: Vec<Mount>,
    pub env: Vec<(String, String)>,
    pub network: bool,
    pub limits: Limits,
    /// Device ids of GPUs the command may use (`--sandbox docker` only).
    pub gpus: Vec<String>,
    /// Where the full (capped) stdout and stderr are written, as
    /// `<prefix>.stdout` and `<prefix>.stderr`.
    pub log_prefix: Option<PathBuf>,
    /// Ends the command early when the host says so.
    pub stop: Stopper,
}

/// Lets the host end a running command early, saying why (the workspace
/// grew past its cap, the episode was interrupted).
#[derive(Debug, Clone, Default)]
pub struct Stopper {
    token: tokio_util::sync::CancellationToken,
    why: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl Stopper {
    /// Ends the command; the first reason given is the one reported.
    pub fn stop(&self, why: impl Into<String>) {
        if let Ok(mut slot) = self.why.lock() {
            slot.get_or_insert_with(|| why.into());
        }
        self.token.cancel();
    }

    /// Resolves with the reason once `stop` is called.
    pub async fn stopped(&self) -> String {
        self.token.cancelled().await;
        self.why
            .lock()
            .ok()
            .and_then(|w| w.clone())
            .unwrap_or_else(|| "stopped by the host".into())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Termination {
    Exited,
    TimedOut,
    OutOfMemory,
    Killed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub termination: Termination,
    /// Why the host ended the command, when it did.
    pub note: Option<String>,
    pub duration: Duration,
    pub stdout: CapturedOutput,
    pub stderr: CapturedOutput,
}

/// How a command ended, as the sandbox observed it.
pub struct Ending {
    /// The exit status the sandbox reported (bubblewrap and Docker report a
    /// child killed by signal N as 128 + N).
    pub exit_code: Option<i32>,
    /// A signal that ended the sandbox's own process.
    pub signal: Option<i32>,
    /// Set when the host stopped the command (timeout, output flood).
    pub ended_by_host: Option<(Termination, String)>,
    pub out_of_memory: bool,
    pub memory_bytes: u64,
}

impl Outcome {
    /// The outcome of an ended command: why it ended, in the order that
    /// decides (the host's own verdict, then OOM, then a signal).
    pub fn from_ending(ending: Ending, duration: Duration, stdout: CapturedOutput, stderr: CapturedOutput) -> Self {
        let mut exit_code = ending.exit_code;
        let mut signal = ending.signal;
        if let Some(code) = exit_code.filter(|c| (129..=128 + 64).contains(c)) {
            signal = Some(code - 128);
            exit_code = None;
        }
        let (termination, note) = match ending.ended_by_host {
            Some((termination, note)) => (termination, Some(note)),
            None if ending.out_of_memory => (
                Termination::OutOfMemory,
                Some(format!("out of memory: the limit is {} MiB", ending.memory_bytes >> 20)),
            ),
            None if signal.is_some() => (
                Termination::Killed,
                Some(format!("killed by signal {}", signal.unwrap_or_default())),
            ),
            None => (Termination::Exited, None),
        };
        if termination != Termination::Exited {
            exit_code = None;
        }
        Self {
            exit_code,
            signal,
            termination,
            note,
            duration,
            stdout,
            stderr,
        }
    }

    pub fn success(&self) -> bool {
        self.termination == Termination::Exited && self.exit_code == Some(0)
    }
}

/// What every script of one episode runs with: fixed when the episode's
/// sandbox opens.
#[derive(Debug, Clone)]
pub struct EpisodeSetup {
    /// Names the episode's sandbox (labels, logs).
    pub name: String,
    pub mounts: Vec<Mount>,
    pub cwd: PathBuf,
    pub network: bool,
    pub memory_bytes: u64,
    pub max_processes: u32,
    pub cpus: f64,
    /// Device ids of the GPUs this episode holds (see `gpu::GpuPool`).
    pub gpus: Vec<String>,
    /// The largest file a script may write.
    pub max_file_bytes: u64,
}

/// One script run inside an episode's sandbox.
#[derive(Debug, Clone)]
pub struct Exec {
    pub argv: Vec<String>,
    /// Variables added to the sandbox's fixed environment.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub output_cap: usize,
    pub output_kill_bytes: u64,
    pub log_prefix: Option<PathBuf>,
    pub stop: Stopper,
}

impl EpisodeSetup {
    /// The one-shot command that runs `exec` with this setup.
    pub fn command(&self, exec: Exec) -> Command {
        Command {
            argv: exec.argv,
            cwd: self.cwd.clone(),
            mounts: self.mounts.clone(),
            env: exec.env,
            network: self.network,
            limits: Limits {
                timeout: exec.timeout,
                memory_bytes: self.memory_bytes,
                max_processes: self.max_processes,
                cpus: self.cpus,
                output_cap: exec.output_cap,
                output_kill_bytes: exec.output_kill_bytes,
                max_file_bytes: self.max_file_bytes,
                ..Limits::default()
            },
            gpus: self.gpus.clone(),
            log_prefix: exec.log_prefix,
            stop: exec.stop,
        }
    }
}

/// Runs commands in isolation: bubblewrap locally, or Docker containers.
#[async_trait::async_trait]
pub trait Sandbox: Send + Sync {
    /// A short name for provenance records, e.g. "local (bubblewrap 0.8.0)".
    fn describe(&self) -> String;
    /// Runs one command in a fresh sandbox (a task's prepare and evaluate steps).
    async fn run(&self, command: Command) -> anyhow::Result<Outcome>;
    /// Whether episodes can be given GPUs.
    fn supports_gpus(&self) -> bool {
        false
    }
    /// Opens the sandbox an episode's scripts run in, one after another.
    async fn open_episode(&self, setup: EpisodeSetup) -> anyhow::Result<Box<dyn EpisodeSandbox>>;
}

/// The sandbox of one episode. `close` must be called on every path; a
/// host that dies before it leaves what `mlrb gc` removes.
#[async_trait::async_trait]
pub trait EpisodeSandbox: Send + Sync {
    async fn exec(&self, exec: Exec) -> anyhow::Result<Outcome>;
    async fn close(&self) -> anyhow::Result<()>;
}
