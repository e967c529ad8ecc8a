//! Why an episode ended: the agent's own return, a trap, one of its
//! limits, the user, or the host.

use serde::Serialize;

use crate::capability::recorder::{EndEpisode, Stop};

/// Why an episode ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndReason {
    /// The agent returned its answer.
    Completed,
    /// The agent returned an error of its own.
    AgentError,
    /// The agent trapped (a bug in the agent).
    Trap,
    /// The agent tried to use more memory than its limit.
    MemoryLimit,
    /// The wall-clock deadline passed.
    Timeout,
    /// The agent spent its step budget.
    StepBudget,
    /// The user interrupted the run.
    Interrupted,
    /// The host failed (disk full, sandbox broken): not the agent's fault.
    HostError,
    /// Under `--llm replay:`, the agent asked what the recording never did.
    ReplayDiverged,
    /// The agent filled the run record's byte budget: the trace's, or its
    /// workspace snapshots'.
    TraceLimit,
}

impl EndReason {
    /// The reason as records spell it (`step-budget`, `host killed` is not one).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    }
}

impl From<Stop> for EndReason {
    fn from(stop: Stop) -> Self {
        match stop {
            Stop::StepBudget => Self::StepBudget,
            Stop::TraceLimit => Self::TraceLimit,
            Stop::ReplayDiverged => Self::ReplayDiverged,
            Stop::Timeout => Self::Timeout,
            Stop::HostFault => Self::HostError,
            Stop::Interrupted => Self::Interrupted,
        }
    }
}

impl EndReason {
    /// The stop a replay raises where the recorded episode ended for this
    /// reason with no call left to answer; `None` for an agent's own end.
    pub fn stop(self) -> Option<Stop> {
        match self {
            Self::StepBudget => Some(Stop::StepBudget),
            Self::TraceLimit => Some(Stop::TraceLimit),
            Self::Timeout => Some(Stop::Timeout),
            Self::HostError => Some(Stop::HostFault),
            Self::Interrupted => Some(Stop::Interrupted),
            Self::Completed | Self::AgentError | Self::Trap | Self::MemoryLimit | Self::ReplayDiverged => None,
        }
    }
}

pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// Why a trapped agent stopped: a host request to end, its memory limit, or
/// a fault in the agent.
pub fn classify_trap(error: &wasmtime::Error, memory_denied: bool) -> (EndReason, String) {
    if let Some(end) = error.downcast_ref::<EndEpisode>() {
        return (end.stop.into(), end.detail.clone());
    }
    let text = format!("{error:#}");
    if memory_denied {
        return (
            EndReason::MemoryLimit,
            format!("the agent ran out of its memory limit: {}", first_line(&text)),
        );
    }
    let cause = error
        .downcast_ref::<wasmtime::Trap>()
        .map(|trap| trap_in_words(*trap))
        .unwrap_or_else(|| first_line(&text).to_string());
    let context: Vec<&str> = text.lines().skip(1).take(2).map(str::trim).collect();
    let detail = if context.is_empty() {
        format!("the agent trapped: {cause}; its own output is in agent.log")
    } else {
        format!(
            "the agent trapped: {cause}; its own output is in agent.log ({})",
            context.join(" | ")
        )
    };
    (EndReason::Trap, detail)
}

/// What a WebAssembly trap means for someone who wrote the agent.
fn trap_in_words(trap: wasmtime::Trap) -> String {
    use wasmtime::Trap as T;
    match trap {
        T::UnreachableCodeReached => {
            "it reached an `unreachable` instruction, which is how a Rust panic, a C abort() or an uncaught Python exception ends".into()
        }
        T::StackOverflow => "it overflowed its call stack (runaway recursion)".into(),
        T::MemoryOutOfBounds => "it read or wrote memory outside its own (a bug in the agent or its runtime)".into(),
        T::IntegerDivisionByZero => "it divided an integer by zero".into(),
        T::IntegerOverflow => "an integer operation overflowed".into(),
        T::BadConversionToInteger => "it converted a NaN or out-of-range float to an integer".into(),
        T::IndirectCallToNull | T::BadSignature | T::TableOutOfBounds => {
            "it called a function through a bad pointer".into()
        }
        T::AllocationTooLarge => "it asked for an allocation larger than allowed".into(),
        T::InvalidChar => "it passed an invalid character to the host".into(),
        other => format!("a WebAssembly trap: {other}"),
    }
}
