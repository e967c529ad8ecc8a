//! `mlrb agent`: make, build and check agent components.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use super::say;
use crate::agent_build::{self, Language};
use crate::engine::AgentEngine;
use crate::{agent_check, paths, report, task};

/// `mlrb agent` commands.
#[derive(Subcommand, Debug)]
pub enum AgentCommand {
    /// Create a buildable agent project (it starts as the baseline policy).
    New {
        /// The agent's name: lowercase letters, digits, '-' and '_' (a path:
        /// the project folder, named after the agent).
        name: String,
        #[arg(long, value_enum)]
        lang: Language,
        /// The project folder [default: ./<name>].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build an agent project (Rust, Python or C) into a .wasm component,
    /// then check it and compile it into the cache.
    Build {
        /// The project folder.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Where to write the component [default: <dir>/<name>.wasm].
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Python: the module that defines WitWorld [default: the manifest's `entry`, else app].
        #[arg(long)]
        entry: Option<String>,
    },
    /// What a component targets (world, WIT version), its imports and
    /// exports, size and sha256; refuses, with the reason, one this host
    /// will not run.
    Check {
        /// The component.
        file: PathBuf,
        /// Check against this task's grants (e.g. network).
        #[arg(long)]
        task: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

impl AgentCommand {
    /// Runs the subcommand.
    pub async fn run(self) -> Result<ExitCode> {
        match self {
            Self::New { name, lang, dir } => new(&name, lang, dir),
            Self::Build { dir, output, entry } => build(&dir, output.as_deref(), entry).await,
            Self::Check { file, task, json } => check(&file, task.as_deref(), json).await,
        }
    }
}

fn new(name: &str, language: Language, dir: Option<PathBuf>) -> Result<ExitCode> {
    // `mlrb agent new path/to/my-agent`: the folder's name is the agent's.
    let (name, dir) = match (Path::new(name).file_name(), dir) {
        (_, Some(dir)) => (name, dir),
        (Some(last), None) if name.contains('/') => (last.to_str().unwrap_or(name), PathBuf::from(name)),
        _ => (name, PathBuf::from(name)),
    };
    let sdk = agent_build::sdk::materialize(&paths::cache_dir())?;
    let created = agent_build::scaffold::create(&dir, name, language, &sdk)?;
    say!("created the {language} agent {name} in {}", created.display());
    say!("build it with: mlrb agent build {}", created.display());
    Ok(ExitCode::SUCCESS)
}

async fn build(dir: &Path, output: Option<&Path>, entry: Option<String>) -> Result<ExitCode> {
    let mut project = agent_build::Project::open(dir)?;
    if let Some(entry) = entry {
        project.entry = entry;
    }
    let started = std::time::Instant::now();
    let built = agent_build::build(&project, output)?;
    let built_in = started.elapsed();
    // Checking compiles it, so the first run starts from the cache.
    let engine = AgentEngine::new(&paths::cache_dir())?;
    let report = agent_check::check(&engine, &built, None).await?;
    say!("{}", report::agent_check_table(&report));
    notes(&report)?;
    say!(
        "built {} ({} agent) in {:.1} s",
        built.display(),
        project.language,
        built_in.as_secs_f64()
    );
    refusals(&report)
}

async fn check(file: &Path, task: Option<&str>, json: bool) -> Result<ExitCode> {
    let network = match task {
        Some(name) => Some(task::resolve(name)?.spec.resources.network.granted()),
        None => None,
    };
    let engine = AgentEngine::new(&paths::cache_dir())?;
    let report = agent_check::check(&engine, file, network).await?;
    if json {
        say!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(exit(&report));
    }
    say!("{}", report::agent_check_table(&report));
    notes(&report)?;
    if report.refusals.is_empty() {
        say!("{}: this host runs it", file.display());
    }
    refusals(&report)
}

/// Prints what the check noted that is no refusal.
fn notes(report: &agent_check::Report) -> Result<()> {
    for note in &report.notes {
        say!("note: {note}");
    }
    Ok(())
}

/// Prints each refusal; failure if there is one.
fn refusals(report: &agent_check::Report) -> Result<ExitCode> {
    for refusal in &report.refusals {
        say!("refused: {refusal}");
    }
    Ok(exit(report))
}

fn exit(report: &agent_check::Report) -> ExitCode {
    match report.refusals.is_empty() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    }
}
