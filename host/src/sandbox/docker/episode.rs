//! The container of one episode (or of one prepare/evaluate step): what it
//! holds, its start, what this host can see of its processes, and its
//! removal on a path that skipped `close`.

use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};

use super::cgroup_procs::CgroupProcs;
use super::container::Container;
use super::oom::OomWatch;
use crate::sandbox::launcher::{Launcher, Warm};
use crate::sandbox::{EpisodeSetup, cpu_time};

/// The container of one episode (or of one prepare/evaluate step).
pub struct DockerEpisode {
    pub(super) container: Container,
    pub(super) setup: EpisodeSetup,
    pub(super) closed: AtomicBool,
    /// The container's `cgroup.procs` as this host sees it, and the
    /// processes it held before any script (its init and main command):
    /// where the engine runs on this machine, whether a script left
    /// processes behind is read here instead of asked of an exec.
    pub(super) procs: Option<CgroupProcs>,
    /// Where this host listens for the episode's launcher.
    pub(super) launch_dir: tempfile::TempDir,
    /// The container's lifeline: the container ends when it closes (with
    /// this host, however it ends).
    _lifeline: std::os::unix::net::UnixListener,
    pub(super) warm: Warm<DockerWarm>,
    pub(super) oom: OomWatch,
}

/// An episode container's launcher, started by a detached exec.
pub struct DockerWarm {
    pub(super) launcher: Launcher,
    /// The container's processes once the launcher was ready.
    pub(super) baseline: Vec<i32>,
}

impl DockerEpisode {
    /// Starts `container`, made for `setup` with `launch_dir` mounted;
    /// an episode's (`warm`) starts a launcher in the background where this
    /// host can watch its processes.
    pub(super) async fn start(
        container: Container,
        setup: EpisodeSetup,
        launch_dir: tempfile::TempDir,
        lifeline: std::os::unix::net::UnixListener,
        name: &str,
        warm: bool,
    ) -> Result<Self> {
        let mut episode = DockerEpisode {
            oom: OomWatch::start(&container.docker, &container.id),
            container,
            setup,
            closed: AtomicBool::new(false),
            procs: None,
            launch_dir,
            _lifeline: lifeline,
            warm: Warm::new(false),
        };
        // From here the container is removed on every path (close or drop).
        episode
            .container
            .docker
            .start_container(&episode.container.id, None)
            .await
            .with_context(|| format!("starting container {name}"))?;
        episode.procs = CgroupProcs::find(&episode.container).await;
        // Only a host that sees the container's processes can vouch that a
        // script left nothing, and so keep a launcher between scripts.
        episode.warm = Warm::new(warm && episode.procs.is_some());
        // Started now, in the background: the first script finds it ready.
        episode.warm.prestart(episode.launcher_start());
        Ok(episode)
    }

    /// The container's id.
    pub fn id(&self) -> &str {
        &self.container.id
    }

    /// Where the container's CPU time is read: its control group on this
    /// host, or else the engine's statistics.
    pub(super) async fn cpu_source(&self) -> cpu_time::Source {
        let engine = || cpu_time::Source::Engine {
            docker: self.container.docker.clone(),
            id: self.container.id.clone(),
        };
        let inspected = self.container.docker.inspect_container(&self.container.id, None).await;
        let pid = inspected
            .ok()
            .and_then(|i| i.state?.pid)
            .and_then(|p| i32::try_from(p).ok());
        pid.filter(|&p| p > 0)
            .and_then(cpu_time::of_process)
            .unwrap_or_else(engine)
    }

    /// True when this host can see that no process but those the container
    /// started with is left (then there is nothing to kill).
    pub(super) fn nothing_left(&self) -> bool {
        self.procs.as_ref().is_some_and(CgroupProcs::nothing_left)
    }

    /// True when this host can see that every process in the container is
    /// one of `allowed`.
    pub(super) fn holds_only(&self, allowed: &[i32]) -> bool {
        self.procs.as_ref().is_some_and(|procs| procs.holds_only(allowed))
    }

    /// Whether the OOM killer struck since the count was `before`; a script
    /// that died of SIGKILL waits a moment for the event, which may trail.
    pub(super) async fn out_of_memory(&self, before: u64, killed: bool) -> bool {
        self.oom.seen_since(before, if killed { 500 } else { 0 }).await
    }
}

impl Drop for DockerEpisode {
    /// A path that skipped `close` (a panic) still removes the container.
    fn drop(&mut self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let container = self.container.clone();
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            let _ = runtime.block_on(container.remove());
        })
        .join();
    }
}
