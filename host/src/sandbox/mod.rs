//! Where untrusted scripts run: the agent's scripts, and the task's own
//! prepare and evaluate steps. `local` is bubblewrap, the embedded default.

pub mod cgroup;
pub mod cpu_time;
pub mod docker;
pub mod egress;
pub mod gpu;
pub mod identity;
pub mod image;
mod launcher;
pub mod limits;
pub mod local;
pub mod memory_watch;
pub mod output;
pub mod python;
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

/// Opens the sandbox of `kind`; `image` is the container image for Docker,
/// `python` the environment scripts' `python3` comes from in the local
/// sandbox (see `python`).
pub async fn open(
    kind: SandboxKind,
    image: &str,
    python: Option<&std::path::Path>,
) -> anyhow::Result<std::sync::Arc<dyn Sandbox>> {
    Ok(match (kind, python) {
        (SandboxKind::Local, None) => std::sync::Arc::new(local::LocalSandbox::detect()?),
        (SandboxKind::Local, Some(python)) => {
            let python = python::PythonEnv::resolve(python)?;
            std::sync::Arc::new(local::LocalSandbox::detect()?.with_python(python))
        }
        (SandboxKind::Docker, Some(python)) => anyhow::bail!(
            "--python {}: a Python environment is for the local sandbox; Docker's scripts use the image's python3 (--image)",
            python.display()
        ),
        (SandboxKind::Docker, None) => std::sync::Arc::new(docker::DockerSandbox::connect(image).await?),
    })
}

/// The host's system folders every local sandbox sees read-only (where
/// they are folders, not links): what lies under them needs no mount of
/// its own.
pub const HOST_SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"];

