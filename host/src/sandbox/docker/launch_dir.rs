//! The folder a container shares with this host: where the episode's
//! launcher connects, and the container's lifeline, with the process in
//! the container that waits on it.

use anyhow::{Context, Result};

/// Where a container sees the folder in which this host listens for the
/// episode's launcher and holds the container's lifeline (read-only).
pub const LAUNCH_DIR: &str = "/run/mlrb";
/// The lifeline's name in [`LAUNCH_DIR`]: a Unix socket this host listens
/// on (and never accepts from). The container's main process connects and
/// waits; the host's end closes with the host, however it ends, and the
/// container stops moments later instead of at the end of its lifetime.
pub const LIFELINE: &str = "host";
/// The container's main process: waits on the lifeline until it breaks.
pub const WATCH: &str = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ntry:\n    s.recv(1)\nexcept OSError:\n    pass\n";

/// A folder only this host may change, for the launcher's socket, with
/// the container's lifeline in it: a socket only this host listens on.
pub fn launch_dir() -> Result<(tempfile::TempDir, std::os::unix::net::UnixListener)> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("mlrb-launch-")
        .tempdir()
        .context("making a folder for the launcher's socket")?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .context("opening the launcher's folder")?;
    let path = dir.path().join(LIFELINE);
    let lifeline = std::os::unix::net::UnixListener::bind(&path)
        .with_context(|| format!("making the container's lifeline {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
        .with_context(|| format!("opening {} to the container", path.display()))?;
    Ok((dir, lifeline))
}
