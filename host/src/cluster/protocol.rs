//! What workers and `mlrb serve` say to each other: JSON over HTTP under
//! `/v1`, every request carrying the run's bearer token; an episode's
//! result goes up as one tar archive whose blake3 the worker states.

use serde::{Deserialize, Serialize};

use crate::bench::Plan;
use crate::bench::queue::{Counts, Lease, Reported};

/// The header naming the lease an upload reports under.
pub const LEASE_HEADER: &str = "x-mlrb-lease";
/// The header naming the episode an upload is the result of.
pub const EPISODE_HEADER: &str = "x-mlrb-episode";
/// The header with the blake3 (hex) of an upload's body.
pub const HASH_HEADER: &str = "x-mlrb-blake3";
/// With a shared filesystem: the episode's folder, already written under
/// the run's `cluster/work/`, relative to the run directory.
pub const STAGED_HEADER: &str = "x-mlrb-staged";

/// `GET /v1/run`: what a worker needs to run the run's episodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    /// The run's name (its directory's).
    pub run: String,
    /// The plan; agents are fetched by index from `/v1/agents/<i>`.
    pub plan: Plan,
    /// The agents' components, in the plan's order.
    pub agents: Vec<AgentFile>,
    /// A lease's life without a heartbeat, in ms.
    pub lease_ms: u64,
    /// The largest upload accepted, in bytes.
    pub max_upload: u64,
    /// The run directory, when every node mounts it at this path
    /// (`shared_filesystem`): workers write episodes beneath it and upload
    /// only their results.
    #[serde(default)]
    pub shared_run_dir: Option<std::path::PathBuf>,
}

/// One agent component as served.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentFile {
    /// The name its results go by.
    pub name: String,
    /// The blake3 of the component (hex).
    pub blake3: String,
    /// Its size in bytes.
    pub bytes: u64,
}

/// `POST /v1/lease`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseRequest {
    /// Who asks (host, job, process), kept with the lease.
    pub worker: String,
}

/// The answer to a lease request: an episode, or none and the counts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseAnswer {
    /// The episode leased, if one was waiting.
    pub lease: Option<Lease>,
    /// The queue's counts, when nothing was leased.
    pub counts: Option<Counts>,
    /// Set when a stopped worker suspended the episode leased: the last
    /// step its records hold. Fetch them (`GET /v1/partial`) and go on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<u32>,
}

/// `POST /v1/renew` and `/v1/release`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenRequest {
    /// The lease's token.
    pub token: String,
}

/// The answer to an upload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportAnswer {
    /// Recorded, or a duplicate of the recorded result.
    pub reported: Reported,
}

/// Every refusal's body: why, in one line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refusal {
    /// What was wrong and what would fix it.
    pub error: String,
}
