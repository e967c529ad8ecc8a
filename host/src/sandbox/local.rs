//! The local sandbox: bubblewrap, with a control group per command.
//!
//! Each command gets fresh user, pid, network, ipc and uts namespaces; the
//! system's `/usr` and a handful of loader files read-only; a private `/tmp`;
//! a cleared environment; and exactly the mounts the caller names. Nothing
//! else of the host (its home, the run directory, the task's hidden files)
//! exists inside.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::cgroup::{self, Cgroup};
use super::egress::gateway;
use super::gpu::{GpuHost, Passthrough};
use super::identity;
use super::launcher::{self, Failure, Launcher, Warm};
use super::limits::{Applied, ProcessLimit, Rlimit};
use super::memory_watch::MemoryWatch;
use super::output::Capture;
use super::python::{self, PythonEnv};
use super::{Command, Ending, EpisodeSandbox, EpisodeSetup, Exec, Outcome, Reach, Sandbox};

/// Files of the host system a script needs to start a dynamically linked
/// program; deliberately not the whole of `/etc`.
const SYSTEM_FILES: &[&str] = &[
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/python3.12",
    "/etc/python3.13",
];

/// Host environment variables passed through: CPU workarounds for numerical
/// libraries, never secrets.
const PASSED_ENV: &[&str] = &["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"];

/// Runs commands under bubblewrap on this machine.
#[derive(Clone)]
pub struct LocalSandbox {
    bwrap: PathBuf,
    version: String,
    cgroups: Option<cgroup::Version>,
    /// This host process's token, which names its control groups.
    host: String,
    /// The seccomp programs every command runs under (see `seccomp`).
    seccomp: Arc<Vec<Vec<u8>>>,
    /// Where a command's GPUs come from (device nodes, driver libraries).
    gpu: Arc<GpuHost>,
    /// The environment scripts' `python3` comes from, where one was named.
    python: Option<Arc<PythonEnv>>,
    /// How a command's process limit is set without a control group.
    process_limit: ProcessLimit,
}

/// What this host adds to one command's sandbox beyond its own mounts:
/// the Python environment and the command's GPUs.
#[derive(Debug, Default)]
pub struct HostExtras {
    /// The named Python environment, if any.
    pub python: Option<Arc<PythonEnv>>,
    /// The command's GPUs, passed through.
    pub gpus: Passthrough,
}

/// An episode under bubblewrap. Its scripts start in one long-lived
/// sandbox through a launcher (see `launcher`); where that cannot be had (no
/// control group to hold it, no `python3` inside), each script gets a fresh
/// sandbox of its own, as task steps always do.
struct LocalEpisode {
    sandbox: LocalSandbox,
    setup: EpisodeSetup,
    warm: Warm<WarmSandbox>,
}

/// An episode's long-lived bubblewrap: the launcher and, one at a time, the
/// scripts it starts, all in one control group with the episode's limits.
/// Dropping it kills everything in the group.
struct WarmSandbox {
    launcher: Launcher,
    group: Cgroup,
    /// The group's processes once the launcher was ready (bubblewrap, its
    /// init and the launcher): after a script, anything else is left over.
    baseline: Vec<i32>,
    _bwrap: tokio::process::Child,
}

#[async_trait::async_trait]
impl EpisodeSandbox for LocalEpisode {
    async fn exec(&self, exec: Exec) -> Result<Outcome> {
        let start = || start_warm(self.sandbox.clone(), self.setup.clone());
        let run = async |sandbox: &WarmSandbox| sandbox.run(&exec, &self.setup).await;
        if let Some(outcome) = self.warm.run(start, run).await? {
            return Ok(outcome);
        }
        self.sandbox.run(self.setup.command(exec)).await
    }

    async fn close(&self) -> Result<()> {
        self.warm.close().await;
        Ok(())
    }
}

