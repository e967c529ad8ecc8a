//! Making a fresh workspace: the task's `env/` plus the public prepared
//! files, and the reference solution laid over a workspace.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};

use super::{Prepared, Task};
use crate::capability::workspace::ReadOnlyFiles;

/// Fills `dest` (created, must be new) from the task's env/ and the public
/// side of its prepared data. Read-only public files are hard-linked from the
/// prepare cache where the filesystem allows (the sandbox mounts them
/// read-only, so they cannot change); everything else is copied.
pub fn populate(task: &Task, prepared: &Prepared, dest: &Path) -> Result<()> {
    if dest.exists() {
        bail!("{}: a workspace already exists here", dest.display());
    }
    fs::create_dir_all(dest)?;
    if !prepared.includes_env {
        copy_tree(&task.env_dir(), dest, &|_| false)?;
    }
    let public = &prepared.public;
    if public.is_dir() {
        let read_only = ReadOnlyFiles::scan(public, &task.spec.files.read_only)?;
        copy_tree(public, dest, &|rel| read_only.matches_path(rel))?;
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

/// Copies a folder tree into `to` (symlinks as symlinks), hard-linking the
/// files `link` names where the filesystem allows; a path both sides have
/// is an error.
pub(crate) fn copy_tree(from: &Path, to: &Path, link: &dyn Fn(&str) -> bool) -> Result<()> {
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
        } else if file_type.is_file() && !(link(&rel_text) && fs::hard_link(entry.path(), &target).is_ok()) {
            fs::copy(entry.path(), &target)
                .with_context(|| format!("copying {} into the workspace", entry.path().display()))?;
        }
    }
    Ok(())
}
