//! Content-addressed workspace snapshots.
//!
//! `snapshots/objects/<blake3>` holds each distinct file content once;
//! `snapshots/manifests/<id>.json` lists every path of one snapshot with its
//! hash. A file whose size, mtime, inode and ctime are unchanged since the
//! last snapshot is not read again, so a step costs what it changed, not the
//! size of the workspace.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ManifestEntry {
    File { hash: String, size: u64, executable: bool },
    Dir,
    Symlink { target: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub id: u64,
    pub label: String,
    pub entries: BTreeMap<String, ManifestEntry>,
}

impl Manifest {
    pub fn total_file_bytes(&self) -> u64 {
        self.entries
            .values()
            .map(|e| match e {
                ManifestEntry::File { size, .. } => *size,
                _ => 0,
            })
            .sum()
    }
}

/// What identifies an unchanged file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StatKey {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    ino: u64,
    dev: u64,
}

impl StatKey {
    fn of(meta: &fs::Metadata) -> Self {
        Self {
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }
}

pub struct SnapshotStore {
    objects: PathBuf,
    manifests: PathBuf,
    known: HashMap<String, (StatKey, String)>,
    next_id: u64,
    last: Option<Manifest>,
}

impl SnapshotStore {
    pub fn create(dir: &Path) -> Result<Self> {
        let objects = dir.join("objects");
        let manifests = dir.join("manifests");
        fs::create_dir_all(&objects)?;
        fs::create_dir_all(&manifests)?;
        Ok(Self {
            objects,
            manifests,
            known: HashMap::new(),
            next_id: 0,
            last: None,
        })
    }

    pub fn objects_dir(&self) -> &Path {
        &self.objects
    }

    pub fn last(&self) -> Option<&Manifest> {
        self.last.as_ref()
    }

    /// Records the current state of `root`. Returns `None` when nothing
    /// changed since the last snapshot (no new manifest is written).
    pub fn snapshot(
        &mut self,
        root: &Path,
        label: &str,
        read_only: &dyn Fn(&str) -> bool,
    ) -> Result<Option<&Manifest>> {
        let mut entries = BTreeMap::new();
        let mut seen = HashMap::with_capacity(self.known.len());
        for entry in walkdir::WalkDir::new(root)
            .follow_links(false)
            .min_depth(1)
            .sort_by_file_name()
        {
            let entry = entry.with_context(|| format!("walking {}", root.display()))?;
            let rel = entry.path().strip_prefix(root)?.to_string_lossy().into_owned();
            let file_type = entry.file_type();
            if file_type.is_dir() {
                entries.insert(rel, ManifestEntry::Dir);
            } else if file_type.is_symlink() {
                let target = fs::read_link(entry.path())?.to_string_lossy().into_owned();
                entries.insert(rel, ManifestEntry::Symlink { target });
            } else if file_type.is_file() {
                let meta = entry.metadata()?;
                let key = StatKey::of(&meta);
                let hash = match self.known.get(&rel) {
                    Some((known, hash)) if *known == key => hash.clone(),
                    _ => self.store_object(entry.path(), read_only(&rel))?,
                };
                entries.insert(
                    rel.clone(),
                    ManifestEntry::File {
                        hash: hash.clone(),
                        size: key.size,
                        executable: meta.permissions().mode() & 0o111 != 0,
                    },
                );
                seen.insert(rel, (key, hash));
            }
            // Sockets, fifos and devices are not workspace content.
        }
        self.known = seen;
        if self.last.as_ref().is_some_and(|m| m.entries == entries) {
            return Ok(None);
        }
        let manifest = Manifest {
            id: self.next_id,
            label: label.to_string(),
            entries,
        };
        self.next_id += 1;
        let path = self.manifests.join(format!("{:06}.json", manifest.id));
        let mut file = fs::File::create(&path)?;
        serde_json::to_writer(&mut file, &manifest)?;
        file.write_all(b"\n")?;
        self.last = Some(manifest);
        Ok(self.last.as_ref())
    }

