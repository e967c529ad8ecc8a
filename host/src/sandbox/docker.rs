//! The Docker sandbox, through bollard: one container per episode, each
//! script an exec in it; prepare and evaluation in fresh containers of
//! their own. Containers carry labels naming the episode and the host
//! process, so `mlrb gc` can find what a killed host left behind.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{
    ContainerCreateBody, DeviceRequest, HostConfig, Mount as DockerMount, MountType, ResourcesUlimits,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, EventsOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures_util::StreamExt;

use super::egress::gateway;
use super::launcher::{self, Failure, Launcher, Rendezvous, Warm};
use super::output::{HeadTail, flooded, log_file, timed_out};
use super::{Command, Ending, EpisodeSandbox, EpisodeSetup, Exec, Mount, Outcome, Reach, Sandbox, Termination};

/// Label on everything mlrb creates.
pub const LABEL_MANAGED: &str = "mlrb.managed";
/// The episode (or task step) a container serves.
pub const LABEL_EPISODE: &str = "mlrb.episode";
/// The pid of the host process that made it: gone means the container is stale.
pub const LABEL_HOST: &str = "mlrb.host";

/// The uid:gid scripts run as: a plain user, never root.
const SANDBOX_USER: &str = "1000:1000";
const SANDBOX_UID: u32 = 1000;
/// The container's init and main process run as root with only CAP_SETUID
/// and CAP_SETGID (the engine gives a root exec the container's
/// capabilities only when its user is root: the launcher needs them), never
/// as the sandbox user, so no script can signal, trace or read them.
const INIT_USER: &str = "0:0";
/// The user the egress relay drops to, neither root nor the sandbox user.
const RELAY_USER: &str = "65534";
/// Where a container sees the folder in which this host listens for the
/// episode's launcher and holds the container's lifeline (read-only).
const LAUNCH_DIR: &str = "/run/mlrb";
/// The lifeline's name in [`LAUNCH_DIR`]: a Unix socket this host listens
/// on (and never accepts from). The container's main process connects and
/// waits; the host's end closes with the host, however it ends, and the
/// container stops moments later instead of at the end of its lifetime.
const LIFELINE: &str = "host";
/// The container's main process: waits on the lifeline until it breaks.
const WATCH: &str = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ntry:\n    s.recv(1)\nexcept OSError:\n    pass\n";
/// The user an episode's launcher runs as: root with only the capabilities
/// to start scripts as [`SANDBOX_USER`], who can then neither signal, nor
/// trace, nor read it.
const LAUNCHER_USER: &str = INIT_USER;
/// How long a container outlives the time its work may take (its removal
/// normally comes first).
const LIFETIME_GRACE: Duration = Duration::from_secs(300);

/// Runs commands in containers of the local Docker engine.
#[derive(Clone)]
pub struct DockerSandbox {
    docker: Docker,
    image: String,
    /// The image's id (`sha256:…`), for provenance.
    digest: String,
    version: String,
    counter: Arc<AtomicU64>,
}

/// One line for a daemon that cannot be reached.
fn unreachable(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow!(
        "the Docker daemon cannot be reached ({error}): start it (e.g. `systemctl start docker`), set DOCKER_HOST, or use --sandbox local"
    )
}

/// Connects to the local daemon and checks that it answers.
pub async fn connect() -> Result<(Docker, String)> {
    let docker = Docker::connect_with_local_defaults().map_err(unreachable)?;
    let version = tokio::time::timeout(Duration::from_secs(10), docker.version())
        .await
        .map_err(|_| unreachable("no answer within 10 s"))?
        .map_err(unreachable)?;
    Ok((docker, version.version.unwrap_or_default()))
}

