//! Writing the content-addressed store: each file's content and each tree
//! once, under its blake3, through a temporary name.

use std::collections::HashSet;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::record::snapshot::tree::Tree;
use crate::record::walk::read_chunks;

/// The folders of file contents and trees, and the trees known written.
pub(super) struct Objects {
    /// One file per content, named by its blake3.
    pub(super) objects: PathBuf,
    /// One file per tree, named by its blake3.
    pub(super) trees: PathBuf,
    trees_stored: HashSet<String>,
    tmp_counter: u64,
    /// Files written since the last [`Objects::sync`].
    unsynced: Vec<PathBuf>,
}

/// Up to this many new files a snapshot syncs one by one; past it, the
/// whole filesystem at once (a first snapshot of a large workspace).
const SYNC_ONE_BY_ONE: usize = 64;

impl Objects {
    /// The objects and trees of the snapshot directory `dir`.
    pub(super) fn new(dir: &Path) -> Self {
        Self {
            objects: dir.join("objects"),
            trees: dir.join("trees"),
            trees_stored: HashSet::new(),
            tmp_counter: 0,
            unsynced: Vec::new(),
        }
    }

    /// Makes what was written since the last call durable, with the folder
    /// entries naming it (and `also`, the manifest just written): each file
    /// and folder synced when there are few, else one `syncfs` (which
    /// also flushes whatever else the filesystem holds dirty).
    pub(super) fn sync(&mut self, also: &Path) -> std::io::Result<()> {
        let files = std::mem::take(&mut self.unsynced);
        if files.len() > SYNC_ONE_BY_ONE {
            return rustix::fs::syncfs(fs::File::open(also)?).map_err(Into::into);
        }
        for file in files.iter().map(PathBuf::as_path).chain([also]) {
            fs::File::open(file)?.sync_data()?;
        }
        let dirs = [Some(self.objects.as_path()), Some(self.trees.as_path()), also.parent()];
        for dir in dirs.into_iter().flatten() {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Stores the content read from `file` (at most `limit` bytes) as an
    /// object; its hash and size, or `None` if it holds more than `limit`.
    pub(super) fn store_object(&mut self, file: &fs::File, limit: u64) -> Result<Option<(String, u64, u64)>> {
        use std::os::unix::fs::FileExt;
        self.tmp_counter += 1;
        let tmp = self
            .objects
            .join(format!(".tmp-{}-{}", std::process::id(), self.tmp_counter));
        let out = fs::File::create(&tmp)?;
        let mut hasher = blake3::Hasher::new();
        let mut offset = 0u64;
        let mut written = 0u64;
        // Chunks of zeros are skipped, not written: a sparse file's object stays sparse.
        let read = read_chunks(file, limit, |chunk| {
            hasher.update(chunk);
            if chunk.iter().any(|&b| b != 0) {
                out.write_all_at(chunk, offset)?;
                written += chunk.len() as u64;
            }
            offset += chunk.len() as u64;
            Ok(())
        })
        .and_then(|read| {
            out.set_len(offset)?;
            Ok(read)
        });
        let size = match read {
            Ok(Some(size)) => size,
            Ok(None) => {
                drop(out);
                let _ = fs::remove_file(&tmp);
                return Ok(None);
            }
            Err(e) => {
                drop(out);
                let _ = fs::remove_file(&tmp);
                return Err(e).context("reading a workspace file");
            }
        };
        drop(out);
        let hash = hasher.finalize().to_hex().to_string();
        let object = self.objects.join(&hash);
        if object.exists() {
            fs::remove_file(&tmp)?;
            return Ok(Some((hash, size, 0)));
        }
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o444))?;
        fs::rename(&tmp, &object)?;
        self.unsynced.push(object);
        Ok(Some((hash, size, written)))
    }

    /// Stores a tree (once) and returns its hash and the bytes written.
    pub(super) fn store_tree(&mut self, tree: &Tree) -> Result<(String, u64)> {
        let bytes = serde_json::to_vec(tree)?;
        let hash = blake3::hash(&bytes).to_hex().to_string();
        if self.trees_stored.contains(&hash) {
            return Ok((hash, 0));
        }
        let path = self.trees.join(&hash);
        let written = if path.exists() {
            0
        } else {
            write_new(&path, &[&bytes])?;
            self.unsynced.push(path);
            bytes.len() as u64
        };
        self.trees_stored.insert(hash.clone());
        Ok((hash, written))
    }
}

/// Hard-links (or copies) the files of `from` that `keep` names into `to`.
pub(super) fn link_all(from: &Path, to: &Path, keep: impl Fn(&str) -> bool) -> Result<()> {
    for entry in fs::read_dir(from).with_context(|| format!("{}: cannot list", from.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !entry.file_type()?.is_file() || !keep(&name) {
            continue;
        }
        let target = to.join(&name);
        if target.exists() {
            continue;
        }
        if fs::hard_link(entry.path(), &target).is_err() {
            fs::copy(entry.path(), &target).with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Writes a file through a temporary name, so a reader never sees half of it.
pub(super) fn write_new(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut out = BufWriter::new(fs::File::create(&tmp)?);
    for part in parts {
        out.write_all(part)?;
    }
    out.flush()?;
    drop(out);
    fs::rename(&tmp, path)
}