/// Starts an episode's long-lived sandbox and waits for its launcher.
async fn start_warm(sandbox: LocalSandbox, setup: EpisodeSetup) -> Result<WarmSandbox> {
    let limits = &setup.limits;
    let name = sandbox.next_name();
    let group = Cgroup::create(&name, limits.memory_bytes, limits.max_processes, limits.cpus)
        .context("no control group can hold the sandbox")?;
    let (host_end, guest_end) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .context("making the launcher's socket")?;
    // Behind a proxy, the launcher relays the scripts' port on its own
    // threads (a forwarder process would go with a script's leftovers).
    let relay = matches!(setup.network, Reach::Proxy(_));
    let command = setup.command(Exec {
        argv: launcher::argv("fd", &guest_end.as_raw_fd().to_string(), setup.lifetime, relay, None),
        env: Vec::new(),
        timeout: setup.lifetime,
        log_prefix: None,
        stop: Default::default(),
    });
    // The launcher is the namespace's init: no script can signal it.
    let bwrap = sandbox.spawn(&command, Some(&group), &[guest_end], Stdio::null, true)?;
    let launcher = Launcher::ready(host_end).await?;
    Ok(WarmSandbox {
        launcher,
        baseline: group.pids(),
        group,
        _bwrap: bwrap,
    })
}

impl WarmSandbox {
    /// Runs `exec` through the launcher; the flag says whether the sandbox
    /// may go on.
    async fn run(&self, exec: &Exec, setup: &EpisodeSetup) -> Result<(Outcome, bool), Failure> {
        let oom_kills = self.group.oom_kills();
        let only_launcher_left = || self.group.holds_only(&self.baseline);
        let end_all = || async {
            self.group.kill_all();
            Ok(())
        };
        let checked = self
            .launcher
            .run_checked(exec, &setup.cwd, &setup.limits, only_launcher_left, end_all)
            .await?;
        let out_of_memory = self.group.oom_kills() > oom_kills;
        Ok(checked.outcome(out_of_memory, setup.limits.memory_bytes))
    }
}

/// The error a user sees when bubblewrap is missing.
pub const INSTALL_HINT: &str = "bubblewrap (`bwrap`) is not installed, and mlrb never runs agent scripts unsandboxed: \
install it with `apt-get install bubblewrap` (Debian, Ubuntu) or `dnf install bubblewrap` (Fedora)";

fn find_in_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

impl LocalSandbox {
    /// Finds bubblewrap and checks that it can make namespaces here.
    pub fn detect() -> Result<Self> {
        let bwrap = find_in_path("bwrap").context(INSTALL_HINT)?;
        let version = std::process::Command::new(&bwrap)
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "bubblewrap".into());
        // The probe mounts what commands mount (never all of `/`, whose
        // submounts other programs, Docker's among them, change meanwhile)
        // with the flags they use, so an older bubblewrap is refused here,
        // not as a failure of every script the agent runs.
        let probe = std::process::Command::new(&bwrap)
            .args([
                "--unshare-all",
                "--unshare-user",
                "--disable-userns",
                "--die-with-parent",
                "--new-session",
            ])
            .args(["--uid", "1000", "--gid", "1000"])
            .args(system_mounts(false, 16 << 20))
            .args(shared_memory(16 << 20))
            .args(["--", "true"])
            .stdin(Stdio::null())
            .output()
            .context("running bubblewrap")?;
        if !probe.status.success() {
            bail!(
                "bubblewrap cannot create a sandbox on this host ({}): mlrb needs bubblewrap 0.8 or later \
                 (`--disable-userns`) and unprivileged user namespaces \
                 (sysctl kernel.unprivileged_userns_clone=1, or run mlrb with the privileges bwrap needs)",
                String::from_utf8_lossy(&probe.stderr).trim()
            );
        }
        let reaped = cgroup::reap_stale();
        if reaped > 0 {
            tracing::info!(reaped, "removed the control groups of mlrb hosts that were killed");
        }
        let cgroups = Cgroup::available();
        if cgroups.is_none() {
            tracing::warn!(
                "no writable control group{}: script memory and process limits fall back to rlimits \
                 (RLIMIT_DATA, RLIMIT_NPROC), and out-of-memory is recognised from the script's own error",
                if cgroup::disabled() { " (MLRB_CGROUPS=off)" } else { "" }
            );
        }
        Ok(Self {
            bwrap,
            version,
            cgroups,
            host: crate::process::current_token(),
            seccomp: Arc::new(super::seccomp::bwrap_programs()?),
            gpu: Arc::new(GpuHost::from_env()),
            python: None,
            process_limit: ProcessLimit::detect(),
        })
    }

    /// The same sandbox with every command under the limits that stand in
    /// for a control group, as on a host without one.
    pub fn without_control_groups(mut self) -> Self {
        self.cgroups = None;
        self
    }

    /// What `bwrap --version` said.
    pub fn version_text(&self) -> &str {
        &self.version
    }

    /// The same sandbox with scripts' `python3` taken from `python`.
    pub fn with_python(mut self, python: PythonEnv) -> Self {
        self.python = Some(Arc::new(python));
        self
    }

    /// What the host adds to `command`'s sandbox; an error names what
    /// this host lacks for the command's GPUs.
    fn extras(&self, command: &Command) -> Result<HostExtras> {
        let gpus = match command.gpus.is_empty() {
            true => Passthrough::default(),
            false => self.gpu.passthrough(&command.gpus)?,
        };
        Ok(HostExtras {
            python: self.python.clone(),
            gpus,
        })
    }
}

