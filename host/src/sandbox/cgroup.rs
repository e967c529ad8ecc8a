//! Per-command control groups: the memory, process-count and CPU limits a
//! sandboxed command runs under, how its out-of-memory kill is recognised,
//! and how its whole process tree is killed. Works with cgroup v2 and with
//! the v1 controllers of a hybrid host; where neither can be written, the
//! caller falls back to rlimits.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy a group lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Version 1: one directory per controller.
    V1,
    /// Version 2: the unified hierarchy.
    V2,
}

/// A control group made for one command; removed (after killing anything
/// left in it) when dropped.
#[derive(Debug)]
pub struct Cgroup {
    version: Version,
    /// One directory per v1 controller, or the single v2 directory.
    dirs: Vec<PathBuf>,
    memory_dir: PathBuf,
}

/// Reads `/proc/self/cgroup`: (controllers, path) per line.
fn own_cgroups() -> Vec<(String, String)> {
    std::fs::read_to_string("/proc/self/cgroup")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?.to_string();
            let path = parts.next()?.to_string();
            Some((controllers, path))
        })
        .collect()
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
}

/// Whether control groups are turned off (`MLRB_CGROUPS=off`): commands
/// then run under the limits that stand in for them (`limits`), as on a
/// host without a writable cgroup.
pub fn disabled() -> bool {
    std::env::var("MLRB_CGROUPS").is_ok_and(|v| v == "off")
}

impl Cgroup {
    /// Which cgroup version this host lets mlrb use, if any.
    pub fn available() -> Option<Version> {
        // Numbered: two probes of one process at once must not collide, or
        // the second would find no cgroups and run without them.
        let n = crate::process::next_serial();
        let probe = Self::create(
            &format!("probe-{}-{n}", crate::process::current_token()),
            64 << 20,
            16,
            1.0,
        )?;
        Some(probe.version)
    }

    /// Makes a group with these limits, under v2 if it can, else v1; `None`
    /// when neither can be written.
    pub fn create(name: &str, memory_bytes: u64, max_processes: u32, cpus: f64) -> Option<Self> {
        if disabled() {
            return None;
        }
        Self::create_v2(name, memory_bytes, max_processes, cpus)
            .or_else(|| Self::create_v1(name, memory_bytes, max_processes, cpus))
    }

    fn create_v2(name: &str, memory_bytes: u64, max_processes: u32, cpus: f64) -> Option<Self> {
        let root = Path::new("/sys/fs/cgroup");
        let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
        if !(controllers.contains("memory") && controllers.contains("pids")) {
            return None;
        }
        let own = own_cgroups().into_iter().find(|(c, _)| c.is_empty())?.1;
        let parent = root.join(own.trim_start_matches('/'));
        let subtree = std::fs::read_to_string(parent.join("cgroup.subtree_control")).ok()?;
        if !(subtree.contains("memory") && subtree.contains("pids")) {
            write(&parent.join("cgroup.subtree_control"), "+memory +pids +cpu").ok()?;
        }
        let dir = parent.join(format!("mlrb-{name}"));
        std::fs::create_dir(&dir).ok()?;
        let group = Self {
            version: Version::V2,
            dirs: vec![dir.clone()],
            memory_dir: dir.clone(),
        };
        write(&dir.join("memory.max"), &memory_bytes.to_string()).ok()?;
        let _ = write(&dir.join("memory.swap.max"), "0");
        write(&dir.join("pids.max"), &max_processes.to_string()).ok()?;
        let _ = write(&dir.join("cpu.max"), &format!("{} 100000", (cpus * 100_000.0) as u64));
        Some(group)
    }

    fn create_v1(name: &str, memory_bytes: u64, max_processes: u32, cpus: f64) -> Option<Self> {
        let own = own_cgroups();
        let controller_dir = |controller: &str| -> Option<PathBuf> {
            let (_, path) = own.iter().find(|(c, _)| c.split(',').any(|c| c == controller))?;
            let base = Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(path.trim_start_matches('/'));
            base.is_dir().then_some(base)
        };
        let memory = controller_dir("memory")?.join(format!("mlrb-{name}"));
        let pids = controller_dir("pids")?.join(format!("mlrb-{name}"));
        std::fs::create_dir(&memory).ok()?;
        let mut group = Self {
            version: Version::V1,
            dirs: vec![memory.clone()],
            memory_dir: memory.clone(),
        };
        std::fs::create_dir(&pids).ok()?;
        group.dirs.push(pids.clone());
        write(&memory.join("memory.limit_in_bytes"), &memory_bytes.to_string()).ok()?;
        let _ = write(&memory.join("memory.memsw.limit_in_bytes"), &memory_bytes.to_string());
        write(&pids.join("pids.max"), &max_processes.to_string()).ok()?;
        // Optional controllers: a CPU quota, and a freezer that stops a
        // fork bomb from outpacing the kill loop.
        if let Some(cpu) = controller_dir("cpu").map(|d| d.join(format!("mlrb-{name}")))
            && std::fs::create_dir(&cpu).is_ok()
        {
            group.dirs.push(cpu.clone());
            let _ = write(&cpu.join("cpu.cfs_period_us"), "100000");
            let _ = write(&cpu.join("cpu.cfs_quota_us"), &((cpus * 100_000.0) as u64).to_string());
        }
        // CPU accounting: `cpu,cpuacct` mounted together, or apart.
        let accounted = group.dirs.iter().any(|d| d.join("cpuacct.usage").is_file());
        if !accounted
            && let Some(cpuacct) = controller_dir("cpuacct").map(|d| d.join(format!("mlrb-{name}")))
            && std::fs::create_dir(&cpuacct).is_ok()
        {
            group.dirs.push(cpuacct);
        }
        if let Some(freezer) = controller_dir("freezer").map(|d| d.join(format!("mlrb-{name}")))
            && std::fs::create_dir(&freezer).is_ok()
        {
            group.dirs.push(freezer);
        }
        Some(group)
    }

