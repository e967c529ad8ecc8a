//! The CPU time a sandboxed command has used so far, as this host reads it
//! from the command's control group (or its container's), never from
//! anything the command itself says. A control group holds every process
//! and thread the command starts, whatever they do (fork, `setsid`, exit
//! early), so no work of the command escapes the count; and CPU time, unlike
//! a clock on the wall, does not grow when other processes of the machine
//! take the CPU from the command.
//!
//! The sandbox that starts the command sets the meter's source once the
//! group exists (`local`: its own control group; `docker`: the container's,
//! read on this host, or else asked of the engine); where there is none (a
//! host without a writable control group) the meter reads nothing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A handle on a command's CPU time; clones read the same command.
#[derive(Debug, Clone, Default)]
pub struct CpuMeter {
    source: Arc<Mutex<Option<Source>>>,
}

/// Where a command's CPU time is read.
#[derive(Clone)]
pub enum Source {
    /// cgroup v1 `cpuacct.usage`: nanoseconds.
    Nanoseconds(PathBuf),
    /// cgroup v2 `cpu.stat`: its `usage_usec` line, microseconds.
    CpuStat(PathBuf),
    /// The engine's statistics of container `id` (`cpu_usage.total_usage`).
    Engine {
        /// The engine.
        docker: bollard::Docker,
        /// The container.
        id: String,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Nanoseconds(path) | Source::CpuStat(path) => write!(f, "{}", path.display()),
            Source::Engine { id, .. } => write!(f, "engine statistics of container {id}"),
        }
    }
}

impl CpuMeter {
    /// Reads the command's CPU time from `source` from now on.
    pub fn set(&self, source: Source) {
        if let Ok(mut slot) = self.source.lock() {
            *slot = Some(source);
        }
    }

    /// Whether the command has a source to read (a control group).
    pub fn is_set(&self) -> bool {
        self.source.lock().is_ok_and(|s| s.is_some())
    }

    /// The CPU time of every process the command has had so far, threads
    /// and children included; none where it has no source or it cannot be
    /// read (the group is gone).
    pub async fn read(&self) -> Option<Duration> {
        let source = self.source.lock().ok()?.clone()?;
        match source {
            Source::Nanoseconds(path) => read_number(&path).map(Duration::from_nanos),
            Source::CpuStat(path) => read_usage_usec(&path).map(Duration::from_micros),
            Source::Engine { docker, id } => engine_usage(&docker, &id).await,
        }
    }
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn read_usage_usec(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("usage_usec ")?.trim().parse().ok())
}

/// What the engine says container `id` has used (where its cgroup is out
/// of this host's sight: a remote engine).
async fn engine_usage(docker: &bollard::Docker, id: &str) -> Option<Duration> {
    use futures_util::StreamExt;
    let options = bollard::query_parameters::StatsOptions {
        stream: false,
        one_shot: true,
    };
    let stats = docker.stats(id, Some(options)).next().await?.ok()?;
    stats
        .cpu_stats?
        .cpu_usage?
        .total_usage
        .filter(|&n| n > 0)
        .map(Duration::from_nanos)
}

/// The CPU-time file of the process `pid`'s control group as this host
/// sees it: v1's `cpuacct` controller, or the unified hierarchy's `cpu.stat`.
pub fn of_process(pid: i32) -> Option<Source> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let root = Path::new("/sys/fs/cgroup");
    let found = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "cpuacct") {
            let file = root.join(controllers).join(path).join("cpuacct.usage");
            return file.is_file().then_some(Source::Nanoseconds(file));
        }
        None
    });
    found.or_else(|| {
        own.lines().find_map(|line| {
            let path = line.strip_prefix("0::")?.trim_start_matches('/');
            let file = root.join(path).join("cpu.stat");
            file.is_file().then_some(Source::CpuStat(file))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A meter without a source reads nothing; with a file, what it says,
    /// in the file's unit.
    #[tokio::test]
    async fn a_meter_reads_its_groups_file_in_its_unit() {
        let meter = CpuMeter::default();
        assert_eq!(meter.read().await, None);
        assert!(!meter.is_set());
        let tmp = tempfile::tempdir().unwrap();
        let v1 = tmp.path().join("cpuacct.usage");
        std::fs::write(&v1, "1500000000\n").unwrap();
        meter.clone().set(Source::Nanoseconds(v1));
        assert_eq!(meter.read().await, Some(Duration::from_millis(1500)));
        let v2 = tmp.path().join("cpu.stat");
        std::fs::write(&v2, "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n").unwrap();
        meter.set(Source::CpuStat(v2.clone()));
        assert_eq!(meter.read().await, Some(Duration::from_micros(2500)));
        std::fs::remove_file(&v2).unwrap();
        assert_eq!(meter.read().await, None, "a group that is gone reads nothing");
    }
}
