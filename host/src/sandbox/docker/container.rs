//! One container of the engine, by id: made, and removed with whatever
//! still runs in it.

use anyhow::{Context, Result};
use bollard::Docker;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};

/// A container of the engine.
#[derive(Clone)]
pub struct Container {
    /// The engine it runs in.
    pub docker: Docker,
    /// Its id.
    pub id: String,
}

impl Container {
    /// Creates (without starting) a container named `name` of `body`.
    pub async fn create(docker: &Docker, name: &str, body: ContainerCreateBody) -> Result<Self> {
        let options = CreateContainerOptionsBuilder::default().name(name).build();
        let created = docker
            .create_container(Some(options), body)
            .await
            .with_context(|| format!("creating container {name}"))?;
        Ok(Self {
            docker: docker.clone(),
            id: created.id,
        })
    }

    /// Removes the container, ending what runs in it, with its volumes.
    pub async fn remove(&self) -> Result<()> {
        let options = RemoveContainerOptionsBuilder::default().force(true).v(true).build();
        self.docker
            .remove_container(&self.id, Some(options))
            .await
            .with_context(|| format!("removing container {}", self.id))
    }
}
