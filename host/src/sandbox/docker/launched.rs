//! The episode's launcher in its container: started by a detached exec,
//! met at its socket, and the scripts it runs.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use super::cgroup_procs::CgroupProcs;
use super::container::Container;
use super::episode::{DockerEpisode, DockerWarm};
use super::launch_dir::LAUNCH_DIR;
use super::users::{LAUNCHER_USER, SANDBOX_USER};
use crate::sandbox::launcher::{self, Failure, Launcher, Rendezvous};
use crate::sandbox::{EpisodeSetup, Exec, Outcome};

impl DockerEpisode {
    /// Starts the episode's launcher (see [`start_launcher`]).
    pub(super) fn launcher_start(&self) -> impl Future<Output = Result<DockerWarm>> + Send + 'static {
        let sock = self.launch_dir.path().join("launch.sock");
        start_launcher(self.container.clone(), self.procs.clone(), sock, self.setup.clone())
    }

    /// Runs `exec` through the launcher; the flag says whether it may go on.
    pub(super) async fn run_launched(&self, warm: &DockerWarm, exec: &Exec) -> Result<(Outcome, bool), Failure> {
        let ooms = self.oom.count();
        let only_launcher_left = || self.holds_only(&warm.baseline);
        let end_all = || self.container.end_processes();
        let checked = warm
            .launcher
            .run_checked(exec, &self.setup.cwd, &self.setup.limits, only_launcher_left, end_all)
            .await?;
        let out_of_memory = self.out_of_memory(ooms, checked.may_be_out_of_memory()).await;
        Ok(checked.outcome(out_of_memory, self.setup.limits.memory_bytes))
    }
}

/// Starts the launcher of `container`'s episode with a detached exec and
/// waits until it has connected (at `sock`, the host's end of the launch
/// folder) from inside the container and said it is ready; a launcher that
/// started but failed later is ended.
async fn start_launcher(
    container: Container,
    procs: Option<CgroupProcs>,
    sock: PathBuf,
    setup: EpisodeSetup,
) -> Result<DockerWarm> {
    let started = try_start_launcher(&container, procs.as_ref(), &sock, &setup).await;
    if started.is_err() {
        container.end_processes().await?;
    }
    started
}

async fn try_start_launcher(
    container: &Container,
    procs: Option<&CgroupProcs>,
    sock: &std::path::Path,
    setup: &EpisodeSetup,
) -> Result<DockerWarm> {
    let Some(procs) = procs else {
        bail!("this host cannot watch the container's processes");
    };
    let rendezvous = Rendezvous::listen(sock)?;
    let place = format!("{LAUNCH_DIR}/launch.sock");
    let argv = launcher::argv("connect", &place, setup.lifetime, false, Some(SANDBOX_USER));
    let exec_id = container
        .create_exec(argv, &[], false, LAUNCHER_USER, &setup.cwd)
        .await?;
    let detached = bollard::exec::StartExecOptions {
        detach: true,
        ..Default::default()
    };
    container
        .docker
        .start_exec(&exec_id, Some(detached))
        .await
        .context("starting the launcher's exec")?;
    // The connection must come from inside this container.
    let inside = |pid| procs.now().is_some_and(|pids| pids.contains(&pid));
    let conn = tokio::select! {
        conn = rendezvous.accept(launcher::READY_WITHIN, inside) => conn?,
        _ = container.exited(&exec_id) => bail!("the launcher exited before it connected (is python3 in the image?)"),
    };
    drop(rendezvous);
    let launcher = Launcher::ready(conn).await?;
    let baseline = procs.now().context("reading the container's processes")?;
    Ok(DockerWarm { launcher, baseline })
}
