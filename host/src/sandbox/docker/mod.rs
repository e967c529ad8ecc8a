//! The Docker sandbox, through bollard: one container per episode, each
//! script an exec in it; prepare and evaluation in fresh containers of
//! their own. Containers carry labels naming the episode and the host
//! process, so `mlrb gc` can find what a killed host left behind.

mod cgroup_procs;
mod container;
mod container_config;
mod direct;
pub(super) mod engine;
mod episode;
mod episode_sandbox;
mod execs;
mod gc;
mod kill;
mod labels;
mod launch_dir;
mod launched;
mod mount_sources;
mod oom;
mod sandbox;
mod users;

pub use container_config::container_body;
pub use engine::connect;
pub use episode::DockerEpisode;
pub use gc::gc;
pub use labels::{LABEL_EPISODE, LABEL_HOST, LABEL_MANAGED};
pub use sandbox::DockerSandbox;
