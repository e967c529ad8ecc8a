//! Prepared data sealed read-only once published: every later episode
//! shares them, so nothing may change them; and unsealed to be removed.

use std::path::Path;

use anyhow::{Context, Result};

/// Seals `staging` (shared by every later episode: nothing may change it
/// from here on) and moves it to `dir`, unless another host got there
/// first, whose copy is then kept.
pub fn publish(staging: tempfile::TempDir, dir: &Path) -> Result<()> {
    seal(staging.path())?;
    let staged = staging.keep();
    match std::fs::rename(&staged, dir) {
        Ok(()) => Ok(()),
        Err(_) if dir.join("complete").is_file() => {
            let _ = unseal(&staged);
            let _ = std::fs::remove_dir_all(&staged);
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("storing {}", dir.display())),
    }
}

/// Makes prepared data read-only for everyone and the host's own.
pub fn seal(dir: &Path) -> Result<()> {
    let handle = crate::record::walk::DirHandle::open_root(dir)?;
    crate::record::walk::seal_tree(&handle).with_context(|| format!("making {} read-only", dir.display()))
}

/// Makes sealed data removable again (by its owner).
pub fn unseal(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for entry in walkdir::WalkDir::new(dir).follow_links(false) {
        let entry = entry?;
        if entry.file_type().is_dir() {
            std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}
