//! mlrb: a capability-secure host that benchmarks AI research agents.
//!
//! Dependencies point one way (see `docs/architecture.md`):
//! `cli → {bench, report, view} → episode → {capability, sandbox, task,
//! llm, record} → {engine, paths, limits, relpath, stats, format}`.

#![warn(missing_docs)]

pub mod agent_build;
pub mod agent_check;
pub mod bench;
pub mod capability;
pub mod cli;
pub mod cluster;
pub mod columns;
pub mod doctor;
pub mod engine;
pub mod episode;
pub mod format;
pub mod http_server;
pub mod limits;
pub mod llm;
pub mod network;
pub mod paths;
pub mod process;
pub mod record;
pub mod relpath;
pub mod report;
pub mod sandbox;
pub mod stats;
pub mod submissions;
pub mod task;
pub mod view;
