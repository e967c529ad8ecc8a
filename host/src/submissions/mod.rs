//! Submissions from strangers: the published benchmarks they are ranked
//! on (`benchmark`), the service's database (`store`: submitters and their
//! hashed tokens, submissions and their states, an append-only audit log),
//! the quotas every submission that started counts against (`quota`) and
//! the leaderboard (`leaderboard`: a version's submissions ranked, and
//! their page), beside people's runs the organisers added as references
//! (`reference`).

pub mod accounts;
pub mod audit;
pub mod benchmark;
pub mod client;
pub mod leaderboard;
pub mod names;
pub mod quota;
pub mod reference;
pub mod service;
pub mod store;
pub mod submission;
pub mod verdict;

pub use accounts::{Submitter, Token};
pub use benchmark::Benchmark;
pub use quota::Quota;
pub use store::Store;
pub use submission::{State, Submission};

#[cfg(test)]
mod tests;
