//! The labels on every container mlrb makes, by which `mlrb gc` finds
//! what a killed host left behind.

/// Label on everything mlrb creates.
pub const LABEL_MANAGED: &str = "mlrb.managed";
/// The episode (or task step) a container serves.
pub const LABEL_EPISODE: &str = "mlrb.episode";
/// The host process that made it (pid and start time, `process::current_token`):
/// gone means the container is stale.
pub const LABEL_HOST: &str = "mlrb.host";
