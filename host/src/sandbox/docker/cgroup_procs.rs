//! A container's processes as this host sees them in its cgroup, where the
//! engine runs on this machine.

use std::path::{Path, PathBuf};

use super::container::Container;

/// The container's `cgroup.procs` as this host sees it, and the processes
/// it held before any script (its init and main command).
#[derive(Clone)]
pub struct CgroupProcs {
    path: PathBuf,
    at_start: Vec<i32>,
}

impl CgroupProcs {
    /// The container's `cgroup.procs` on this host and the processes in it
    /// now, if the engine runs here and this host can read them.
    pub async fn find(container: &Container) -> Option<Self> {
        let inspected = container.docker.inspect_container(&container.id, None).await.ok()?;
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
                pids.contains(&pid).then_some(Self { path, at_start: pids })
            })
    }

    /// The processes in the container now.
    pub fn now(&self) -> Option<Vec<i32>> {
        read_pids(&self.path)
    }

    /// True when every process in the container is one of `allowed`.
    pub fn holds_only(&self, allowed: &[i32]) -> bool {
        self.now()
            .is_some_and(|now| now.iter().all(|pid| allowed.contains(pid)))
    }

    /// True when no process but those the container started with is left.
    pub fn nothing_left(&self) -> bool {
        self.holds_only(&self.at_start)
    }
}

/// The pids a `cgroup.procs` file lists.
fn read_pids(path: &Path) -> Option<Vec<i32>> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().map(|line| line.trim().parse().ok()).collect()
}