/// The environment every sandboxed command starts with (the same in both
/// sandboxes): no host variable, the script user's name and home (see
/// `identity`), thread counts fitted to the CPUs granted.
pub fn script_environment(cpus: f64) -> Vec<(String, String)> {
    let threads = (cpus.ceil() as u32).max(1).to_string();
    let mut env: Vec<(String, String)> = [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("TMPDIR", "/tmp"),
        ("LANG", "C.UTF-8"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("PYTHONUNBUFFERED", "1"),
        ("MPLCONFIGDIR", "/tmp"),
        ("OMP_NUM_THREADS", &threads),
        ("OPENBLAS_NUM_THREADS", &threads),
        ("MKL_NUM_THREADS", &threads),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.extend(identity::environment());
    env
}

/// How a sandboxed command reaches the network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Reach {
    /// Not at all: a network namespace with only its loopback (the default).
    #[default]
    Nothing,
    /// Only through an egress proxy (`egress::gateway`): its Unix socket on
    /// the host, bound into an otherwise empty network namespace.
    Proxy(PathBuf),
    /// The host's network, unfiltered: only ever a task's own preparation,
    /// when the user passed `--network`.
    Host,
}

impl Reach {
    /// The variables a command starts with for this reach.
    pub fn environment(&self) -> Vec<(String, String)> {
        match self {
            Reach::Proxy(_) => egress::gateway::proxy_environment(),
            _ => Vec::new(),
        }
    }
}

/// A host path made visible inside the sandbox.
#[derive(Debug, Clone)]
pub struct Mount {
    /// The path on the host.
    pub host: PathBuf,
    /// Where it appears inside the sandbox.
    pub guest: PathBuf,
    /// Whether the sandbox may write to it.
    pub writable: bool,
}

impl Mount {
    /// A mount the sandbox can read but not change.
    pub fn read_only(host: impl Into<PathBuf>, guest: impl Into<PathBuf>) -> Self {
        Self {
            host: host.into(),
            guest: guest.into(),
            writable: false,
        }
    }
    /// A mount the sandbox can read and write.
    pub fn writable(host: impl Into<PathBuf>, guest: impl Into<PathBuf>) -> Self {
        Self {
            host: host.into(),
            guest: guest.into(),
            writable: true,
        }
    }
}

/// Resource limits of one sandboxed command, taken from an episode's (or a
/// task's) [`crate::limits::Limits`] by [`CommandLimits::new`].
#[derive(Debug, Clone, Serialize)]
pub struct CommandLimits {
    /// The longest the command may run before it is killed.
    pub timeout: Duration,
    /// Memory the command may use, in bytes.
    pub memory_bytes: u64,
    /// Processes (and threads) the command may have at once.
    pub max_processes: u32,
    /// CPUs the command may use (a quota; fractions allowed).
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

impl CommandLimits {
    /// The script limits of `limits`, with `timeout`.
    pub fn new(limits: &crate::limits::Limits, timeout: Duration) -> Self {
        Self {
            timeout,
            memory_bytes: limits.script_memory_bytes,
            max_processes: limits.script_max_processes,
            cpus: limits.script_cpus,
            output_cap: limits.output_cap,
            output_kill_bytes: limits.output_kill_bytes,
            log_cap: limits.script_log_bytes,
            max_file_bytes: limits.workspace_bytes,
        }
    }
}

/// One command to run in a fresh sandbox.
#[derive(Debug, Clone)]
pub struct Command {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The working directory, as seen inside the sandbox.
    pub cwd: PathBuf,
    /// Host paths made visible inside the sandbox.
    pub mounts: Vec<Mount>,
    /// Variables added to the fixed script environment.
    pub env: Vec<(String, String)>,
    /// How the command may reach the network.
    pub network: Reach,
    /// The resources the command may use.
    pub limits: CommandLimits,
    /// Device ids of GPUs the command may use (see `gpu::GpuPool`).
    pub gpus: Vec<String>,
    /// Where the full (capped) stdout and stderr are written, as
    /// `<prefix>.stdout` and `<prefix>.stderr`.
    pub log_prefix: Option<PathBuf>,
    /// Ends the command early when the host says so.
    pub stop: Stopper,
    /// Where the host reads the command's CPU time while it runs (set by
    /// the sandbox once the command's control group exists).
    pub meter: cpu_time::CpuMeter,
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

/// Why a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Termination {
    /// It exited on its own.
    Exited,
    /// The host killed it at its timeout.
    TimedOut,
    /// It ran out of memory and the kernel killed it.
    OutOfMemory,
    /// A signal ended it, or the host stopped it (output flood, `Stopper`).
    Killed,
}

/// What a sandboxed command did: how it ended and what it printed.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The exit code, when it exited on its own.
    pub exit_code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// Why it ended.
    pub termination: Termination,
    /// Why the host ended the command, when it did.
    pub note: Option<String>,
    /// Wall-clock time the command ran.
    pub duration: Duration,
    /// What it printed to stdout (head and tail).
    pub stdout: CapturedOutput,
    /// What it printed to stderr (head and tail).
    pub stderr: CapturedOutput,
    /// Ended from outside the host: by a stop signal (SIGHUP, SIGINT,
    /// SIGKILL, SIGTERM) the host did not send, or with its launcher
    /// killed. A stopping host's own signal can reach a script before the
    /// host acts on it (Slurm and a terminal signal every process at once,
    /// in no set order), so such an ending may be the host's stop.
    #[serde(skip)]
    pub ended_from_outside: bool,
}

/// Signals that stop a job (Slurm's scancel, requeue and preemption, a
/// terminal's Ctrl-C or hang-up, a container's stop).
const STOP_SIGNALS: [i32; 4] = [1, 2, 9, 15];

/// How a command ended, as the sandbox observed it.
pub struct Ending {
    /// The exit status the sandbox reported (bubblewrap and Docker report a
    /// child killed by signal N as 128 + N).
    pub exit_code: Option<i32>,
    /// A signal that ended the sandbox's own process.
    pub signal: Option<i32>,
    /// Set when the host stopped the command (timeout, output flood).
    pub ended_by_host: Option<(Termination, String)>,
    /// Whether the kernel's OOM killer fired.
    pub out_of_memory: bool,
    /// The memory limit it ran under, in bytes.
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
        let by_host = ending.ended_by_host.is_some();
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
        let ended_from_outside =
            termination == Termination::Killed && !by_host && signal.is_some_and(|s| STOP_SIGNALS.contains(&s));
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
            ended_from_outside,
        }
    }

    /// True when the command exited on its own with code 0.
    pub fn success(&self) -> bool {
        self.termination == Termination::Exited && self.exit_code == Some(0)
    }

    /// How the command ended, in words ("exited with code 1", "timed out
    /// after 20 s", "ran out of memory: ...").
    pub fn describe(&self) -> String {
        match (&self.note, self.termination, self.exit_code) {
            (Some(note), _, _) => note.clone(),
            (None, Termination::Exited, Some(code)) => format!("exited with code {code}"),
            (None, Termination::Killed, _) => match self.signal {
                Some(signal) => format!("killed by signal {signal}"),
                None => "killed".into(),
            },
            (None, Termination::TimedOut, _) => "timed out".into(),
            (None, Termination::OutOfMemory, _) => "ran out of memory".into(),
            (None, Termination::Exited, None) => "ended without an exit code".into(),
        }
    }
}

