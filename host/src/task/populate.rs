//! Making a fresh workspace: the task's `env/` plus the public prepared
//! files, and the reference solution laid over a workspace.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};

use super::{Prepared, Task};

/// Fills `dest` (created, must be new) from the task's env/ and the public
/// side of its prepared data. Everything is copied (sparse files stay
/// sparse), never hard-linked: a file of the shared prepare cache must never
/// be an inode an episode can change, chown or chmod.
pub fn populate(task: &Task, prepared: &Prepared, dest: &Path) -> Result<()> {
    if dest.exists() {
        bail!("{}: a workspace already exists here", dest.display());
    }
    fs::create_dir_all(dest)?;
    if !prepared.includes_env {
        copy_tree(&task.env_dir(), dest)?;
    }
    let public = &prepared.public;
    if public.is_dir() {
        copy_tree(public, dest)?;
    }
    Ok(())
}

/// Lays the task's reference solution (`scripts/reference/`) over a
/// workspace, replacing the files it provides.
pub fn apply_reference(task: &Task, dest: &Path) -> Result<()> {
    let reference = task.reference_dir();
    for entry in walkdir::WalkDir::new(&reference).min_depth(1).follow_links(false) {
        let entry = entry?;
        let target = dest.join(entry.path().strip_prefix(&reference)?);
        if entry.file_type().is_dir() {
            fs::create_dir_all(&target)?;
        } else if entry.file_type().is_file() {
            if target.symlink_metadata().is_ok() {
                fs::remove_file(&target)?;
            }
            fs::copy(entry.path(), &target).with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Copies a folder tree into `to` (symlinks as symlinks, sparse files
/// sparse); a path both sides have is an error.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    // Made first: a tree whose first entry is a file has no folder to make it.
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in walkdir::WalkDir::new(from).min_depth(1).follow_links(false) {
        let entry = entry?;
        let rel = entry.path().strip_prefix(from)?;
        let rel_text = rel.to_string_lossy();
        let target = to.join(rel);
        let file_type = entry.file_type();
        if file_type.is_dir() {
            fs::create_dir_all(&target)?;
        } else if target.symlink_metadata().is_ok() {
            bail!(
                "{}: the prepared data and env/ both provide `{rel_text}`",
                from.display()
            );
        } else if file_type.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(entry.path())?, &target)?;
        } else if file_type.is_file() {
            copy_file(entry.path(), &target)
                .with_context(|| format!("copying {} into the workspace", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Copies one file (its permission bits too), keeping holes.
fn copy_file(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let source = fs::File::open(from)?;
    let mode = source.metadata()?.permissions().mode() & 0o777;
    let out = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode | 0o200)
        .open(to)?;
    crate::record::walk::copy_sparse(&source, &out)?;
    Ok(())
}
