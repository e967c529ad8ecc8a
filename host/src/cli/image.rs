//! `mlrb image`: the container image scripts run in with `--sandbox docker`.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use super::{say, spinner};
use crate::paths;
use crate::sandbox::image::{self, ImageRecipe};

/// `mlrb image` commands.
#[derive(Subcommand, Debug)]
pub enum ImageCommand {
    /// Build the task runtime image (Debian with Python and the scientific
    /// stack) from a debootstrap root filesystem; a no-op when it exists.
    Build {
        /// Build the torch image instead: Python with the exact wheels of
        /// images/torch/requirements.lock (PyTorch, transformers, datasets, ...).
        #[arg(long)]
        with_torch: bool,
    },
}

impl ImageCommand {
    /// Builds the image unless it exists.
    pub async fn run(self) -> Result<ExitCode> {
        let Self::Build { with_torch } = self;
        let recipe = ImageRecipe::standard(with_torch);
        let bar = spinner("building the image");
        let build_dir = paths::cache_dir().join("image-build");
        let built = image::build(&recipe, &build_dir, &|step| bar.set_message(step.to_string())).await;
        bar.finish_and_clear();
        let (tag, new) = built?;
        say!("{tag} {}", if new { "built" } else { "is up to date" });
        Ok(ExitCode::SUCCESS)
    }
}