impl DockerSandbox {
    /// Connects and checks that `image` exists (built by `mlrb image build`).
    pub async fn connect(image: &str) -> Result<Self> {
        let (docker, version) = connect().await?;
        // What killed hosts left behind goes first (what `mlrb gc` does).
        match gc(false).await {
            Ok(removed) if !removed.is_empty() => {
                tracing::info!(
                    count = removed.len(),
                    "removed containers of mlrb hosts that were killed"
                )
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(error = %format!("{error:#}"), "removing stale containers"),
        }
        let inspected = docker.inspect_image(image).await.map_err(|_| {
            let torch = super::image::ImageRecipe::standard(true).tag();
            let how = if image == torch {
                "mlrb image build --with-torch"
            } else {
                "mlrb image build"
            };
            anyhow!("the Docker image {image} is not built here: build it with `{how}`")
        })?;
        Ok(Self {
            docker,
            image: image.to_string(),
            digest: inspected.id.unwrap_or_default(),
            version,
            counter: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The container configuration of an episode or task step.
    pub fn container_body(&self, setup: &EpisodeSetup, role: &str) -> ContainerCreateBody {
        container_body(&self.image, setup, role)
    }

    /// Creates and starts a container; an episode's (`warm`) gets a
    /// launcher at its first script where this host can watch its
    /// processes, a task step's never does.
    async fn open(&self, setup: &EpisodeSetup, role: &str, warm: bool) -> Result<DockerEpisode> {
        prepare_mount_sources(&setup.mounts)?;
        let (launch_dir, lifeline) = launch_dir()?;
        let mut setup = setup.clone();
        setup.mounts.push(Mount::read_only(launch_dir.path(), LAUNCH_DIR));
        let name = format!(
            "mlrb-{}-{}",
            std::process::id(),
            self.counter.fetch_add(1, Ordering::Relaxed)
        );
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let created = self
            .docker
            .create_container(Some(options), self.container_body(&setup, role))
            .await
            .with_context(|| format!("creating container {name}"))?;
        let mut episode = DockerEpisode {
            oom: OomWatch::start(&self.docker, &created.id),
            docker: self.docker.clone(),
            id: created.id,
            setup,
            closed: AtomicBool::new(false),
            procs: None,
            launch_dir,
            _lifeline: lifeline,
            warm: Warm::new(false),
        };
        // From here the container is removed on every path (close or drop).
        self.docker
            .start_container(&episode.id, None)
            .await
            .with_context(|| format!("starting container {name}"))?;
        episode.procs = episode.find_procs().await;
        // Only a host that sees the container's processes can vouch that a
        // script left nothing, and so keep a launcher between scripts.
        episode.warm = Warm::new(warm && episode.procs.is_some());
        Ok(episode)
    }
}

/// A folder only this host may change, for the launcher's socket, with
/// the container's lifeline in it: a socket only this host listens on.
fn launch_dir() -> Result<(tempfile::TempDir, std::os::unix::net::UnixListener)> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("mlrb-launch-")
        .tempdir()
        .context("making a folder for the launcher's socket")?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .context("opening the launcher's folder")?;
    let path = dir.path().join(LIFELINE);
    let lifeline = std::os::unix::net::UnixListener::bind(&path)
        .with_context(|| format!("making the container's lifeline {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
        .with_context(|| format!("opening {} to the container", path.display()))?;
    Ok((dir, lifeline))
}

/// Bind sources must be readable by the sandbox user; a root host hands the
/// writable ones (the workspace) to that user. The walk opens every entry
/// beneath its parent and never follows a link, so no file outside the
/// mount (a shared cache, the host's own) changes owner.
fn prepare_mount_sources(mounts: &[Mount]) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    for mount in mounts.iter().filter(|m| m.writable) {
        let root = crate::record::walk::DirHandle::open_root(&mount.host)
            .with_context(|| format!("opening {}", mount.host.display()))?;
        crate::record::walk::chown_tree(&root, SANDBOX_UID, SANDBOX_UID)
            .with_context(|| format!("handing {} to the sandbox user", mount.host.display()))?;
    }
    Ok(())
}

/// How many CPUs this host has.
fn host_cpus() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// What a container is made of: mounts, limits, no network unless granted,
/// read-only root, private /tmp, a plain user, no capabilities, labels.
pub fn container_body(image: &str, setup: &EpisodeSetup, role: &str) -> ContainerCreateBody {
    let labels = HashMap::from([
        (LABEL_MANAGED.to_string(), "1".to_string()),
        (LABEL_EPISODE.to_string(), setup.name.clone()),
        (LABEL_HOST.to_string(), crate::process::current_token()),
        ("mlrb.role".to_string(), role.to_string()),
    ]);
    let env = super::script_environment(setup.limits.cpus)
        .into_iter()
        .chain(setup.network.environment())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let lifetime = setup.lifetime.as_secs().max(1).to_string();
    // The container ends when this host's lifeline closes (the host ended,
    // however) or its time is up. Behind a proxy, its main process (not the
    // sandbox user's, so no script can end it) also relays the scripts'
    // proxy port to the proxy's socket until then.
    let watch = format!("exec timeout \"$1\" python3 -I -S -c \"$2\" {LAUNCH_DIR}/{LIFELINE}");
    let script = match setup.network {
        Reach::Proxy(_) => format!(
            "setpriv --reuid={RELAY_USER} --regid={RELAY_USER} --clear-groups python3 -I -S -c \"$0\" serve \"$1\" & {watch}"
        ),
        _ => watch,
    };
    let cmd = vec![
        "sh".into(),
        "-c".into(),
        script,
        gateway::FORWARDER.into(),
        lifetime,
        WATCH.into(),
    ];
    ContainerCreateBody {
        image: Some(image.to_string()),
        cmd: Some(cmd),
        user: Some(INIT_USER.into()),
        working_dir: Some(setup.cwd.to_string_lossy().into_owned()),
        env: Some(env),
        labels: Some(labels),
        network_disabled: Some(setup.network == Reach::Nothing),
        host_config: Some(host_config(setup)),
        ..Default::default()
    }
}

/// Mounts, limits and lock-down of a container.
fn host_config(setup: &EpisodeSetup) -> HostConfig {
    let socket = match &setup.network {
        Reach::Proxy(socket) => Some(Mount::writable(socket, gateway::GUEST_SOCKET)),
        _ => None,
    };
    let mounts = setup
        .mounts
        .iter()
        .chain(&socket)
        .map(|m| DockerMount {
            target: Some(m.guest.to_string_lossy().into_owned()),
            source: Some(
                std::path::absolute(&m.host)
                    .unwrap_or_else(|_| m.host.clone())
                    .to_string_lossy()
                    .into_owned(),
            ),
            typ: Some(MountType::BIND),
            read_only: Some(!m.writable),
            ..Default::default()
        })
        .collect();
    // Specific devices, never a count: the pool has made sure no other
    // episode holds them.
    let device_requests = (!setup.gpus.is_empty()).then(|| {
        vec![DeviceRequest {
            driver: Some("nvidia".into()),
            device_ids: Some(setup.gpus.clone()),
            capabilities: Some(vec![vec!["gpu".into()]]),
            ..Default::default()
        }]
    });
    let ulimit = |name: &str, value: u64| ResourcesUlimits {
        name: Some(name.into()),
        soft: Some(value as i64),
        hard: Some(value as i64),
    };
    HostConfig {
        mounts: Some(mounts),
        readonly_rootfs: Some(true),
        tmpfs: Some(HashMap::from([(
            "/tmp".to_string(),
            "rw,nosuid,nodev,size=1g,mode=1777".to_string(),
        )])),
        network_mode: Some(if setup.network == Reach::Host { "bridge" } else { "none" }.into()),
        memory: Some(setup.limits.memory_bytes as i64),
        memory_swap: Some(setup.limits.memory_bytes as i64),
        pids_limit: Some(setup.limits.max_processes as i64),
        // The engine refuses a quota above the host's CPUs; that many is
        // all a task could get there anyway.
        nano_cpus: Some((setup.limits.cpus.min(host_cpus()) * 1e9) as i64),
        cap_drop: Some(vec!["ALL".into()]),
        // Only for the launcher (root): scripts run as a plain user and
        // get none (no-new-privileges, no setuid program can give them).
        cap_add: Some(vec!["SETUID".into(), "SETGID".into()]),
        security_opt: Some(vec![
            "no-new-privileges".into(),
            format!("seccomp={}", super::seccomp::docker_profile()),
        ]),
        init: Some(true),
        ulimits: Some(vec![ulimit("fsize", setup.limits.max_file_bytes), ulimit("core", 0)]),
        device_requests,
        ..Default::default()
    }
}

/// The container of one episode (or of one prepare/evaluate step).
pub struct DockerEpisode {
    docker: Docker,
    id: String,
    setup: EpisodeSetup,
    closed: AtomicBool,
    /// The container's `cgroup.procs` as this host sees it, and the
    /// processes it held before any script (its init and main command):
    /// where the engine runs on this machine, whether a script left
    /// processes behind is read here instead of asked of an exec.
    procs: Option<(PathBuf, Vec<i32>)>,
    /// Where this host listens for the episode's launcher.
    launch_dir: tempfile::TempDir,
    /// The container's lifeline: the container ends when it closes (with
    /// this host, however it ends).
    _lifeline: std::os::unix::net::UnixListener,
    warm: Warm<DockerWarm>,
    oom: OomWatch,
}

/// An episode container's launcher, started by a detached exec.
struct DockerWarm {
    launcher: Launcher,
    /// The container's processes once the launcher was ready.
    baseline: Vec<i32>,
}

impl DockerEpisode {
    /// The container's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The container's `cgroup.procs` on this host and the processes in it
    /// now, if the engine runs here and this host can read them.
    async fn find_procs(&self) -> Option<(PathBuf, Vec<i32>)> {
        let inspected = self.docker.inspect_container(&self.id, None).await.ok()?;
        let pid = i32::try_from(inspected.state?.pid?).ok().filter(|&p| p > 0)?;
        let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        // The unified hierarchy, or v1's pids controller (a hybrid host has both).
        own.lines()
            .filter_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                let base = match controllers {
                    "" => Path::new("/sys/fs/cgroup").to_path_buf(),
                    c if c.split(',').any(|c| c == "pids") => Path::new("/sys/fs/cgroup").join(c),
                    _ => return None,
                };
                Some(base.join(path.trim_start_matches('/')).join("cgroup.procs"))
            })
            .find_map(|path| {
                let pids = read_pids(&path)?;
                pids.contains(&pid).then_some((path, pids))
            })
    }

    /// True when this host can see that no process but those the container
    /// started with is left (then there is nothing to kill).
    fn nothing_left(&self) -> bool {
        self.procs.as_ref().is_some_and(|(_, before)| self.holds_only(before))
    }

    /// True when this host can see that every process in the container is
    /// one of `allowed`.
    fn holds_only(&self, allowed: &[i32]) -> bool {
        let Some((path, _)) = &self.procs else {
            return false;
        };
        read_pids(path).is_some_and(|now| now.iter().all(|pid| allowed.contains(pid)))
    }

    /// Kills every process of the sandbox user (the container's init runs
    /// as another user and stays) and waits until none is left, so nothing
    /// a script started outlives its call.
    async fn kill_all(&self) -> Result<()> {
        // kill(-1) skips the caller and init; then wait until no process of
        // the user is left but zombies (which hold nothing and are reaped).
        const KILL_ALL: &str = r#"me=$$; i=0
while :; do
  kill -KILL -1 2>/dev/null; left=0
  for d in /proc/[0-9]*; do
    [ "${d#/proc/}" = "$me" ] && continue
    [ -O "$d" ] || continue
    state=
    { while read -r k v; do [ "$k" = State: ] && { state=$v; break; }; done < "$d/status"; } 2>/dev/null
    case "$state" in Z*|"") ;; *) left=1 ;; esac
  done
  [ "$left" = 0 ] && exit 0
  i=$((i+1)); [ "$i" -gt 500 ] && exit 1
  sleep 0.01
done"#;
        let kill = CreateExecOptions {
            cmd: Some(vec!["sh".to_string(), "-c".to_string(), KILL_ALL.to_string()]),
            user: Some(SANDBOX_USER.to_string()),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            ..Default::default()
        };
        let exec = self
            .docker
            .create_exec(&self.id, kill)
            .await
            .context("creating the kill exec")?;
        if let StartExecResults::Attached { mut output, .. } = self
            .docker
            .start_exec(&exec.id, None)
            .await
            .context("starting the kill exec")?
        {
            while output.next().await.is_some() {}
        }
        let code = self.docker.inspect_exec(&exec.id).await?.exit_code;
        match code {
            Some(0) => {}
            Some(code) => bail!("processes of the sandbox user survived being killed (the kill exited with {code})"),
            None => bail!("processes of the sandbox user survived being killed (the kill never finished)"),
        }
        Ok(())
    }

