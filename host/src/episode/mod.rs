//! One agent on one task: the request, the run under limits (prepare,
//! workspace, sandbox, the agent's store), the records that say what
//! happened, why it ended, and its score.
//!
//! The [`Runner`] holds what lives as long as the host process (engine,
//! linker, sandbox, caches, GPUs, the model source) and runs any number of
//! [`EpisodeRequest`]s, one after another or at once.

pub mod basis;
pub mod end;
pub mod feedback;
pub mod fork;
pub mod human;
pub mod judgement;
pub mod records;
mod replay;
mod request;
pub mod resume;
mod resumed;
mod run;
pub mod scan;
mod score;
mod setup;
pub mod verify;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::capability::{self, AgentPre, AgentState};
use crate::engine::AgentEngine;
use crate::llm::LlmSource;
use crate::sandbox::Sandbox;
use crate::sandbox::gpu::{GpuLease, GpuPool};
use crate::task::Task;
use crate::task::requirements::HostOffer;
pub use end::EndReason;
pub use records::{EpisodeRecord, ScoreRecord, StaleMark, episode_dirs};
pub use replay::ReplayReport;
pub use request::{EpisodeRequest, ForkOrigin, episode_dir, episode_id, episode_id_of};
pub use setup::{HostSetup, agent_name};

/// An agent component read from disk, compiled and checked against the world.
pub struct LoadedAgent {
    /// Where the component was read from.
    pub path: PathBuf,
    /// The component file's SHA-256, in hex.
    pub sha256: String,
    /// The component file's size, in bytes.
    pub size: u64,
    /// Whether the compiled code came from the cache.
    pub from_cache: bool,
    /// How long reading, compiling and checking took, in milliseconds.
    pub load_ms: f64,
    /// The contract it was built against (`mlrb:agent@0.2.0`), from its imports.
    pub wit: Option<String>,
    pre: AgentPre<AgentState>,
}

impl std::fmt::Debug for LoadedAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedAgent")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

/// The long-lived parts of a host process that run episodes: engine,
/// linker, sandbox, caches, GPUs and the model source.
pub struct Runner {
    engine: AgentEngine,
    linker: wasmtime::component::Linker<AgentState>,
    sandbox: Arc<dyn Sandbox>,
    cache_dir: PathBuf,
    gpus: GpuPool,
    llm: LlmSource,
}

impl Runner {
    /// A runner whose scripts go to `sandbox`, caching under `cache_dir`.
    pub fn new(cache_dir: &Path, sandbox: Arc<dyn Sandbox>) -> Result<Self> {
        let engine = AgentEngine::new(cache_dir)?;
        let linker = capability::linker(engine.engine())?;
        Ok(Self {
            engine,
            linker,
            sandbox,
            cache_dir: cache_dir.to_path_buf(),
            gpus: GpuPool::default(),
            llm: LlmSource::None,
        })
    }

    /// Where episodes' completions come from (one source, so one set of
    /// provider limits, for every episode of this host).
    pub fn with_llm(mut self, llm: LlmSource) -> Self {
        self.llm = llm;
        self
    }

    /// Gives this runner GPUs to hand out to episodes.
    pub fn with_gpus(mut self, gpus: GpuPool) -> Self {
        self.gpus = gpus;
        self
    }

    /// GPUs this runner may hand to episodes.
    pub fn gpu_count(&self) -> usize {
        self.gpus.size()
    }

    /// What this host offers a task, for the checks made before a run.
    pub fn offer(&self) -> HostOffer<'_> {
        HostOffer {
            sandbox: self.sandbox.as_ref(),
            gpus: &self.gpus,
        }
    }

    /// `task` in its smoke profile when `smoke` (see [`crate::task::smoke::profile`]),
    /// else as it is; refused, in one line naming the task, where it has none.
    pub async fn profile(&self, task: Task, smoke: bool) -> Result<Task> {
        if !smoke {
            return Ok(task);
        }
        crate::task::smoke::profile(&task, &self.offer(), &self.cache_dir)
            .await
            .map_err(|why| anyhow::anyhow!("task {} has no smoke profile: {why}", task.spec.name))
    }

    /// Holds the GPUs a task needs, or refuses before anything starts.
    fn lease_gpus(&self, task: &Task) -> Result<Option<GpuLease>> {
        let needed = task.spec.resources.gpus;
        if needed == 0 {
            return Ok(None);
        }
        self.gpus
            .acquire(needed)
            .map(Some)
            .with_context(|| format!("task {}", task.spec.name))
    }

    /// The sandbox scripts run in.
    pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
        &self.sandbox
    }

    /// Where compiled agents and prepared data are cached.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// Reads, compiles (or loads from the cache) and type-checks an agent.
    pub async fn load_agent(&self, path: &Path) -> Result<Arc<LoadedAgent>> {
        let started = Instant::now();
        let (bytes, sha256) = crate::engine::map_agent(path)?;
        let size = bytes.len() as u64;
        let loaded = self
            .engine
            .load(&bytes, &sha256)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e:#}", path.display()))?;
        let world = capability::WIT_PACKAGE;
        let first = |e: wasmtime::Error| end::first_line(&format!("{:#}", anyhow::Error::from(e))).to_string();
        let instance_pre = self.linker.instantiate_pre(&loaded.component).map_err(|e| {
            anyhow::anyhow!(
                "{}: {}: it must be built for the {world} world",
                path.display(),
                first(e)
            )
        })?;
        let pre = AgentPre::new(instance_pre).map_err(|e| {
            anyhow::anyhow!(
                "{}: does not export the agent's `run` ({}): build it for the {world} world",
                path.display(),
                first(e)
            )
        })?;
        let package = world.split('@').next().unwrap_or(world);
        let wit = loaded
            .component
            .component_type()
            .imports(self.engine.engine())
            .find_map(|(name, _)| {
                name.strip_prefix(&format!("{package}/"))?
                    .split_once('@')
                    .map(|(_, v)| v.to_string())
            })
            .map(|version| format!("{package}@{version}"));
        Ok(Arc::new(LoadedAgent {
            path: path.to_path_buf(),
            sha256,
            size,
            wit,
            from_cache: loaded.from_cache,
            load_ms: started.elapsed().as_secs_f64() * 1000.0,
            pre,
        }))
    }
}