/// The descriptors bubblewrap reads as it sets the sandbox up.
#[derive(Debug, Clone, Copy)]
pub struct SetupFds<'a> {
    /// The seccomp filters it loads.
    pub seccomp: &'a [i32],
    /// The script user's `/etc/passwd` and `/etc/group` (see `identity`).
    pub identity: [i32; 2],
}

/// The bubblewrap arguments for `command` and the command's argv under
/// `applied` (see `limits`); `fds` are what bubblewrap reads (see
/// [`SetupFds`]), `extras` what the host adds (see [`HostExtras`]).
pub fn bwrap_args(command: &Command, fds: SetupFds, extras: &HostExtras, applied: &Applied) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |items: &[&str]| args.extend(items.iter().map(OsString::from));
    push(&[
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
    ]);
    for fd in fds.seccomp {
        push(&["--add-seccomp-fd", &fd.to_string()]);
    }
    if command.network == Reach::Host {
        push(&["--share-net"]);
    }
    let (uid, gid) = (identity::UID.to_string(), identity::GID.to_string());
    push(&["--uid", &uid, "--gid", &gid, "--hostname", "mlrb-sandbox"]);
    args.extend(system_mounts(
        command.network != Reach::Nothing,
        command.limits.memory_bytes,
    ));
    let [passwd, group] = fds.identity;
    for (fd, path) in [(passwd, identity::PASSWD_PATH), (group, identity::GROUP_PATH)] {
        push_all(&mut args, &["--perms", "0444", "--ro-bind-data", &fd.to_string(), path]);
    }
    args.extend(extra_mounts(extras));
    args.extend(shared_memory(command.limits.memory_bytes));
    if let Reach::Proxy(socket) = &command.network {
        args.push("--bind".into());
        args.push(socket.clone().into());
        args.push(gateway::GUEST_SOCKET.into());
    }
    for mount in &command.mounts {
        args.push(if mount.writable { "--bind" } else { "--ro-bind" }.into());
        args.push(mount.host.clone().into());
        args.push(mount.guest.clone().into());
    }
    args.push("--chdir".into());
    args.push(command.cwd.clone().into());
    args.push("--clearenv".into());
    let mut env = super::script_environment(command.limits.cpus);
    for name in PASSED_ENV {
        if let Ok(value) = std::env::var(name) {
            env.push((name.to_string(), value));
        }
    }
    env.extend(command.network.environment());
    env.extend(extra_environment(extras, &env));
    env.extend(command.env.iter().cloned());
    for (key, value) in env {
        args.extend([OsString::from("--setenv"), key.into(), value.into()]);
    }
    args.push("--".into());
    args.extend(applied.wrap(&command.argv));
    args
}

fn push_all(args: &mut Vec<OsString>, items: &[&str]) {
    args.extend(items.iter().map(OsString::from));
}