/// What every script of one episode runs with: fixed when the episode's
/// sandbox opens.
#[derive(Debug, Clone)]
pub struct EpisodeSetup {
    /// Names the episode's sandbox (labels, logs).
    pub name: String,
    /// Host paths made visible to every script.
    pub mounts: Vec<Mount>,
    /// The working directory scripts start in.
    pub cwd: PathBuf,
    /// How scripts may reach the network.
    pub network: Reach,
    /// What every script may use (each [`Exec`] sets its own timeout).
    pub limits: CommandLimits,
    /// Device ids of the GPUs this episode holds (see `gpu::GpuPool`).
    pub gpus: Vec<String>,
    /// How long the sandbox may live at most (the episode's wall-clock
    /// budget and some grace): a sandbox whose host was killed ends by then.
    pub lifetime: Duration,
}

/// One script run inside an episode's sandbox.
#[derive(Debug, Clone)]
pub struct Exec {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// Variables added to the sandbox's fixed environment.
    pub env: Vec<(String, String)>,
    /// The longest the script may run.
    pub timeout: Duration,
    /// Where the full (capped) stdout and stderr are written, if anywhere.
    pub log_prefix: Option<PathBuf>,
    /// Ends the script early when the host says so.
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
            network: self.network.clone(),
            limits: CommandLimits {
                timeout: exec.timeout,
                ..self.limits.clone()
            },
            gpus: self.gpus.clone(),
            log_prefix: exec.log_prefix,
            stop: exec.stop,
            meter: Default::default(),
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
    /// How a user gives this sandbox's `python3` the modules a task
    /// lacks, as the end of a sentence.
    fn python_hint(&self) -> &'static str {
        "use an image that has them: --image, or `mlrb image build --with-torch` for torch"
    }
    /// Why this host cannot give a command `devices`, in one line; none
    /// where it can (or where only the container runtime can tell).
    fn gpu_shortfall(&self, _devices: &[String]) -> Option<String> {
        None
    }
    /// The id (`sha256:…`) of the image scripts run in; `None` where they
    /// run on the host's own root (bubblewrap).
    fn image_digest(&self) -> Option<String> {
        None
    }
    /// Opens the sandbox an episode's scripts run in, one after another.
    async fn open_episode(&self, setup: EpisodeSetup) -> anyhow::Result<Box<dyn EpisodeSandbox>>;
}

/// The sandbox of one episode. `close` must be called on every path; a
/// host that dies before it leaves what `mlrb gc` removes.
#[async_trait::async_trait]
pub trait EpisodeSandbox: Send + Sync {
    /// Runs one script in the episode's sandbox and waits for it to end.
    async fn exec(&self, exec: Exec) -> anyhow::Result<Outcome>;
    /// Ends whatever is left running and removes the sandbox.
    async fn close(&self) -> anyhow::Result<()>;
}
