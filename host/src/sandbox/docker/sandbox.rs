//! The Docker sandbox: the engine and image scripts run in, and the
//! containers it opens for task steps and episodes.

use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use bollard::Docker;
use bollard::models::ContainerCreateBody;

use super::container::Container;
use super::container_config::container_body;
use super::engine::connect;
use super::episode::DockerEpisode;
use super::gc::gc;
use super::launch_dir::{LAUNCH_DIR, launch_dir};
use super::mount_sources::prepare_mount_sources;
use crate::sandbox::image::ImageRecipe;
use crate::sandbox::{Command, EpisodeSandbox, EpisodeSetup, Exec, Mount, Outcome, Sandbox};

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
            let torch = ImageRecipe::standard(true).tag();
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
        setup.mounts.extend(identity_files()?);
        let name = format!("mlrb-{}-{}", std::process::id(), crate::process::next_serial());
        let container = Container::create(&self.docker, &name, self.container_body(&setup, role)).await?;
        DockerEpisode::start(container, setup, launch_dir, lifeline, &name, warm).await
    }
}

/// The script user's `/etc/passwd` and `/etc/group` (see `identity`),
/// bound over the image's: written once into mlrb's cache (they never
/// change), never into the launcher's folder, which holds only its socket
/// and the lifeline.
fn identity_files() -> Result<Vec<Mount>> {
    use crate::sandbox::identity;
    let dir = crate::paths::cache_dir().join("sandbox-identity");
    std::fs::create_dir_all(&dir).with_context(|| format!("making {}", dir.display()))?;
    let mut mounts = Vec::new();
    for (name, text, guest) in [
        ("passwd", identity::passwd(), identity::PASSWD_PATH),
        ("group", identity::group(), identity::GROUP_PATH),
    ] {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            // A whole file or none: another host may be reading it.
            let partial = dir.join(format!(".{name}.{}", std::process::id()));
            std::fs::write(&partial, &text).with_context(|| format!("writing {}", partial.display()))?;
            std::fs::rename(&partial, &path).with_context(|| format!("writing {}", path.display()))?;
        }
        mounts.push(Mount::read_only(path, guest));
    }
    Ok(mounts)
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
        command.meter.set(container.cpu_source().await);
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