    /// Ends every process of the sandbox user. The kill runs inside the
    /// container, as that user; a script can defeat it (kill the killer, or
    /// leave no pid free for it to start), so when it fails the container
    /// itself is restarted, which ends everything in it from outside.
    async fn end_processes(&self) -> Result<()> {
        let Err(error) = self.kill_all().await else {
            return Ok(());
        };
        tracing::warn!(error = %format!("{error:#}"), container = %self.id, "the kill inside the container failed; restarting it");
        let options = bollard::query_parameters::RestartContainerOptionsBuilder::default()
            .t(0)
            .build();
        self.docker
            .restart_container(&self.id, Some(options))
            .await
            .with_context(|| format!("restarting container {} to end a script's processes", self.id))?;
        let survivors = self.sandbox_processes().await?;
        if survivors > 0 {
            bail!(
                "{survivors} process(es) of the sandbox user survived a restart of container {}",
                self.id
            );
        }
        Ok(())
    }

    /// How many live processes of the sandbox user the container holds,
    /// as the engine sees them from outside.
    async fn sandbox_processes(&self) -> Result<usize> {
        let options = bollard::query_parameters::TopOptionsBuilder::default()
            .ps_args("-o pid,uid,stat")
            .build();
        let top = self
            .docker
            .top_processes(&self.id, Some(options))
            .await
            .with_context(|| format!("listing the processes of container {}", self.id))?;
        let titles = top.titles.unwrap_or_default();
        let column = |name: &str| titles.iter().position(|t| t == name);
        let (Some(uid), Some(stat)) = (column("UID"), column("STAT")) else {
            bail!("the engine lists processes without UID and STAT");
        };
        let live = top
            .processes
            .unwrap_or_default()
            .iter()
            .filter(|row| row.get(uid).is_some_and(|u| u.trim() == SANDBOX_UID.to_string()))
            .filter(|row| row.get(stat).is_some_and(|s| !s.starts_with('Z')))
            .count();
        Ok(live)
    }

