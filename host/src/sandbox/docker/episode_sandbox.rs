//! The episode's container as an [`EpisodeSandbox`]: each script through
//! the launcher while one is kept, else as an exec of its own; and its
//! close.

use std::sync::atomic::Ordering;

use anyhow::Result;

use super::episode::{DockerEpisode, DockerWarm};
use crate::sandbox::{EpisodeSandbox, Exec, Outcome};

#[async_trait::async_trait]
impl EpisodeSandbox for DockerEpisode {
    async fn exec(&self, exec: Exec) -> Result<Outcome> {
        let start = || self.launcher_start();
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
        self.container.remove().await
    }
}
