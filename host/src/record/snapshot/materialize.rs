//! Rebuilding a snapshot's files in a folder: read-only hard links, or
//! copies of their own, and only the links that stay inside.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use crate::record::snapshot::links::{direct_link, resolve_link};
use crate::record::snapshot::manifest::{Manifest, ManifestEntry};
use crate::record::snapshot::reader::ObjectReader;
use crate::record::walk::DirHandle;

/// Rebuilds the files of `manifest` under `dest` (created if missing),
/// leaving out every symbolic link that does not resolve inside the
/// workspace ([`resolve_link`]) and writing each other one as the direct
/// path to where it leads, through plain folders only: an evaluator mounted
/// next to hidden answers must never follow the agent's link to them. Files
/// are hard links into the object store where possible (packed ones are
/// copies): callers must treat the result as read-only. Every entry
/// is created beneath `dest` by handle, so no link in the result is ever
/// followed while it is built.
pub fn materialize_contained(snapshot_dir: &Path, manifest: &Manifest, dest: &Path) -> Result<()> {
    materialize(snapshot_dir, manifest, dest, false)
}

/// [`materialize_contained`] with every file a copy of its own (sparse
/// where the object is): a workspace an agent goes on to change (a fork).
pub fn materialize_writable(snapshot_dir: &Path, manifest: &Manifest, dest: &Path) -> Result<()> {
    materialize(snapshot_dir, manifest, dest, true)
}

fn materialize(snapshot_dir: &Path, manifest: &Manifest, dest: &Path, copy: bool) -> Result<()> {
    let objects = ObjectReader::open(snapshot_dir)?;
    fs::create_dir_all(dest)?;
    let root = DirHandle::open_root(dest)?;
    let mut parent: Option<(String, DirHandle)> = None;
    for (rel, entry) in &manifest.entries {
        let (dir_rel, name) = rel.rsplit_once('/').unwrap_or(("", rel.as_str()));
        if parent.as_ref().is_none_or(|(p, _)| p != dir_rel) {
            let dir = root
                .descend(dir_rel)
                .with_context(|| format!("restoring {rel}: its folder is missing"))?;
            parent = Some((dir_rel.to_string(), dir));
        }
        let Some((_, dir)) = &parent else { continue };
        match entry {
            ManifestEntry::Dir => {
                dir.create_dir(name.as_bytes())
                    .with_context(|| format!("restoring folder {rel}"))?;
            }
            ManifestEntry::Symlink { target } => match resolve_link(&manifest.entries, rel, target) {
                Some(resolved) => dir
                    .symlink(&direct_link(rel, &resolved), name.as_bytes())
                    .with_context(|| format!("restoring link {rel}"))?,
                None => {
                    tracing::warn!(path = %rel, %target, "left out a symbolic link that does not resolve inside the workspace")
                }
            },
            ManifestEntry::File { hash, executable, .. } => {
                objects
                    .restore(hash, dir, name, *executable, copy)
                    .with_context(|| format!("restoring {rel} from object {hash}"))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::snapshot::fixtures::{store, take};

    #[test]
    fn links_that_leave_the_workspace_are_left_out() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        fs::write(ws.join("data.csv"), "x").unwrap();
        std::os::unix::fs::symlink("data.csv", ws.join("inside")).unwrap();
        std::os::unix::fs::symlink("/hidden/answers.csv", ws.join("submission.csv")).unwrap();
        let mut store = store(tmp.path());
        let manifest = take(&mut store, &ws, "s");
        let out = tmp.path().join("out");
        materialize_contained(&tmp.path().join("snap"), &manifest, &out).unwrap();
        assert!(out.join("inside").symlink_metadata().is_ok());
        assert!(out.join("submission.csv").symlink_metadata().is_err());
    }
}
