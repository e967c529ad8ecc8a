//! Where untrusted scripts run: the agent's scripts, and the task's own
//! prepare and evaluate steps. `local` is bubblewrap, the embedded default.

pub mod cgroup;
pub mod local;
pub mod output;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use output::CapturedOutput;

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
    /// Where the full (capped) stdout and stderr are written, as
    /// `<prefix>.stdout` and `<prefix>.stderr`.
    pub log_prefix: Option<PathBuf>,
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

impl Outcome {
    pub fn success(&self) -> bool {
        self.termination == Termination::Exited && self.exit_code == Some(0)
    }
}

/// Runs commands in isolation. Implemented by the bubblewrap sandbox here.
#[async_trait::async_trait]
pub trait Sandbox: Send + Sync {
    /// A short name for provenance records, e.g. "local (bubblewrap 0.8.0)".
    fn describe(&self) -> String;
    async fn run(&self, command: Command) -> anyhow::Result<Outcome>;
}
