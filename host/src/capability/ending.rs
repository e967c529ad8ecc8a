//! How a host call ends the episode: why (`Stop`), and the trap that
//! carries it out of the agent's call.

/// Why a host call ends the episode now (the episode names the ending).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The agent kept calling tools after its step budget was spent.
    StepBudget,
    /// The agent's calls filled the trace's byte budget.
    TraceLimit,
    /// Under `--llm replay:`, the agent asked what the recording never did.
    ReplayDiverged,
    /// The wall-clock deadline passed.
    Timeout,
    /// The host itself failed (disk full, sandbox broken).
    HostFault,
    /// The user interrupted the episode (only ever replayed).
    Interrupted,
}

/// A host call's request to end the episode now (raised as a trap).
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
pub struct EndEpisode {
    /// Why the episode ends.
    pub stop: Stop,
    /// What happened, in words.
    pub detail: String,
}

/// The trap that ends the episode for `stop`.
pub fn end(stop: Stop, detail: impl Into<String>) -> wasmtime::Error {
    wasmtime::Error::new(EndEpisode {
        stop,
        detail: detail.into(),
    })
}

/// The trap for a failure of the host's own (not the agent's).
pub fn host_fault(what: &str, error: impl std::fmt::Display) -> wasmtime::Error {
    end(Stop::HostFault, format!("{what}: {error}"))
}
