//! How an episode is recorded: the event trace and workspace snapshots.
//! Shared by the capabilities that write them and the episode that owns them.

pub mod snapshot;
pub mod trace;