    /// Hashes a file and stores its content if this is the first time.
    /// Read-only files are hard-linked (they cannot change); others copied.
    fn store_object(&self, path: &Path, read_only: bool) -> Result<String> {
        let mut hasher = blake3::Hasher::new();
        hasher
            .update_mmap(path)
            .with_context(|| format!("hashing {}", path.display()))?;
        let hash = hasher.finalize().to_hex().to_string();
        let object = self.objects.join(&hash);
        if !object.exists() {
            let linked = read_only && fs::hard_link(path, &object).is_ok();
            if !linked {
                let tmp = self.objects.join(format!(".tmp-{hash}"));
                fs::copy(path, &tmp).with_context(|| format!("copying {} into the snapshot store", path.display()))?;
                fs::set_permissions(&tmp, fs::Permissions::from_mode(0o444))?;
                fs::rename(&tmp, &object)?;
            }
        }
        Ok(hash)
    }
}

/// The manifest `id` of an episode's snapshot directory.
pub fn read_manifest(dir: &Path, id: u64) -> Result<Manifest> {
    let path = dir.join("manifests").join(format!("{id:06}.json"));
    let text = fs::read_to_string(&path).with_context(|| format!("{}: no such snapshot", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: malformed manifest", path.display()))
}

/// Every manifest of an episode's snapshot directory, in order.
pub fn all_manifests(dir: &Path) -> Result<Vec<Manifest>> {
    let manifests = dir.join("manifests");
    let mut names: Vec<_> = fs::read_dir(&manifests)
        .with_context(|| format!("{}: no snapshots here", manifests.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|path| {
            let text = fs::read_to_string(path)?;
            serde_json::from_str(&text).with_context(|| format!("{}: malformed manifest", path.display()))
        })
        .collect()
}

/// The manifest with the highest id in an episode's snapshot directory.
pub fn latest_manifest(dir: &Path) -> Result<Manifest> {
    let manifests = dir.join("manifests");
    let mut names: Vec<_> = fs::read_dir(&manifests)
        .with_context(|| format!("{}: no snapshots here", manifests.display()))?
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    names.sort();
    let last = names
        .last()
        .with_context(|| format!("{}: no snapshot manifest", manifests.display()))?;
    let text = fs::read_to_string(manifests.join(last))?;
    serde_json::from_str(&text).with_context(|| format!("{}: malformed manifest", manifests.join(last).display()))
}

/// Rebuilds the files of `manifest` under `dest` (which must not exist).
/// Files are hard links into the object store where possible: callers must
/// treat the result as read-only.
pub fn materialize(snapshot_dir: &Path, manifest: &Manifest, dest: &Path) -> Result<()> {
    materialize_with(snapshot_dir, manifest, dest, &|_, _| true)
}

/// Like [`materialize`], but leaves out every symbolic link that is absolute
/// or climbs out of its workspace: an evaluator mounted next to hidden
/// answers must never follow the agent's link to them.
pub fn materialize_contained(snapshot_dir: &Path, manifest: &Manifest, dest: &Path) -> Result<()> {
    materialize_with(snapshot_dir, manifest, dest, &|rel, link| link_stays_inside(rel, link))
}

/// Whether a link at `rel` (workspace-relative) pointing to `link` resolves
/// inside the workspace, judged lexically (every link is judged, so chains
/// of links are covered too).
pub fn link_stays_inside(rel: &str, link: &Path) -> bool {
    if link.is_absolute() {
        return false;
    }
    let mut depth: i64 = rel.split('/').filter(|p| !p.is_empty()).count() as i64 - 1;
    for part in link.components() {
        match part {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::CurDir => {}
            _ => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

fn materialize_with(
    snapshot_dir: &Path,
    manifest: &Manifest,
    dest: &Path,
    keep_link: &dyn Fn(&str, &Path) -> bool,
) -> Result<()> {
    let objects = snapshot_dir.join("objects");
    fs::create_dir_all(dest)?;
    for (rel, entry) in &manifest.entries {
        let target = dest.join(rel);
        match entry {
            ManifestEntry::Dir => fs::create_dir_all(&target)?,
            ManifestEntry::Symlink { target: link } if !keep_link(rel, Path::new(link)) => {
                tracing::warn!(path = %rel, target = %link, "left out a symbolic link that leaves the workspace");
            }
            ManifestEntry::Symlink { target: link } => {
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent)?;
                }
                std::os::unix::fs::symlink(link, &target)?;
            }
            ManifestEntry::File { hash, .. } => {
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent)?;
                }
                let object = objects.join(hash);
                if fs::hard_link(&object, &target).is_err() {
                    fs::copy(&object, &target).with_context(|| format!("restoring {rel} from {}", object.display()))?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_that_leave_the_workspace_are_recognised() {
        assert!(link_stays_inside("a", Path::new("b")));
        assert!(link_stays_inside("d/a", Path::new("../b")));
        assert!(link_stays_inside("d/e/a", Path::new("./../../b")));
        assert!(!link_stays_inside("a", Path::new("../b")));
        assert!(!link_stays_inside("d/a", Path::new("../../hidden/answers.csv")));
        assert!(!link_stays_inside("d/a", Path::new("x/../../../b")));
        assert!(!link_stays_inside("a", Path::new("/hidden/answers.csv")));

        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        fs::write(ws.join("data.csv"), "x").unwrap();
        std::os::unix::fs::symlink("data.csv", ws.join("inside")).unwrap();
        std::os::unix::fs::symlink("/hidden/answers.csv", ws.join("submission.csv")).unwrap();
        let mut store = SnapshotStore::create(&tmp.path().join("snap")).unwrap();
        let manifest = store.snapshot(&ws, "s", &|_: &str| false).unwrap().unwrap().clone();
        let out = tmp.path().join("out");
        materialize_contained(&tmp.path().join("snap"), &manifest, &out).unwrap();
        assert!(out.join("inside").symlink_metadata().is_ok());
        assert!(out.join("submission.csv").symlink_metadata().is_err());
    }

    #[test]
    fn unchanged_files_are_not_stored_twice_and_changes_are_seen() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("a.txt"), "one").unwrap();
        fs::write(ws.join("d/b.txt"), "two").unwrap();
        let mut store = SnapshotStore::create(&tmp.path().join("snap")).unwrap();
        let never = |_: &str| false;
        let first = store.snapshot(&ws, "start", &never).unwrap().unwrap().clone();
        assert_eq!(first.entries.len(), 3);
        assert!(store.snapshot(&ws, "noop", &never).unwrap().is_none());
        fs::write(ws.join("a.txt"), "three").unwrap();
        let second = store.snapshot(&ws, "edit", &never).unwrap().unwrap().clone();
        assert_ne!(first.entries["a.txt"], second.entries["a.txt"]);
        assert_eq!(first.entries["d/b.txt"], second.entries["d/b.txt"]);
        let back = tmp.path().join("back");
        materialize(&tmp.path().join("snap"), &first, &back).unwrap();
        assert_eq!(fs::read_to_string(back.join("a.txt")).unwrap(), "one");
        assert_eq!(latest_manifest(&tmp.path().join("snap")).unwrap().id, second.id);
    }
}
