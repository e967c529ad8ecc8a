//! Writing the content-addressed store: each file's content and each tree
//! once, under its blake3, through a temporary name; a snapshot's many
//! new small contents together in a pack (see [`super::packs`]).

use std::collections::HashSet;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::record::extents::{ContentHasher, read_data};
use crate::record::snapshot::packs::{self, PackEntry};
use crate::record::snapshot::reader::ObjectReader;
use crate::record::snapshot::tree::Tree;

/// The folders of file contents and trees, and the trees known written.
pub(super) struct Objects {
    /// One file per content, named by its blake3.
    pub(super) objects: PathBuf,
    /// One file per tree, named by its blake3.
    pub(super) trees: PathBuf,
    /// Packs of small contents.
    pub(super) packs: PathBuf,
    /// The names of every packed content.
    packed: HashSet<[u8; 32]>,
    /// New small contents not yet written.
    pending: Pending,
    trees_stored: HashSet<String>,
    tmp_counter: u64,
    /// Files written since the last [`Objects::sync`].
    unsynced: Vec<PathBuf>,
}

/// Up to this many new files a snapshot syncs one by one; past it, the
/// whole filesystem at once (a first snapshot of a large workspace).
const SYNC_ONE_BY_ONE: usize = 64;

/// A snapshot's new small contents are packed from this many on (fewer
/// are objects of their own: a step that changes a few files writes them).
const PACK_FROM: usize = 64;

/// New small contents are written as a pack once they reach this size.
const PACK_BYTES: usize = 32 << 20;

/// New small contents, held until the snapshot ends.
#[derive(Default)]
struct Pending {
    data: Vec<u8>,
    entries: Vec<PackEntry>,
    names: HashSet<[u8; 32]>,
}

impl Objects {
    /// The objects, packs and trees of the snapshot directory `dir`, with
    /// the names its trusted packs hold (a pack not trusted is ignored:
    /// what it held is written again when met).
    pub(super) fn new(dir: &Path) -> Self {
        let packed = ObjectReader::open(dir).map_or_else(|_| HashSet::new(), |r| r.packed().copied().collect());
        Self {
            objects: dir.join("objects"),
            trees: dir.join("trees"),
            packs: dir.join("packs"),
            packed,
            pending: Pending::default(),
            trees_stored: HashSet::new(),
            tmp_counter: 0,
            unsynced: Vec::new(),
        }
    }

    /// Writes the small contents held since the last call: as one pack if
    /// there are many, else each as an object of its own. Returns the
    /// bytes written past the contents themselves (a pack's index).
    pub(super) fn flush(&mut self) -> Result<u64> {
        if self.pending.entries.len() >= PACK_FROM {
            return self.write_pack().context("writing a pack of small contents");
        }
        let pending = std::mem::take(&mut self.pending);
        for entry in &pending.entries {
            let content = &pending.data[entry.offset as usize..(entry.offset + entry.len) as usize];
            let name = blake3::Hash::from_bytes(entry.name).to_hex();
            self.write_small(name.as_str(), content)
                .with_context(|| format!("writing object {name}"))?;
        }
        Ok(0)
    }

    /// Writes every pending content as one pack.
    fn write_pack(&mut self) -> Result<u64> {
        let pending = std::mem::take(&mut self.pending);
        if pending.entries.is_empty() {
            return Ok(0);
        }
        fs::create_dir_all(&self.packs)?;
        let tmp_name = self.tmp_name();
        let tmp = self.packs.join(tmp_name);
        let (name, index) = packs::write(&self.packs, &tmp, &pending.data, &pending.entries)?;
        self.unsynced.push(self.packs.join(format!("{name}.pack")));
        self.packed.extend(pending.names);
        Ok(index)
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
        let packs = self.packs.is_dir().then_some(self.packs.as_path());
        let dirs = [
            Some(self.objects.as_path()),
            Some(self.trees.as_path()),
            packs,
            also.parent(),
        ];
        for dir in dirs.into_iter().flatten() {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    /// Stores the first `size` bytes of `file` as an object, holes unread
    /// and zero blocks left holes (a sparse file's object stays sparse);
    /// its name, its size (less than `size` if the file shrank meanwhile)
    /// and the bytes written.
    pub(super) fn store_object(&mut self, file: &fs::File, size: u64) -> Result<(String, u64, u64)> {
        if size <= SMALL {
            return self.store_small(file, size).context("reading a workspace file");
        }
        let tmp_name = self.tmp_name();
        let tmp = self.objects.join(tmp_name);
        let out = create_object_file(&tmp)?;
        let copied = copy_content(file, &out, size);
        drop(out);
        let (hash, size, written) = match copied {
            Ok(copied) => copied,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e).context("reading a workspace file");
            }
        };
        let object = self.objects.join(&hash);
        if object.exists() {
            fs::remove_file(&tmp)?;
            return Ok((hash, size, 0));
        }
        fs::rename(&tmp, &object)?;
        self.unsynced.push(object);
        Ok((hash, size, written))
    }

