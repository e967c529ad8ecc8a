//! `mlrb gc`: remove containers left behind by a killed host (each start of
//! the Docker sandbox does it too).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::say;

/// Options of `mlrb gc`.
#[derive(Args, Debug)]
pub struct GcArgs {
    /// Remove every mlrb container, also those of hosts still running.
    #[arg(long)]
    all: bool,
}

impl GcArgs {
    /// Removes the containers and says which.
    pub async fn run(self) -> Result<ExitCode> {
        let removed = crate::sandbox::docker::gc(self.all).await?;
        for name in &removed {
            say!("removed {name}");
        }
        say!("{} container(s) removed", removed.len());
        Ok(ExitCode::SUCCESS)
    }
}