/// What of the host every command sees: `/usr` and the loader's files
/// (and, with a network, its CA certificates) read-only, a fresh `/proc` (with bubblewrap's own init hidden, so no
/// script can open its file descriptors or read its state), `/dev`, and a
/// `/tmp` of at most `memory_bytes`.
///
/// A tmpfs is memory. A control group charges its pages to the script; on
/// a host without one nothing else would, and an unsized tmpfs takes up to
/// half the host's memory, per sandbox.
fn system_mounts(network: bool, memory_bytes: u64) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["--ro-bind", "/usr", "/usr"].map(OsString::from).to_vec();
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64"] {
        match std::fs::read_link(top) {
            Ok(target) => args.extend([
                OsString::from("--symlink"),
                target.into_os_string(),
                OsString::from(top),
            ]),
            Err(_) if Path::new(top).is_dir() => args.extend(["--ro-bind", top, top].map(OsString::from)),
            Err(_) => {}
        }
    }
    let mut system_files: Vec<&str> = SYSTEM_FILES.to_vec();
    if network {
        // Names are resolved by the proxy (or, on the host's network, here).
        system_files.extend(["/etc/resolv.conf", "/etc/hosts", "/etc/ssl", "/etc/ca-certificates"]);
    }
    for file in system_files {
        args.extend(["--ro-bind-try", file, file].map(OsString::from));
    }
    let special = [
        "--proc",
        "/proc",
        "--tmpfs",
        "/proc/1",
        "--remount-ro",
        "/proc/1",
        "--dev",
        "/dev",
    ];
    args.extend(special.map(OsString::from));
    args.extend(sized_tmpfs("/tmp", memory_bytes));
    args
}

/// `/dev` made read-only once the GPUs' nodes are bound in (a script could
/// otherwise fill the tmpfs bubblewrap makes for it), and a `/dev/shm` of
/// at most `memory_bytes` in its place (POSIX shared memory, semaphores,
/// and PyTorch's tensors between processes live there).
fn shared_memory(memory_bytes: u64) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["--remount-ro", "/dev"].map(OsString::from).to_vec();
    args.extend(sized_tmpfs("/dev/shm", memory_bytes));
    args
}

/// A tmpfs at `path` of at most `bytes` (no less than 16 MiB).
fn sized_tmpfs(path: &str, bytes: u64) -> Vec<OsString> {
    let size = bytes.max(16 << 20).to_string();
    ["--size", size.as_str(), "--tmpfs", path].map(OsString::from).to_vec()
}

/// The mounts of `extras`: the Python environment's folders read-only at
/// their own paths (and its `python3` link), the GPUs' device nodes in
/// `/dev`, the driver's library folders and the parts of `/sys` CUDA
/// reads, read-only.
fn extra_mounts(extras: &HostExtras) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut bind = |how: &str, host: &Path, guest: &Path| {
        args.extend([OsString::from(how), host.into(), guest.into()]);
    };
    if let Some(python) = &extras.python {
        for dir in python.mounts() {
            bind("--ro-bind", dir, dir);
        }
        if let Some(interpreter) = python.link() {
            bind("--symlink", interpreter, &Path::new(python::GUEST_BIN).join("python3"));
        }
    }
    for node in &extras.gpus.nodes {
        let name = node.file_name().unwrap_or_default();
        bind("--dev-bind", node, &Path::new("/dev").join(name));
    }
    for dir in &extras.gpus.libraries {
        bind("--ro-bind", dir, dir);
    }
    for (host, guest) in &extras.gpus.sysfs {
        bind("--ro-bind", host, guest);
    }
    args
}

/// The variables of `extras` over `base`: the Python environment first on
/// PATH, the GPUs' variables.
fn extra_environment(extras: &HostExtras, base: &[(String, String)]) -> Vec<(String, String)> {
    let mut env = extras.gpus.env.clone();
    if let Some(python) = &extras.python {
        let system = base
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map_or("/usr/bin:/bin", |(_, v)| v.as_str());
        env.push(("PATH".into(), python.path(system)));
    }
    env
}