    /// Which cgroup version this group uses.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Where the CPU time of the group's processes is read (see
    /// `cpu_time`): v2's `cpu.stat`, v1's `cpuacct.usage`; none on a v1
    /// host without the `cpuacct` controller.
    pub fn cpu_source(&self) -> Option<super::cpu_time::Source> {
        use super::cpu_time::Source;
        match self.version {
            Version::V2 => Some(Source::CpuStat(self.dirs[0].join("cpu.stat"))),
            Version::V1 => self
                .dirs
                .iter()
                .map(|d| d.join("cpuacct.usage"))
                .find(|f| f.is_file())
                .map(Source::Nanoseconds),
        }
    }

    /// `cgroup.procs` of every directory, opened for writing before the fork
    /// so the child joins with one `write(2)` (async-signal-safe).
    pub fn join_handles(&self) -> std::io::Result<Vec<OwnedFd>> {
        self.dirs
            .iter()
            .map(|d| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("cgroup.procs"))
                    .map(OwnedFd::from)
            })
            .collect()
    }

    /// True when the kernel's OOM killer fired inside this group.
    pub fn oom_killed(&self) -> bool {
        self.oom_kills() > 0
    }

    /// How many processes the kernel's OOM killer has killed in this group.
    pub fn oom_kills(&self) -> u64 {
        let file = match self.version {
            Version::V1 => "memory.oom_control",
            Version::V2 => "memory.events",
        };
        std::fs::read_to_string(self.memory_dir.join(file))
            .unwrap_or_default()
            .lines()
            .find_map(|line| {
                line.strip_prefix("oom_kill ")
                    .and_then(|n| n.trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
    }

    /// True when every process in the group is one of `allowed`.
    pub fn holds_only(&self, allowed: &[i32]) -> bool {
        self.pids().iter().all(|pid| allowed.contains(pid))
    }

    /// The processes in the group (every controller's directory).
    pub fn pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .dirs
            .iter()
            .flat_map(|d| {
                std::fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<_>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Waits (up to 5 s) until no process is left in the group.
    fn wait_empty(&self) {
        let events = self.dirs[0].join("cgroup.events");
        for _ in 0..1000 {
            match std::fs::read_to_string(&events) {
                Ok(text) if text.lines().any(|l| l == "populated 1") => {
                    std::thread::sleep(std::time::Duration::from_millis(5))
                }
                _ => return,
            }
        }
        tracing::warn!(group = %self.dirs[0].display(), "processes of a killed script still hold its control group");
    }

    /// Kills every process in the group, however many forks it made.
    pub fn kill_all(&self) {
        if self.version == Version::V2 && write(&self.dirs[0].join("cgroup.kill"), "1").is_ok() {
            // cgroup.kill only sends the signals: wait until they are gone.
            self.wait_empty();
            return;
        }
        // Short waits first: a sandbox's init is usually gone within a
        // millisecond of its child, and a fixed 5 ms would be paid per script.
        for round in 0..220u32 {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            // Freeze first so a fork bomb cannot outpace the killing; frozen
            // processes take their SIGKILL when thawed.
            let freezer = self.dirs.iter().find(|d| d.to_string_lossy().contains("/freezer/"));
            if let Some(freezer) = freezer {
                let _ = write(&freezer.join("freezer.state"), "FROZEN");
            }
            for pid in pids {
                // SAFETY: plain kill(2) on a pid read from our own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            if let Some(freezer) = freezer {
                let _ = write(&freezer.join("freezer.state"), "THAWED");
            }
            std::thread::sleep(std::time::Duration::from_micros(if round < 20 { 100 } else { 5000 }));
        }
    }
}

/// The host that made a group, from its name (`mlrb-<token>-<n>` or
/// `mlrb-probe-<token>`; see `process::HostProcess::token`).
fn owner(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("mlrb-")?;
    let rest = rest.strip_prefix("probe-").unwrap_or(rest);
    rest.split('-').next()
}

/// Removes the control groups of mlrb hosts that are gone (killed before
/// they could remove their own), killing whatever still runs in them.
/// Returns how many were removed.
pub fn reap_stale() -> usize {
    let own = own_cgroups();
    let mut parents: Vec<(Version, PathBuf)> = Vec::new();
    if let Some((_, path)) = own.iter().find(|(c, _)| c.is_empty()) {
        parents.push((
            Version::V2,
            Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/')),
        ));
    }
    for controller in ["memory", "pids", "cpu", "cpuacct", "freezer"] {
        if let Some((_, path)) = own.iter().find(|(c, _)| c.split(',').any(|c| c == controller)) {
            parents.push((
                Version::V1,
                Path::new("/sys/fs/cgroup")
                    .join(controller)
                    .join(path.trim_start_matches('/')),
            ));
        }
    }
    let mut removed = 0;
    for (version, parent) in parents {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if owner(&name).is_none_or(crate::process::token_alive) || !entry.path().is_dir() {
                continue;
            }
            let dir = entry.path();
            drop(Cgroup {
                version,
                dirs: vec![dir.clone()],
                memory_dir: dir,
            });
            removed += 1;
        }
    }
    removed
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_all();
        for dir in &self.dirs {
            for _ in 0..100 {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
                }
            }
        }
    }
}
