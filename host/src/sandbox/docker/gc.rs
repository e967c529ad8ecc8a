//! Removing the containers of mlrb hosts that are gone (what `mlrb gc`
//! does, and what a new Docker sandbox does first).

use std::collections::HashMap;

use anyhow::{Context, Result};
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use super::engine::{connect, unreachable};
use super::labels::{LABEL_HOST, LABEL_MANAGED};

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
        // The host that made it, by pid and start time: a reused pid is not
        // it. This process is alive too: a second sandbox it opens (two
        // tasks tested at once) must not remove the first one's containers.
        let owner = labels.get(LABEL_HOST).or_else(|| labels.get("mlrb.host-pid"));
        let owner_alive =
            owner.is_some_and(|token| *token == crate::process::current_token() || crate::process::token_alive(token));
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
    use super::super::container::Container;
    use super::*;
    use crate::sandbox::image::ImageRecipe;
    use bollard::models::ContainerCreateBody;

    /// What this process made is its own, alive: a second sandbox it opens
    /// (two tasks tested at once) sweeps only what dead hosts left.
    #[tokio::test]
    async fn a_sweep_keeps_the_containers_of_the_process_that_sweeps() {
        let image = ImageRecipe::standard(false).tag();
        let engine = connect().await.ok();
        let ready = match &engine {
            Some((docker, _)) => docker.inspect_image(&image).await.is_ok(),
            None => false,
        };
        if !ready {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "no Docker engine or no {image}"
            );
            eprintln!("skipped: no Docker engine or no {image}");
            return;
        }
        let (docker, _) = engine.unwrap();
        let labels = HashMap::from([
            (LABEL_MANAGED.to_string(), "1".to_string()),
            (LABEL_HOST.to_string(), crate::process::current_token()),
        ]);
        let body = ContainerCreateBody {
            image: Some(image),
            cmd: Some(vec!["true".into()]),
            labels: Some(labels),
            ..Default::default()
        };
        let name = format!("mlrb-gc-test-{}", std::process::id());
        let ours = Container::create(&docker, &name, body).await.unwrap();
        let swept = gc(false).await;
        let kept = docker.inspect_container(&ours.id, None).await.is_ok();
        let _ = ours.remove().await;
        assert!(kept, "the sweep removed this process's container: {swept:?}");
    }
}