/// Applied in the child between fork and exec: join the control group,
/// hand the seccomp filters and identity files to bubblewrap, set the
/// rlimits of `limits` (see `limits`).
fn child_setup(
    join: &[OwnedFd],
    inherit: &[i32],
    limits: Vec<Rlimit>,
) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    let fds: Vec<i32> = join.iter().map(|fd| fd.as_raw_fd()).collect();
    let inherit = inherit.to_vec();
    move || {
        for fd in &fds {
            // SAFETY: write(2) on an fd opened before the fork; async-signal-safe.
            if unsafe { libc::write(*fd, b"0".as_ptr().cast(), 1) } != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        // Whatever this host inherited without close-on-exec (a jobserver
        // pipe, a shell's descriptors) must not reach a sandbox.
        // SAFETY: close_range(2) only sets flags; async-signal-safe.
        let marked = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
        if marked != 0 {
            for fd in 3..4096 {
                // SAFETY: fcntl(2) on a descriptor number that may be closed is harmless.
                unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            }
        }
        for fd in &inherit {
            // SAFETY: fcntl(2) clearing FD_CLOEXEC is async-signal-safe.
            if unsafe { libc::fcntl(*fd, libc::F_SETFD, 0) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        super::limits::set_all(&limits);
        Ok(())
    }
}

#[async_trait::async_trait]
impl Sandbox for LocalSandbox {
    fn describe(&self) -> String {
        let cgroups = match self.cgroups {
            Some(cgroup::Version::V1) => "cgroup v1",
            Some(cgroup::Version::V2) => "cgroup v2",
            None => "rlimits",
        };
        match &self.python {
            Some(python) => format!("local ({}, {cgroups}, {})", self.version, python.describe()),
            None => format!("local ({}, {cgroups})", self.version),
        }
    }

    fn supports_gpus(&self) -> bool {
        true
    }

    fn python_hint(&self) -> &'static str {
        "name an interpreter or venv that has them with --python PATH, or use --sandbox docker"
    }

    fn gpu_shortfall(&self, devices: &[String]) -> Option<String> {
        self.gpu.passthrough(devices).err().map(|e| format!("{e:#}"))
    }

    async fn open_episode(&self, setup: EpisodeSetup) -> Result<Box<dyn EpisodeSandbox>> {
        // The warm sandbox needs a control group to vouch that a script left nothing.
        let warm = Warm::new(self.cgroups.is_some());
        warm.prestart(start_warm(self.clone(), setup.clone()));
        Ok(Box::new(LocalEpisode {
            sandbox: self.clone(),
            setup,
            warm,
        }))
    }

    async fn run(&self, command: Command) -> Result<Outcome> {
        let limits = command.limits.clone();
        let name = self.next_name();
        let group = self
            .cgroups
            .and_then(|_| Cgroup::create(&name, limits.memory_bytes, limits.max_processes, limits.cpus));
        if let Some(source) = group.as_ref().and_then(Cgroup::cpu_source) {
            command.meter.set(source);
        }
        let started = Instant::now();
        let mut command = command;
        if matches!(command.network, Reach::Proxy(_)) {
            // The relay to the proxy starts first, in the sandbox, and the
            // command takes its place.
            let mut argv = ["python3", "-I", "-S", "-c", gateway::FORWARDER, "exec"]
                .map(String::from)
                .to_vec();
            argv.append(&mut command.argv);
            command.argv = argv;
        }
        let mut child = self.spawn(&command, group.as_ref(), &[], Stdio::piped, false)?;
        let pid = child.id().map(|p| p as i32);
        // Both streams count towards one output total; past the limit the
        // command is stopped.
        let stdout = child.stdout.take().context("child stdout")?;
        let stderr = child.stderr.take().context("child stderr")?;
        let mut capture = Capture::start(stdout, stderr, &limits, &command.log_prefix);
        let kill_tree = || {
            if let Some(pid) = pid {
                // SAFETY: signals our own child's process group.
                unsafe { libc::killpg(pid, libc::SIGKILL) };
            }
            if let Some(group) = &group {
                group.kill_all();
            }
        };
        // Without a control group, nothing else adds up the memory of the
        // sandbox's processes together.
        let watch = match (&group, pid) {
            (None, Some(pid)) => Some(MemoryWatch::start(pid, limits.memory_bytes, move || {
                // SAFETY: signals our own child's process group.
                unsafe { libc::killpg(pid, libc::SIGKILL) };
            })),
            _ => None,
        };
        let ended_by_host = capture.until(child.wait(), limits.timeout, &command.stop).await.err();
        // Whatever outlived the sandbox's init (nothing should) goes too.
        kill_tree();
        let status = child.wait().await?;
        let duration = started.elapsed();
        let (stdout, stderr) = capture
            .outputs(std::time::Duration::from_secs(5))
            .await
            .context("the command's output did not close")??;
        use std::os::unix::process::ExitStatusExt;
        let out_of_memory = match &group {
            Some(group) => group.oom_killed(),
            None => {
                watch.as_ref().is_some_and(MemoryWatch::exceeded)
                    || stderr.text.contains("MemoryError")
                    || stderr.text.contains("Cannot allocate memory")
            }
        };
        drop(watch);
        let ending = Ending {
            exit_code: status.code(),
            signal: status.signal(),
            ended_by_host,
            out_of_memory,
            memory_bytes: limits.memory_bytes,
        };
        Ok(Outcome::from_ending(ending, duration, stdout, stderr))
    }
}

impl LocalSandbox {
    /// A fresh name for a control group of this host: the number is the
    /// process's, so two sandboxes of it (tasks tested at once) never share
    /// a group, and with it their limits.
    fn next_name(&self) -> String {
        format!("{}-{}", self.host, crate::process::next_serial())
    }

    /// Starts bubblewrap for `command`: in `group` (or under rlimits
    /// without one), under the seccomp filters, in its own process group,
    /// with `pass` open in it and its output to `output()`; with `as_init`,
    /// the command is the pid namespace's init (bubblewrap's own is not
    /// there), which no process of the namespace can signal.
    fn spawn(
        &self,
        command: &Command,
        group: Option<&Cgroup>,
        pass: &[OwnedFd],
        output: fn() -> Stdio,
        as_init: bool,
    ) -> Result<tokio::process::Child> {
        let join = match group {
            Some(group) => group.join_handles().context("opening the control group")?,
            None => Vec::new(),
        };
        let applied = Applied::local(&command.limits, group.is_some(), self.process_limit);
        let filters = self
            .seccomp
            .iter()
            .map(|program| super::seccomp::memfd_with(program))
            .collect::<Result<Vec<_>>>()?;
        let identity_files =
            [identity::passwd(), identity::group()].map(|text| super::seccomp::memfd_with(text.as_bytes()));
        let [passwd, group_file] = identity_files;
        let (passwd, group_file) = (passwd?, group_file?);
        let filter_fds: Vec<i32> = filters.iter().map(|fd| fd.as_raw_fd()).collect();
        let fds = SetupFds {
            seccomp: &filter_fds,
            identity: [passwd.as_raw_fd(), group_file.as_raw_fd()],
        };
        let inherit: Vec<i32> = filter_fds
            .iter()
            .copied()
            .chain(fds.identity)
            .chain(pass.iter().map(|fd| fd.as_raw_fd()))
            .collect();
        let extras = self.extras(command)?;
        let args = bwrap_args(command, fds, &extras, &applied);
        log_spawn(command, &args, &applied);
        let mut child = tokio::process::Command::new(&self.bwrap);
        if as_init {
            child.arg("--as-pid-1");
        }
        child
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(output())
            .stderr(output())
            .kill_on_drop(true)
            .process_group(0);
        let on_bubblewrap = applied.on_bubblewrap;
        // SAFETY: the closure only makes async-signal-safe system calls.
        unsafe { child.pre_exec(child_setup(&join, &inherit, on_bubblewrap)) };
        child.spawn().context("starting bubblewrap")
    }
}

/// What a command's sandbox is (for diagnostics, `MLRB_LOG=mlrb::sandbox::local=debug`):
/// bubblewrap's arguments with the variables' values left out, the limits
/// applied, the variables' names, and where its logs go.
fn log_spawn(command: &Command, args: &[OsString], applied: &Applied) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let mut shown: Vec<String> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut args = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        if arg == "--setenv" {
            let name = args.next().unwrap_or_default();
            args.next();
            shown.push(format!("--setenv {name} …"));
            names.push(name);
        } else {
            shown.push(arg);
        }
    }
    // Quoted (Debug), so that a log can be split into its fields.
    let log = command.log_prefix.as_deref().map(|p| p.display().to_string());
    tracing::debug!(
        log = ?log.unwrap_or_default(),
        limits = ?applied.describe(),
        env = ?names.join(","),
        args = ?shown.join(" "),
        "bubblewrap"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sandboxes of one process (two tasks tested at once) name their
    /// control groups apart: a shared group would share its limits.
    #[test]
    fn two_sandboxes_of_one_process_never_name_a_group_alike() {
        let Ok(first) = LocalSandbox::detect() else {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "bubblewrap is missing");
            eprintln!("skipped: no bubblewrap");
            return;
        };
        let second = LocalSandbox::detect().unwrap();
        let names: std::collections::HashSet<String> =
            (0..3).flat_map(|_| [first.next_name(), second.next_name()]).collect();
        assert_eq!(names.len(), 6, "{names:?}");
    }
}
