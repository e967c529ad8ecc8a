//! A task folder's content hash: what provenance binds an episode to, and
//! what versions an MLAgentBench folder. Each file's hash is kept (in the
//! cache, by path, size, modification and change time and inode), so a
//! second hash of a multi-GiB folder reads only what changed.

use std::path::Path;

use anyhow::Result;

/// The blake3 (hex) of the files under `subs` of `root` (`""` for all of
/// it), in path order: each file's path, size and (up to `hashed_bytes`
/// long) content. Links are not followed; `skip` leaves out paths (relative
/// to `root`) that are not content.
pub fn hash_folder(root: &Path, subs: &[&str], hashed_bytes: u64, skip: impl Fn(&Path) -> bool) -> Result<String> {
    let cache = FileHashes::path(root, subs);
    let mut known = FileHashes::load(&cache);
    let mut fresh = FileHashes::default();
    let mut hasher = blake3::Hasher::new();
    for sub in subs {
        let mut entries: Vec<_> = walkdir::WalkDir::new(root.join(sub))
            .follow_links(false)
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file())
            .filter(|e| !skip(e.path().strip_prefix(root).unwrap_or(e.path())))
            .collect();
        entries.sort_by(|a, b| a.path().cmp(b.path()));
        for entry in entries {
            let rel = entry
                .path()
                .strip_prefix(root)
                .unwrap_or(entry.path())
                .to_string_lossy()
                .into_owned();
            hasher.update(rel.as_bytes());
            hasher.update(b"\0");
            let Ok(meta) = entry.metadata() else { continue };
            hasher.update(&meta.len().to_le_bytes());
            if meta.len() <= hashed_bytes {
                let key = StatKey::of(&meta);
                let hash = match known.files.remove(&rel).filter(|(k, _)| *k == key) {
                    Some((_, hash)) => hash,
                    None => file_hash(entry.path()),
                };
                hasher.update(hash.as_bytes());
                fresh.files.insert(rel, (key, hash));
            }
        }
    }
    fresh.store(&cache);
    Ok(hasher.finalize().to_hex().to_string())
}

/// A file's blake3, read as a stream (a large file never sits in memory).
fn file_hash(path: &Path) -> String {
    let mut hasher = blake3::Hasher::new();
    if let Ok(file) = std::fs::File::open(path) {
        let _ = hasher.update_reader(file);
    }
    hasher.finalize().to_hex().to_string()
}

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct StatKey {
    size: u64,
    mtime_ns: i128,
    /// The change time, which no one can set back: a rewrite that keeps
    /// size and modification time still shows here.
    ctime_ns: i128,
    inode: u64,
}

impl StatKey {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            size: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            inode: meta.ino(),
        }
    }
}

/// The hashes of a folder's files, as last computed.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct FileHashes {
    files: std::collections::HashMap<String, (StatKey, String)>,
}

impl FileHashes {
    /// Where the hashes of `subs` of `root` are kept.
    fn path(root: &Path, subs: &[&str]) -> std::path::PathBuf {
        let mut key = blake3::Hasher::new();
        key.update(root.as_os_str().as_encoded_bytes());
        for sub in subs {
            key.update(b"\0");
            key.update(sub.as_bytes());
        }
        crate::paths::cache_dir()
            .join("task-hashes")
            .join(format!("{}.json", &key.finalize().to_hex()[..24]))
    }

    fn load(path: &Path) -> Self {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Kept for the next load; a cache that cannot be written only costs time.
    fn store(&self, path: &Path) {
        let Some(dir) = path.parent() else { return };
        let written = std::fs::create_dir_all(dir).and_then(|()| {
            let tmp = tempfile::NamedTempFile::new_in(dir)?;
            serde_json::to_writer(&tmp, self)?;
            tmp.persist(path).map(|_| ()).map_err(|e| e.error)
        });
        if let Err(error) = written {
            tracing::debug!(%error, "keeping a task folder's file hashes");
        }
    }
}
