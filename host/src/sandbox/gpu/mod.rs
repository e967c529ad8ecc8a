//! GPUs: the pool a host hands out and the leases that give an episode
//! specific devices (`pool`), what the driver says of the devices
//! (`inventory`), and how the local sandbox passes leased devices through
//! to a command (`passthrough`; Docker's runtime does this for containers),
//! and what a GPU script sees there (`probe`).

mod inventory;
mod passthrough;
mod pool;
pub mod probe;

pub use inventory::{Device, Inventory};
pub use passthrough::{GpuHost, Passthrough};
pub use pool::{GpuLease, GpuPool};
