//! How an episode is recorded: the event trace and workspace snapshots,
//! and the walk that reads agent-writable trees without leaving them.
//! Shared by the capabilities that write them and the episode that owns them.

pub mod recording;
pub mod signature;
pub mod snapshot;
pub mod trace;
pub mod walk;
