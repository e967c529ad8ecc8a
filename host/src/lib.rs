//! mlrb: a capability-secure host that benchmarks AI research agents.
//!
//! Dependencies point one way:
//! `cli → episode → {capability, sandbox, task} → {record, engine}`.

pub mod agent_build;
pub mod agent_check;
pub mod bench;
pub mod capability;
pub mod cli;
pub mod engine;
pub mod episode;
pub mod llm;
pub mod paths;
pub mod record;
pub mod report;
pub mod sandbox;
pub mod task;
pub mod view;