    /// [`Self::store_object`] for a small file: read whole, named, and
    /// held to be written when the snapshot ends ([`Self::flush`]) unless
    /// a pack has it already (a content packed that is also an object of
    /// its own is harmless: readers take the pack's).
    fn store_small(&mut self, file: &fs::File, size: u64) -> Result<(String, u64, u64)> {
        let mut buf = vec![0u8; size as usize];
        let size = read_data(file, size, |offset, bytes| {
            buf[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
            Ok(())
        })?;
        let content = &buf[..size as usize];
        let hash = packs::content_name(content);
        let raw = *blake3::Hash::from_hex(&hash)?.as_bytes();
        // Whether an object of its own has it is asked only if it is not
        // packed (a stat per new file would cost what packs save).
        if self.packed.contains(&raw) || self.pending.names.contains(&raw) {
            return Ok((hash, size, 0));
        }
        let offset = self.pending.data.len() as u64;
        self.pending.data.extend_from_slice(content);
        self.pending.entries.push(PackEntry {
            name: raw,
            offset,
            len: size,
        });
        self.pending.names.insert(raw);
        let mut written = size;
        if self.pending.data.len() >= PACK_BYTES {
            written += self.write_pack().context("writing a pack of small contents")?;
        }
        Ok((hash, size, written))
    }

    /// Writes `content` as the object `hash` (unless it is there), zero
    /// blocks left holes.
    fn write_small(&mut self, hash: &str, content: &[u8]) -> std::io::Result<()> {
        let object = self.objects.join(hash);
        if object.exists() {
            return Ok(());
        }
        let runs = ContentHasher::new().update(0, content);
        let tmp_name = self.tmp_name();
        let tmp = self.objects.join(tmp_name);
        let written = create_object_file(&tmp).and_then(|out| {
            write_runs(&out, 0, content, &runs)?;
            out.set_len(content.len() as u64)
        });
        match written.and_then(|()| fs::rename(&tmp, &object)) {
            Ok(()) => {
                self.unsynced.push(object);
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    /// A fresh temporary name (in the objects or packs folder).
    fn tmp_name(&mut self) -> String {
        self.tmp_counter += 1;
        format!(".tmp-{}-{}", std::process::id(), self.tmp_counter)
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

/// Files up to this size are read whole before their object is written.
const SMALL: u64 = 64 << 10;

/// Creates an object file, read-only from the start (written through the
/// handle that created it).
fn create_object_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(path)
}

/// Writes the data `runs` of `bytes`, found at `offset` of the content.
fn write_runs(out: &fs::File, offset: u64, bytes: &[u8], runs: &[std::ops::Range<usize>]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    for run in runs {
        out.write_all_at(&bytes[run.clone()], offset + run.start as u64)?;
    }
    Ok(())
}

/// Copies the content of `file` (its first `size` bytes) to `out`, data
/// blocks only; its name, size and the bytes written.
fn copy_content(file: &fs::File, out: &fs::File, size: u64) -> std::io::Result<(String, u64, u64)> {
    let mut hasher = ContentHasher::new();
    let mut written = 0u64;
    let read = read_data(file, size, |offset, bytes| {
        let runs = hasher.update(offset, bytes);
        write_runs(out, offset, bytes, &runs)?;
        written += runs.iter().map(|r| r.len() as u64).sum::<u64>();
        Ok(())
    })?;
    out.set_len(read)?;
    Ok((hasher.finish(read), read, written))
}
