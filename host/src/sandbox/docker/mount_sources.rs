//! The host side of a container's bind mounts: sources the sandbox user
//! can read, and write where the mount is writable.

use anyhow::{Context, Result};

use super::users::SANDBOX_UID;
use crate::sandbox::Mount;

/// Bind sources must be readable by the sandbox user; a root host hands the
/// writable ones (the workspace) to that user. The walk opens every entry
/// beneath its parent and never follows a link, so no file outside the
/// mount (a shared cache, the host's own) changes owner.
pub fn prepare_mount_sources(mounts: &[Mount]) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    for mount in mounts.iter().filter(|m| m.writable) {
        let root = crate::record::walk::DirHandle::open_root(&mount.host)
            .with_context(|| format!("opening {}", mount.host.display()))?;
        crate::record::walk::chown_tree(&root, SANDBOX_UID, SANDBOX_UID)
            .with_context(|| format!("handing {} to the sandbox user", mount.host.display()))?;
    }
    Ok(())
}