    /// Waits until the exec's own process has exited (its output may stay
    /// open while something it started in the background holds it).
    async fn exited(&self, exec_id: &str) {
        loop {
            match self.docker.inspect_exec(exec_id).await {
                // Not started yet, or still running (an exit code comes only with the end).
                Ok(inspected) if inspected.running == Some(true) || inspected.exit_code.is_none() => {}
                _ => return,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl DockerEpisode {
    /// Creates an exec as `user` in the episode's folder, with its output
    /// attached or not (`attach`).
    async fn create_exec(
        &self,
        argv: Vec<String>,
        env: &[(String, String)],
        attach: bool,
        user: &str,
    ) -> Result<String> {
        let options = CreateExecOptions {
            cmd: Some(argv),
            env: (!env.is_empty()).then(|| env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            attach_stdout: Some(attach),
            attach_stderr: Some(attach),
            user: Some(user.to_string()),
            working_dir: Some(self.setup.cwd.to_string_lossy().into_owned()),
            ..Default::default()
        };
        let created = self
            .docker
            .create_exec(&self.id, options)
            .await
            .context("creating an exec")?;
        Ok(created.id)
    }

    /// Reads the exec's output until it closes, the script's own process
    /// exits (a background process may keep the output open), the timeout
    /// or a flood ends it, or the host stops it. The output is let go here:
    /// a daemon blocked on sending it would hold up the kill that follows.
    async fn collect(
        &self,
        exec: &Exec,
        exec_id: &str,
        mut output: std::pin::Pin<
            Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
        >,
    ) -> (Option<(Termination, String)>, HeadTail, HeadTail) {
        let log = |stream| log_file(&exec.log_prefix, stream);
        let limits = &self.setup.limits;
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
    async fn exit_code(&self, exec_id: &str) -> Result<Option<i32>> {
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

impl DockerEpisode {
    /// Runs a script as an exec of its own.
    async fn exec_directly(&self, exec: Exec) -> Result<Outcome> {
        let ooms = self.oom.count();
        let exec_id = self
            .create_exec(exec.argv.clone(), &exec.env, true, SANDBOX_USER)
            .await?;
        let started = Instant::now();
        let StartExecResults::Attached { output, .. } = self
            .docker
            .start_exec(&exec_id, None)
            .await
            .context("starting an exec")?
        else {
            bail!("the daemon started the exec detached");
        };
        let (ended_by_host, stdout, stderr) = self.collect(&exec, &exec_id, output).await;
        // Whatever the script started goes with it, on every ending.
        if !self.nothing_left() {
            self.end_processes().await?;
        }
        let duration = started.elapsed();
        let exit_code = self.exit_code(&exec_id).await?;
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

    /// Whether the OOM killer struck since the count was `before`; a script
    /// that died of SIGKILL waits a moment for the event, which may trail.
    async fn out_of_memory(&self, before: u64, killed: bool) -> bool {
        self.oom.seen_since(before, if killed { 500 } else { 0 }).await
    }

    /// Starts the episode's launcher with a detached exec and waits until
    /// it has connected from inside the container and said it is ready.
    async fn start_launcher(&self) -> Result<DockerWarm> {
        let started = self.try_start_launcher().await;
        if started.is_err() {
            // A launcher that started but failed later must not stay.
            self.end_processes().await?;
        }
        started
    }

    async fn try_start_launcher(&self) -> Result<DockerWarm> {
        let Some((procs, _)) = &self.procs else {
            bail!("this host cannot watch the container's processes");
        };
        let rendezvous = Rendezvous::listen(&self.launch_dir.path().join("launch.sock"))?;
        let place = format!("{LAUNCH_DIR}/launch.sock");
        let argv = launcher::argv("connect", &place, self.setup.lifetime, false, Some(SANDBOX_USER));
        let exec_id = self.create_exec(argv, &[], false, LAUNCHER_USER).await?;
        let detached = bollard::exec::StartExecOptions {
            detach: true,
            ..Default::default()
        };
        self.docker
            .start_exec(&exec_id, Some(detached))
            .await
            .context("starting the launcher's exec")?;
        // The connection must come from inside this container.
        let inside = |pid| read_pids(procs).is_some_and(|pids| pids.contains(&pid));
        let conn = tokio::select! {
            conn = rendezvous.accept(launcher::READY_WITHIN, inside) => conn?,
            _ = self.exited(&exec_id) => bail!("the launcher exited before it connected (is python3 in the image?)"),
        };
        drop(rendezvous);
        let launcher = Launcher::ready(conn).await?;
        let baseline = read_pids(procs).context("reading the container's processes")?;
        Ok(DockerWarm { launcher, baseline })
    }

    /// Runs `exec` through the launcher; the flag says whether it may go on.
    async fn run_launched(&self, warm: &DockerWarm, exec: &Exec) -> Result<(Outcome, bool), Failure> {
        let ooms = self.oom.count();
        let only_launcher_left = || self.holds_only(&warm.baseline);
        let end_all = || self.end_processes();
        let checked = warm
            .launcher
            .run_checked(exec, &self.setup.cwd, &self.setup.limits, only_launcher_left, end_all)
            .await?;
        let out_of_memory = self.out_of_memory(ooms, checked.may_be_out_of_memory()).await;
        Ok(checked.outcome(out_of_memory, self.setup.limits.memory_bytes))
    }
}

/// The pids a `cgroup.procs` file lists.
fn read_pids(path: &Path) -> Option<Vec<i32>> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().map(|line| line.trim().parse().ok()).collect()
}

/// Counts the daemon's OOM events for one container.
struct OomWatch {
    count: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl OomWatch {
    fn start(docker: &Docker, id: &str) -> Self {
        let filters = HashMap::from([
            ("container".to_string(), vec![id.to_string()]),
            ("event".to_string(), vec!["oom".to_string()]),
        ]);
        let mut events = docker.events(Some(EventsOptionsBuilder::default().filters(&filters).build()));
        let count = Arc::new(AtomicU64::new(0));
        let counter = count.clone();
        let task = tokio::spawn(async move {
            while let Some(Ok(_)) = events.next().await {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        Self { count, task }
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// Whether an OOM kill came after the count was `before`, waiting up
    /// to `ms` milliseconds for its report.
    async fn seen_since(&self, before: u64, ms: u64) -> bool {
        for _ in 0..ms / 20 {
            if self.count() > before {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.count() > before
    }
}

impl Drop for OomWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long the output of an exec whose process has exited may stay open
/// (held by a background process) before that process is killed.
const OUTPUT_GRACE: Duration = Duration::from_millis(300);

#[async_trait::async_trait]
impl EpisodeSandbox for DockerEpisode {
    async fn exec(&self, exec: Exec) -> Result<Outcome> {
        let start = || self.start_launcher();
        let run = async |warm: &DockerWarm| self.run_launched(warm, &exec).await;
        if let Some(outcome) = self.warm.run(start, run).await? {
            return Ok(outcome);
        }
        self.exec_directly(exec).await
    }

    async fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.warm.close().await;
        let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
        self.docker
            .remove_container(&self.id, Some(options))
            .await
            .with_context(|| format!("removing container {}", self.id))
    }
}

impl Drop for DockerEpisode {
    /// A path that skipped `close` (a panic) still removes the container.
    fn drop(&mut self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let docker = self.docker.clone();
        let id = self.id.clone();
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
            let _ = runtime.block_on(docker.remove_container(&id, Some(options)));
        })
        .join();
    }
}

#[async_trait::async_trait]
impl Sandbox for DockerSandbox {
    fn describe(&self) -> String {
        format!("docker (engine {}, image {})", self.version, self.image)
    }

    fn supports_gpus(&self) -> bool {
        true
    }

    fn image_digest(&self) -> Option<String> {
        Some(self.digest.clone())
    }

    async fn run(&self, command: Command) -> Result<Outcome> {
        let setup = EpisodeSetup {
            name: format!("task-step-{}", std::process::id()),
            mounts: command.mounts.clone(),
            cwd: command.cwd.clone(),
            network: command.network.clone(),
            limits: command.limits.clone(),
            gpus: command.gpus.clone(),
            lifetime: command.limits.timeout + LIFETIME_GRACE,
        };
        let container = self.open(&setup, "task-step", false).await?;
        let outcome = container
            .exec(Exec {
                argv: command.argv,
                env: command.env,
                timeout: command.limits.timeout,
                log_prefix: command.log_prefix,
                stop: command.stop,
            })
            .await;
        container.close().await?;
        outcome
    }

    async fn open_episode(&self, setup: EpisodeSetup) -> Result<Box<dyn EpisodeSandbox>> {
        Ok(Box::new(self.open(&setup, "episode", true).await?))
    }
}

/// Removes the containers mlrb made whose host process is gone (all of
/// them with `all`). Returns the names removed.
pub async fn gc(all: bool) -> Result<Vec<String>> {
    let (docker, _) = connect().await?;
    let filters = HashMap::from([("label".to_string(), vec![format!("{LABEL_MANAGED}=1")])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let containers = docker.list_containers(Some(options)).await.map_err(unreachable)?;
    let mut removed = Vec::new();
    for container in containers {
        let labels = container.labels.unwrap_or_default();
        // The host that made it, by pid and start time: a reused pid is not it.
        let owner = labels.get(LABEL_HOST).or_else(|| labels.get("mlrb.host-pid"));
        let owner_alive =
            owner.is_some_and(|token| *token != crate::process::current_token() && crate::process::token_alive(token));
        if owner_alive && !all {
            continue;
        }
        let Some(id) = container.id else { continue };
        let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
        match docker.remove_container(&id, Some(options)).await {
            Ok(()) => {}
            // Gone, or being removed, meanwhile (by its own host or another gc).
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404 | 409, ..
            }) => continue,
            Err(error) => return Err(error).with_context(|| format!("removing container {id}")),
        }
        removed.push(container.names.and_then(|n| n.first().cloned()).unwrap_or(id));
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task asking for more CPUs than the host has gets the host's, not
    /// a container the engine refuses.
    #[test]
    fn a_cpu_quota_above_the_host_is_capped_at_its_cpus() {
        let setup = EpisodeSetup {
            name: "/runs/r/t/a/0".into(),
            mounts: Vec::new(),
            cwd: "/workspace".into(),
            network: Reach::Nothing,
            limits: super::super::CommandLimits {
                cpus: 1000.0,
                ..super::super::CommandLimits::new(&crate::limits::Limits::default(), Duration::from_secs(600))
            },
            gpus: Vec::new(),
            lifetime: Duration::from_secs(3600),
        };
        let host = container_body("mlrb-runtime:abc", &setup, "episode")
            .host_config
            .unwrap();
        assert_eq!(host.nano_cpus, Some((host_cpus() * 1e9) as i64));
        assert!(host_cpus() < 1000.0);
    }

    #[test]
    fn the_container_configuration_is_locked_down_and_names_its_gpus() {
        let setup = EpisodeSetup {
            name: "/runs/r/digits/baseline/0".into(),
            mounts: vec![
                Mount::writable("/runs/ws", "/workspace"),
                Mount::read_only("/runs/ws/data/train.csv", "/workspace/data/train.csv"),
            ],
            cwd: "/workspace".into(),
            network: Reach::Nothing,
            limits: super::super::CommandLimits {
                cpus: 1.5,
                max_file_bytes: 1 << 30,
                ..super::super::CommandLimits::new(&crate::limits::Limits::default(), Duration::from_secs(600))
            },
            gpus: vec!["1".into(), "3".into()],
            lifetime: Duration::from_secs(3600),
        };
        let body = container_body("mlrb-runtime:abc", &setup, "episode");
        assert_eq!(body.image.as_deref(), Some("mlrb-runtime:abc"));
        // The init runs as a user no script runs as; scripts are execs as 1000.
        assert_eq!(body.user.as_deref(), Some(INIT_USER));
        assert_ne!(INIT_USER, SANDBOX_USER);
        assert_eq!(body.network_disabled, Some(true));
        let labels = body.labels.unwrap();
        assert_eq!(labels[LABEL_MANAGED], "1");
        assert_eq!(labels[LABEL_EPISODE], "/runs/r/digits/baseline/0");
        assert_eq!(labels[LABEL_HOST], crate::process::current_token());
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(host.memory, Some(2 << 30));
        assert_eq!(host.memory_swap, Some(2 << 30));
        assert_eq!(host.pids_limit, Some(256));
        assert_eq!(host.nano_cpus, Some(1_500_000_000));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        // Only what a root launcher needs to start scripts as the sandbox user.
        assert_eq!(host.cap_add, Some(vec!["SETUID".to_string(), "SETGID".to_string()]));
        let watch = body.cmd.clone().unwrap();
        assert_eq!(watch[..2], ["sh", "-c"]);
        assert!(
            watch[2].starts_with("exec timeout \"$1\" python3 -I -S -c \"$2\" /run/mlrb/host"),
            "{watch:?}"
        );
        let security = host.security_opt.clone().unwrap();
        assert!(security.contains(&"no-new-privileges".to_string()));
        assert!(
            security
                .iter()
                .any(|o| o.starts_with("seccomp=") && o.contains("pidfd_getfd"))
        );
        let ulimits = host.ulimits.clone().unwrap();
        assert!(
            ulimits
                .iter()
                .any(|u| u.name.as_deref() == Some("fsize") && u.hard == Some(1 << 30))
        );
        assert!(host.tmpfs.unwrap().contains_key("/tmp"));
        let mounts = host.mounts.unwrap();
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[0].read_only, Some(false));
        assert_eq!(mounts[1].read_only, Some(true));
        assert_eq!(mounts[1].target.as_deref(), Some("/workspace/data/train.csv"));
        let requests = host.device_requests.unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].device_ids, Some(vec!["1".to_string(), "3".to_string()]));
        assert_eq!(requests[0].count, None, "specific devices, never a count");
        assert_eq!(requests[0].capabilities, Some(vec![vec!["gpu".to_string()]]));

        let without = container_body(
            "i",
            &EpisodeSetup {
                gpus: vec![],
                network: Reach::Host,
                ..setup.clone()
            },
            "episode",
        );
        let host = without.host_config.unwrap();
        assert!(host.device_requests.is_none());
        assert_eq!(host.network_mode.as_deref(), Some("bridge"));

        // Behind a proxy: still no network of its own, the proxy's socket
        // bound in, the relay as the container's main process.
        let proxied = container_body(
            "i",
            &EpisodeSetup {
                network: Reach::Proxy("/tmp/mlrb-egress-x/egress.sock".into()),
                ..setup
            },
            "episode",
        );
        let host = proxied.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        let socket = host.mounts.unwrap().pop().unwrap();
        assert_eq!(socket.target.as_deref(), Some(gateway::GUEST_SOCKET));
        assert_eq!(socket.source.as_deref(), Some("/tmp/mlrb-egress-x/egress.sock"));
        // The relay beside the watch on the host's lifeline.
        let cmd = proxied.cmd.unwrap();
        assert!(
            cmd[2].contains("\"$0\" serve") && cmd[2].contains("/run/mlrb/host"),
            "{cmd:?}"
        );
        assert_eq!(cmd[3], gateway::FORWARDER);
        assert!(
            proxied
                .env
                .unwrap()
                .contains(&"HTTPS_PROXY=http://127.0.0.1:3128".to_string())
        );
    }
}
