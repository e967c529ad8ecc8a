//! Where episodes' scripts run and their model calls go: the settings
//! `mlrb run` options and a bench plan share (one type, so both spell and
//! default them alike), opened into a [`Runner`] in one place.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::Runner;
use crate::llm::LlmSource;
use crate::sandbox::gpu::GpuPool;
use crate::sandbox::image::ImageRecipe;
use crate::sandbox::{self, SandboxKind};
use crate::task::Task;

/// The sandbox, image, GPUs and model source of a host's episodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
#[serde(default)]
pub struct HostSetup {
    /// Where scripts run: `local` (bubblewrap on this machine) or `docker`
    /// (containers of the local Docker engine) [default: local].
    #[arg(long, value_enum)]
    pub sandbox: Option<SandboxKind>,
    /// The image for `--sandbox docker` [default: the tasks' own, else the one
    /// `mlrb image build` makes].
    #[arg(long)]
    pub image: Option<String>,
    /// GPUs this host may hand to episodes, by nvidia-smi index or UUID (e.g. 0,1).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
    /// The Python of the local sandbox: an interpreter, venv or installation
    /// whose packages meet the tasks' (torch, ...), mounted read-only and run as
    /// every script's python3 [default: $MLRB_PYTHON, else the system's python3].
    #[arg(long, value_name = "PATH")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<PathBuf>,
    /// The configuration with the `[llm]` providers and model aliases
    /// [default: $MLRB_CONFIG, ./mlrb.toml, ~/.config/mlrb/mlrb.toml].
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Where the agent's model calls go: `local` (the offline model), `none`, or
    /// `replay:<episode-dir>` (answers from a recorded episode, in order; one episode only)
    /// [default: the configured providers, else the local model if installed].
    #[arg(long, value_name = "SOURCE")]
    pub llm: Option<String>,
}

impl HostSetup {
    /// These settings, with those not given taken from `base` (the command
    /// line over a plan file).
    pub fn or(self, base: Self) -> Self {
        Self {
            sandbox: self.sandbox.or(base.sandbox),
            image: self.image.or(base.image),
            gpus: if self.gpus.is_empty() { base.gpus } else { self.gpus },
            python: self.python.or(base.python),
            config: self.config.or(base.config),
            llm: self.llm.or(base.llm),
        }
    }

    /// The same settings with the config file's path made absolute, so a
    /// record of them holds wherever it is read again.
    pub fn absolute(mut self) -> Result<Self> {
        if let Some(config) = &self.config {
            let absolute = config
                .canonicalize()
                .with_context(|| format!("{}: cannot read", config.display()))?;
            self.config = Some(absolute);
        }
        // Made absolute, not resolved: a venv is known by its own path.
        if let Some(python) = &self.python {
            let absolute = std::path::absolute(python).with_context(|| format!("--python {}", python.display()))?;
            self.python = Some(absolute);
        }
        Ok(self)
    }

    /// The Python environment of the local sandbox: the one named, else
    /// `$MLRB_PYTHON` (this host's setting; not for Docker, whose image has
    /// its own).
    fn python(&self) -> Option<PathBuf> {
        match (&self.python, self.sandbox.unwrap_or_default()) {
            (Some(python), _) => Some(python.clone()),
            (None, SandboxKind::Local) => std::env::var_os("MLRB_PYTHON")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            (None, SandboxKind::Docker) => None,
        }
    }

    /// The image scripts of `tasks` run in: the one asked for, else the one
    /// the tasks declare, else the standard one.
    fn image(&self, tasks: &[Task]) -> Result<String> {
        if let Some(image) = &self.image {
            return Ok(image.clone());
        }
        if self.sandbox != Some(SandboxKind::Docker) {
            return Ok(ImageRecipe::standard(false).tag());
        }
        let mut declared = tasks
            .iter()
            .filter_map(|t| t.spec.resources.image.as_ref().map(|i| (t, i)));
        let Some((first, image)) = declared.next() else {
            // Tasks that need PyTorch get the torch image.
            let torch = tasks
                .iter()
                .any(|t| t.spec.resources.python_packages.iter().any(|p| p == "torch"));
            return Ok(ImageRecipe::standard(torch).tag());
        };
        let plain = tasks.iter().find(|t| t.spec.resources.image.is_none());
        if let Some((other, its)) = declared.find(|(_, i)| *i != image) {
            bail!(
                "tasks {} and {} declare different images ({image}, {its}): run them in separate benches, or pass --image",
                first.spec.name,
                other.spec.name
            );
        }
        if let Some(plain) = plain {
            bail!(
                "task {} declares the image {image} and task {} none: run them in separate benches, or pass --image",
                first.spec.name,
                plain.spec.name
            );
        }
        Ok(image.clone())
    }

    /// Opens the sandbox, the GPU pool and the model source for `tasks`.
    pub async fn runner(&self, cache_dir: &Path, tasks: &[Task]) -> Result<Runner> {
        let image = self.image(tasks)?;
        let python = self.python();
        let sandbox = sandbox::open(self.sandbox.unwrap_or_default(), &image, python.as_deref()).await?;
        let llm = LlmSource::open(self.llm.as_deref(), self.config.as_deref())?;
        Ok(Runner::new(cache_dir, sandbox)?
            .with_gpus(GpuPool::new(&self.gpus)?)
            .with_llm(llm))
    }
}

/// The name an agent's results go by: its file's stem, made safe for a
/// path component.
pub fn agent_name(path: &Path) -> String {
    crate::paths::safe_component(
        &path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "agent".into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_overrides_the_plan_setting_by_setting() {
        let plan = HostSetup {
            sandbox: Some(SandboxKind::Docker),
            image: Some("plan-image".into()),
            gpus: vec!["0".into()],
            ..HostSetup::default()
        };
        let cli = HostSetup {
            image: Some("cli-image".into()),
            ..HostSetup::default()
        };
        let merged = cli.or(plan);
        assert_eq!(merged.sandbox, Some(SandboxKind::Docker));
        assert_eq!(merged.image.as_deref(), Some("cli-image"));
        assert_eq!(merged.gpus, vec!["0".to_string()]);
    }

    #[test]
    fn agents_are_named_after_their_file() {
        assert_eq!(agent_name(Path::new("target/x/baseline.wasm")), "baseline");
        assert_eq!(agent_name(Path::new("")), "agent");
    }
}
