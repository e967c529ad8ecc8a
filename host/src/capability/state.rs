//! The agent's state, built in one place for a live run, a fork and a
//! replay alike: each interface's own state from what the episode hands
//! over (its limits, seed, log, recorder, files, scripts, the task as the
//! agent is told it, the model source and the network). A new interface
//! adds its state here; the episode's code does not change.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::WasiCtx;

use super::AgentState;
use super::agent_log::AgentLog;
use super::episode::{EpisodeState, TaskInfoRecord, ValidationPolicy};
use super::exec::{ExecState, ScriptRunner};
use super::files::WorkspaceFiles;
use super::http::HttpState;
use super::limiter::MemoryLimiter;
use super::llm::LlmState;
use super::observed::Observed;
use super::recorder::Recorder;
use crate::limits::Limits;
use crate::llm::LlmSource;
use crate::network::Tally;
use crate::sandbox::egress::proxy::Resolver;

/// What an agent's state is built from.
pub struct Parts<'a> {
    /// The limits the episode runs under.
    pub limits: &'a Limits,
    /// The seed of the agent's randomness.
    pub seed: u64,
    /// Where the agent's stdout and stderr go.
    pub log: &'a AgentLog,
    /// The shared recorder (its first snapshot taken, or a replay attached).
    pub recorder: Recorder,
    /// The episode's workspace files.
    pub files: WorkspaceFiles,
    /// Where the agent's scripts run.
    pub scripts: ScriptRunner,
    /// The task as the agent is told it.
    pub task: TaskInfoRecord,
    /// How validate() scores, where the task allows it.
    pub validation: Option<ValidationPolicy>,
    /// The model the llm interface calls.
    pub llm: LlmSource,
    /// The one tally of network use the episode's proxy also counts in, and
    /// the resolver for the agent's own requests (or why there is none).
    pub network: (Arc<Tally>, Result<Resolver, String>),
}

impl AgentState {
    /// Every interface's state from `parts`.
    pub fn new(parts: Parts<'_>) -> Self {
        let Parts {
            limits,
            seed,
            log,
            recorder,
            files,
            scripts,
            task,
            validation,
            llm,
            network: (tally, resolver),
        } = parts;
        let mut exec = ExecState::new(scripts);
        exec.remember_read_only(&files, &recorder);
        let mut episode = EpisodeState::new(task);
        if let Some(policy) = validation {
            episode.allow_validation(policy);
        }
        Self {
            wasi: wasi_context(log, seed, &recorder.observed),
            table: ResourceTable::new(),
            memory: MemoryLimiter::new(limits.agent_memory_bytes),
            http: HttpState::new(limits, &recorder, tally, resolver),
            llm: LlmState::new(llm, limits),
            recorder,
            files,
            exec,
            episode,
        }
    }
}

/// The agent's WASI: stdout and stderr into agent.log, randomness seeded
/// from the episode's seed, clocks and random bytes recorded (`observed`),
/// no sockets, files or environment.
fn wasi_context(log: &AgentLog, seed: u64, observed: &Observed) -> WasiCtx {
    use rand::SeedableRng;
    let mut builder = WasiCtx::builder();
    builder
        .stdout(log.clone())
        .stderr(log.clone())
        .secure_random(observed.rng(rand::rngs::StdRng::seed_from_u64(seed)))
        .insecure_random(observed.rng(rand::rngs::StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15)))
        .wall_clock(observed.wall_clock())
        .monotonic_clock(observed.monotonic_clock())
        .insecure_random_seed(u128::from(seed) << 64 | u128::from(seed))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    builder.build()
}
