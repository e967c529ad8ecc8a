//! The connection to the local Docker engine, and the one line that says
//! it cannot be reached.

use std::time::Duration;

use anyhow::{Result, anyhow};
use bollard::Docker;

/// One line for a daemon that cannot be reached.
pub fn unreachable(error: impl std::fmt::Display) -> anyhow::Error {
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
