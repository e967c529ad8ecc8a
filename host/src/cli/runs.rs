//! `mlrb runs`: acting on stored results.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};

use super::say;
use crate::bench::invalidate::{Invalidated, invalidate};

/// `mlrb runs` subcommands.
#[derive(Subcommand, Debug)]
pub enum RunsCommand {
    /// Mark every stored result that depended on a task version, an image
    /// or an agent as stale: reports strike it out and leave it out of
    /// their figures, and `mlrb bench --resume <run> --rerun-stale` runs it again.
    Invalidate(InvalidateArgs),
}

/// Options of `mlrb runs invalidate`.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("what").required(true).multiple(false))]
pub struct InvalidateArgs {
    /// A task, `NAME@VERSION` (or `NAME` for every version).
    #[arg(long, group = "what", value_name = "NAME[@VERSION]")]
    task: Option<String>,
    /// An image, by its id (`sha256:…`, at least 12 hex digits) as episode.json records it.
    #[arg(long, group = "what", value_name = "DIGEST")]
    image: Option<String>,
    /// An agent component, by its SHA-256 (at least 12 hex digits).
    #[arg(long, group = "what", value_name = "SHA256")]
    agent: Option<String>,
    /// Why, in words (kept with each result).
    #[arg(long, default_value = "")]
    reason: String,
    /// Where runs are stored.
    #[arg(long, value_name = "DIR", default_value = "runs")]
    runs: PathBuf,
}

impl RunsCommand {
    /// Runs the subcommand.
    pub fn run(self) -> Result<ExitCode> {
        match self {
            Self::Invalidate(args) => args.run(),
        }
    }
}

impl InvalidateArgs {
    fn what(&self) -> Result<Invalidated> {
        if let Some(task) = &self.task {
            let (name, version) = match task.split_once('@') {
                Some((name, version)) => (name.to_string(), Some(version.to_string())),
                None => (task.clone(), None),
            };
            return Ok(Invalidated::Task { name, version });
        }
        if let Some(image) = &self.image {
            return Ok(Invalidated::Image(Invalidated::hash("image", image)?));
        }
        match &self.agent {
            Some(agent) => Ok(Invalidated::Agent(Invalidated::hash("agent", agent)?)),
            None => bail!("say what to invalidate: --task, --image or --agent"),
        }
    }

    fn run(self) -> Result<ExitCode> {
        if !self.runs.is_dir() {
            bail!("{}: no such directory (pass --runs DIR)", self.runs.display());
        }
        let what = self.what()?;
        let marked = invalidate(&self.runs, &what, &self.reason)?;
        for dir in &marked {
            say!("stale  {}", dir.display());
        }
        say!(
            "{} results under {} depended on {}",
            marked.len(),
            self.runs.display(),
            what.describe()
        );
        Ok(ExitCode::SUCCESS)
    }
}
