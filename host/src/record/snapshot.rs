//! Content-addressed workspace snapshots, stored as trees.
//!
//! * `snapshots/objects/<blake3>`: each distinct file content, once.
//! * `snapshots/trees/<blake3>`: one JSON object per directory (its entries,
//!   and the entries refused with why); a directory of more than
//!   [`SHARD_ENTRIES`] entries is split into shards by the hash of each
//!   name. A tree is written once: a step that changes one file writes that
//!   file, the trees on its path and a small manifest, not the whole listing.
//! * `snapshots/manifests/<id>.json`: the root tree, a label and totals.
//!
//! The walk never follows what the agent made (see [`super::walk`]): entries
//! are opened beneath their parent's handle, typed by the opened handle and
//! read from it. FIFOs, sockets, devices, names that are not UTF-8, paths
//! past the depth or length limits and files past the workspace's caps are
//! recorded as refused, with why, and never read. A file whose size, times
//! and inode are unchanged since the last snapshot is not read again, and
//! where the kernel reports changes ([`super::changes`]) a directory in
//! which nothing changed is not even listed: a step costs what it changed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::changes::{Changed, Changes};
use super::walk::{DirHandle, Kind, Opened, display_name, read_chunks, utf8_name};
use crate::limits::Limits;

/// Directories with more entries than this are stored as shards.
pub const SHARD_ENTRIES: usize = 2048;

/// One path of a snapshot, as readers see it (the flattened view).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ManifestEntry {
    /// A regular file.
    File {
        /// The blake3 hash of its content (its object's name).
        hash: String,
        /// Its size in bytes.
        size: u64,
        /// Whether any of its execute bits is set.
        executable: bool,
    },
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink {
        /// What the link points to, as written.
        target: String,
    },
}

/// Something in the workspace that is not recorded as content, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// The path, readable (lossy where the name is not UTF-8).
    pub path: String,
    /// The exact bytes of the path, in hex, where they are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_hex: Option<String>,
    /// What the entry is.
    pub kind: Kind,
    /// Why it was not recorded.
    pub why: String,
}

/// Totals of one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotStats {
    /// Entries walked: files, directories, links and refused ones.
    pub entries: u64,
    /// Apparent bytes of the recorded files.
    pub bytes: u64,
    /// Bytes the recorded files occupy on disk.
    pub allocated_bytes: u64,
    /// Entries refused.
    pub refused: u64,
    /// Set when a cap stopped the walk: what was not recorded, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
    /// Bytes this snapshot added to the store (objects and trees).
    pub written_bytes: u64,
}

/// A snapshot: its header as stored, and the flattened entries.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Manifest {
    /// The snapshot's number in this store, from 0.
    pub id: u64,
    /// What it was taken after, e.g. `step 3: <function>`.
    pub label: String,
    /// The root tree's hash (empty for snapshots of the older, flat format).
    #[serde(default)]
    pub root: String,
    /// Its totals.
    #[serde(default)]
    pub stats: SnapshotStats,
    /// Every recorded path; loaded from the trees, not stored in the manifest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub entries: BTreeMap<String, ManifestEntry>,
    /// What the walk refused, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<Refused>,
}

impl Manifest {
    /// Why `path` was refused, if it was.
    pub fn refused_why(&self, path: &str) -> Option<&str> {
        self.refused.iter().find(|r| r.path == path).map(|r| r.why.as_str())
    }
}

/// How a tree names one of its entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum TreeEntry {
    File { hash: String, size: u64, executable: bool },
    Dir { tree: String },
    Symlink { target: String },
}

/// A refused entry inside a tree: its name and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct RefusedName {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name_hex: Option<String>,
    kind: Kind,
    why: String,
}

/// One directory (or one shard of a large one).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Tree {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    entries: BTreeMap<String, TreeEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    refused: Vec<RefusedName>,
    /// Set instead of the above for a large directory: shard key → tree.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    shards: BTreeMap<String, String>,
}

/// What identifies an unchanged file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StatKey {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    dev: u64,
}

impl StatKey {
    fn of(stat: &rustix::fs::Stat) -> Self {
        Self {
            size: stat.st_size as u64,
            mtime_ns: stat.st_mtime as i128 * 1_000_000_000 + stat.st_mtime_nsec as i128,
            ctime_ns: stat.st_ctime as i128 * 1_000_000_000 + stat.st_ctime_nsec as i128,
            ino: stat.st_ino,
            dev: stat.st_dev,
        }
    }
}

/// One entry of a directory as the last snapshot recorded it.
#[derive(Debug, Clone)]
struct Remembered {
    entry: TreeEntry,
    /// A file's identity when it was read.
    key: Option<StatKey>,
    /// A file's bytes on disk.
    allocated: u64,
}

/// An entry recorded, or the kind of what was refused and why.
type Recorded = std::result::Result<Remembered, (Kind, String)>;

/// What the store remembers of one directory after a snapshot: enough to
/// record it again, unchanged, without a system call.
#[derive(Debug, Clone)]
struct DirState {
    /// Its device and inode: a directory renamed into its place is another.
    ident: (u64, u64),
    /// The hash of its tree.
    tree: String,
    entries: BTreeMap<String, Remembered>,
    refused: Vec<RefusedName>,
    /// It holds a file of more than one link (whose writes through another
    /// name are reported to that name's directory only), or could not be
    /// listed: examined again at every snapshot.
    recheck: bool,
    /// Entries, bytes and bytes on disk of its whole subtree.
    totals: (u64, u64, u64),
}

/// The directories an incremental snapshot must look at again.
struct Plan {
    /// Their entries changed: listed and examined again.
    changed: HashSet<String>,
    /// They lead to a changed one: their trees are rebuilt from memory.
    on_path: HashSet<String>,
}

/// An incremental walk met what only a full walk records as a full walk
/// would (a cap, a new hard link, a directory gone missing).
#[derive(Debug, thiserror::Error)]
#[error("the incremental snapshot needs a full walk")]
struct Restart;

/// An episode's snapshot store: writes snapshots and remembers what it wrote.
pub struct SnapshotStore {
    dir: PathBuf,
    objects: PathBuf,
    trees: PathBuf,
    manifests: PathBuf,
    limits: Limits,
    /// Every directory of the last snapshot, by workspace-relative path.
    dirs: BTreeMap<String, DirState>,
    /// Files just materialized from a snapshot (a fork), known unread.
    materialized: HashMap<String, (StatKey, String)>,
    /// The kernel's account of what changed since the last snapshot.
    changes: Option<Changes>,
    /// False once a watch could not be added: every snapshot walks all.
    watching: bool,
    /// The last snapshot met a cap: the next one walks all.
    capped: bool,
    /// Snapshots that walked the whole workspace.
    full_walks: u64,
    trees_stored: HashSet<String>,
    next_id: u64,
    tmp_counter: u64,
    last: Option<Manifest>,
    /// Bytes all snapshots of this store added to it.
    written: u64,
}

impl SnapshotStore {
    /// A store in `dir` recording what `limits` allow.
    pub fn create(dir: &Path, limits: &Limits) -> Result<Self> {
        let limits = limits.clone();
        let store = Self {
            dir: dir.to_path_buf(),
            objects: dir.join("objects"),
            trees: dir.join("trees"),
            manifests: dir.join("manifests"),
            limits,
            dirs: BTreeMap::new(),
            materialized: HashMap::new(),
            changes: None,
            watching: true,
            capped: false,
            full_walks: 0,
            trees_stored: HashSet::new(),
            next_id: 0,
            written: 0,
            tmp_counter: 0,
            last: None,
        };
        for sub in [&store.objects, &store.trees, &store.manifests] {
            fs::create_dir_all(sub).with_context(|| format!("creating {}", sub.display()))?;
        }
        Ok(store)
    }

    /// Walks every entry at every snapshot, as a store without inotify does
    /// (what incremental snapshots are checked against).
    pub fn without_change_tracking(mut self) -> Self {
        self.watching = false;
        self
    }

    /// A store in `dir` that starts as `parent`'s did after its snapshot
    /// `upto` (a fork): every object and tree hard-linked (copied only
    /// across filesystems), the manifests up to `upto` likewise, and that
    /// one the last snapshot taken.
    pub fn forked(dir: &Path, parent: &Path, upto: u64, limits: &Limits) -> Result<Self> {
        let mut store = Self::create(dir, limits)?;
        for sub in ["objects", "trees"] {
            link_all(&parent.join(sub), &dir.join(sub), |_| true)?;
        }
        link_all(&parent.join("manifests"), &dir.join("manifests"), |name| {
            name.strip_suffix(".json")
                .and_then(|id| id.parse::<u64>().ok())
                .is_some_and(|id| id <= upto)
        })?;
        let mut last = read_manifest(dir, upto)?;
        last.entries.clear();
        store.last = Some(last);
        store.next_id = upto + 1;
        Ok(store)
    }

    /// Takes the files of `manifest`, just materialized under `root`, as
    /// known by their size, times and inode, so that the next snapshot does
    /// not read them again (a fork's first snapshot of a large workspace).
    pub fn remember_materialized(&mut self, root: &Path, manifest: &Manifest) {
        for (rel, entry) in &manifest.entries {
            let ManifestEntry::File { hash, size, .. } = entry else {
                continue;
            };
            let Ok(stat) = rustix::fs::lstat(root.join(rel)) else {
                continue;
            };
            if Kind::of(&stat) == Kind::File && stat.st_size as u64 == *size {
                self.materialized
                    .insert(rel.clone(), (StatKey::of(&stat), hash.clone()));
            }
        }
    }

    /// The snapshot directory (`objects/`, `trees/`, `manifests/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder of file contents, one file per blake3 hash.
    pub fn objects_dir(&self) -> &Path {
        &self.objects
    }

    /// The blake3 of snapshot `id`'s manifest file as written (what the
    /// hash chain binds, with its root).
    pub fn header_hash(&self, id: u64) -> Option<String> {
        let bytes = fs::read(self.manifests.join(format!("{id:06}.json"))).ok()?;
        Some(blake3::hash(&bytes).to_hex().to_string())
    }

    /// The latest snapshot written, if any: its header, totals and refused
    /// entries, without the entries themselves (see [`Self::last_with_entries`]).
    pub fn last(&self) -> Option<&Manifest> {
        self.last.as_ref()
    }

    /// The latest snapshot with every entry.
    pub fn last_with_entries(&self) -> Result<Manifest> {
        let last = self.last.as_ref().context("no snapshot was taken")?;
        if !self.remembers_last() {
            return read_manifest(&self.dir, last.id);
        }
        let mut manifest = last.clone();
        for (rel, state) in &self.dirs {
            for (name, remembered) in &state.entries {
                manifest.entries.insert(join(rel, name), flat_entry(&remembered.entry));
            }
        }
        Ok(manifest)
    }

    /// The entry at `rel` in the latest snapshot, if it recorded one.
    pub fn entry(&self, rel: &str) -> Option<ManifestEntry> {
        if !self.remembers_last() {
            return self.last_with_entries().ok()?.entries.remove(rel);
        }
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let state = self.dirs.get(parent)?;
        state.entries.get(name).map(|r| flat_entry(&r.entry))
    }

    /// Whether the directories in memory are the latest snapshot's (not so
    /// in a fork before its first snapshot).
    fn remembers_last(&self) -> bool {
        match (&self.last, self.dirs.get("")) {
            (Some(last), Some(root)) => last.root == root.tree,
            _ => false,
        }
    }

    /// Records the current state of the tree under `root`. Returns `None`
    /// when nothing changed since the last snapshot (nothing is written).
    /// Errors are the host's own (the store cannot be written); whatever
    /// the agent left in the tree is recorded, or refused with why.
    ///
    /// Where the kernel reports changes (see [`super::changes`]), only the
    /// directories it names are listed again, and unchanged subtrees cost
    /// nothing; anything it cannot vouch for makes the walk a full one.
    pub fn snapshot(&mut self, root: &DirHandle, label: &str) -> Result<Option<&Manifest>> {
        let plan = self.plan(root);
        let walked = match plan {
            Some(plan) => match Walk::new(self, Some(plan)).run(root) {
                Err(e) if e.is::<Restart>() => None,
                other => Some(other?),
            },
            None => None,
        };
        let walked = match walked {
            Some(walked) => walked,
            None => {
                self.full_walks += 1;
                Walk::new(self, None).run(root)?
            }
        };
        let Walked {
            root: root_tree,
            dirs,
            mut refused,
            mut stats,
            capped,
        } = walked;
        self.dirs = dirs;
        self.capped = capped;
        self.materialized.clear();
        self.written += stats.written_bytes;
        if self.last.as_ref().is_some_and(|m| m.root == root_tree) {
            return Ok(None);
        }
        refused.sort_by(|a, b| a.path.cmp(&b.path));
        stats.refused = refused.len() as u64;
        let manifest = Manifest {
            id: self.next_id,
            label: label.to_string(),
            root: root_tree,
            stats,
            entries: BTreeMap::new(),
            refused,
        };
        let path = self.manifests.join(format!("{:06}.json", manifest.id));
        let header = serde_json::to_vec(&Manifest {
            refused: Vec::new(),
            ..manifest.clone()
        })?;
        write_new(&path, &[&header, b"\n"]).with_context(|| format!("writing {}", path.display()))?;
        self.next_id += 1;
        self.last = Some(manifest);
        Ok(self.last.as_ref())
    }

    /// Which directories the next snapshot must look at, or `None` for all
    /// of them (the first snapshot, a cap met, changes not tracked or lost).
    fn plan(&mut self, root: &DirHandle) -> Option<Plan> {
        if self.changes.is_none() && self.watching {
            self.changes = Changes::new();
            self.watching = self.changes.is_some();
        }
        let changed = match self.changes.as_mut()?.take() {
            Changed::Dirs(dirs) => dirs,
            Changed::Everything(why) => {
                tracing::debug!(why, "snapshot: walking the whole workspace");
                return None;
            }
        };
        let same_root = rustix::fs::fstat(root).ok().map(|s| (s.st_dev, s.st_ino));
        if !self.watching || self.capped || self.dirs.get("").map(|r| r.ident) != same_root {
            return None;
        }
        let mut changed = changed;
        changed.extend(self.dirs.iter().filter(|(_, s)| s.recheck).map(|(rel, _)| rel.clone()));
        let mut on_path = HashSet::new();
        for rel in &changed {
            let mut rel = rel.as_str();
            while !rel.is_empty() {
                rel = rel.rsplit_once('/').map_or("", |(parent, _)| parent);
                on_path.insert(rel.to_string());
            }
        }
        Some(Plan { changed, on_path })
    }

    /// Why the store may take no more snapshots: what they wrote in all
    /// passed the episode's `snapshot_bytes`.
    pub fn spent(&self) -> Option<String> {
        let budget = self.limits.snapshot_bytes;
        (self.written > budget).then(|| {
            format!(
                "the workspace's snapshots wrote {} MiB, past their budget of {} MiB",
                self.written >> 20,
                budget >> 20
            )
        })
    }

    /// Stores the content read from `file` (at most `limit` bytes) as an
    /// object; its hash and size, or `None` if it holds more than `limit`.
    fn store_object(&mut self, file: &fs::File, limit: u64) -> Result<Option<(String, u64, u64)>> {
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
        Ok(Some((hash, size, written)))
    }

    /// Stores a tree (once) and returns its hash and the bytes written.
    fn store_tree(&mut self, tree: &Tree) -> Result<(String, u64)> {
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
            bytes.len() as u64
        };
        self.trees_stored.insert(hash.clone());
        Ok((hash, written))
    }
}

/// Hard-links (or copies) the files of `from` that `keep` names into `to`.
fn link_all(from: &Path, to: &Path, keep: impl Fn(&str) -> bool) -> Result<()> {
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
fn write_new(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut out = BufWriter::new(fs::File::create(&tmp)?);
    for part in parts {
        out.write_all(part)?;
    }
    out.flush()?;
    drop(out);
    fs::rename(&tmp, path)
}

/// One snapshot walk in progress.
struct Walk<'a> {
    store: &'a mut SnapshotStore,
    /// What to look at again; `None`: everything.
    plan: Option<Plan>,
    /// The last snapshot's directories, taken as the walk uses them.
    old: BTreeMap<String, DirState>,
    /// This snapshot's.
    new: BTreeMap<String, DirState>,
    refused: Vec<Refused>,
    stats: SnapshotStats,
    capped: bool,
}

/// What a walk found.
struct Walked {
    root: String,
    dirs: BTreeMap<String, DirState>,
    refused: Vec<Refused>,
    stats: SnapshotStats,
    capped: bool,
}

/// A manifest entry from a tree entry.
fn flat_entry(entry: &TreeEntry) -> ManifestEntry {
    match entry {
        TreeEntry::File { hash, size, executable } => ManifestEntry::File {
            hash: hash.clone(),
            size: *size,
            executable: *executable,
        },
        TreeEntry::Dir { .. } => ManifestEntry::Dir,
        TreeEntry::Symlink { target } => ManifestEntry::Symlink { target: target.clone() },
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

/// How many bits of a name's hash pick its shard in a directory of `n`
/// entries: about sqrt(n/2) shards, which keeps a one-file change's rewrite
/// (one shard plus the shard index) smallest.
fn shard_bits(n: usize) -> u32 {
    let shards = ((n / 2) as f64).sqrt().max(2.0);
    (shards.log2().round() as u32).clamp(1, 16)
}

/// The shard a name belongs to in a large directory.
fn shard_of(name: &[u8], bits: u32) -> String {
    let hash = blake3::hash(name);
    let prefix = u32::from_be_bytes(hash.as_bytes()[..4].try_into().unwrap_or_default());
    format!("{:04x}", prefix >> (32 - bits))
}

impl<'a> Walk<'a> {
    fn new(store: &'a mut SnapshotStore, plan: Option<Plan>) -> Self {
        let old = std::mem::take(&mut store.dirs);
        Self {
            store,
            plan,
            old,
            new: BTreeMap::new(),
            refused: Vec::new(),
            stats: SnapshotStats::default(),
            capped: false,
        }
    }

    fn run(mut self, root: &DirHandle) -> Result<Walked> {
        let incremental = self.plan.is_some();
        let result = self.dir(root, "", 0);
        let limits = &self.store.limits;
        let over = self.stats.entries > limits.workspace_files
            || self.stats.bytes > limits.workspace_bytes
            || self.stats.allocated_bytes > limits.workspace_bytes;
        if incremental && (result.is_err() || over || self.capped) {
            // A full walk starts from what the last snapshot remembered.
            let mut old = std::mem::take(&mut self.old);
            old.append(&mut self.new);
            self.store.dirs = old;
            return Err(result.err().unwrap_or_else(|| Restart.into()));
        }
        Ok(Walked {
            root: result?,
            dirs: self.new,
            refused: self.refused,
            stats: self.stats,
            capped: self.capped,
        })
    }

    /// Records the directory `dir` at `rel`; the hash of its tree.
    fn dir(&mut self, dir: &DirHandle, rel: &str, depth: usize) -> Result<String> {
        let before = (self.stats.entries, self.stats.bytes, self.stats.allocated_bytes);
        let mut state = match &self.plan {
            Some(plan) if !plan.changed.contains(rel) && self.old.contains_key(rel) => {
                if !plan.on_path.contains(rel) {
                    return Ok(self.reuse(rel));
                }
                self.rebuild(dir, rel, depth)?
            }
            _ => self.list(dir, rel, depth)?,
        };
        state.tree = self.store_dir(&state)?;
        state.totals = (
            self.stats.entries - before.0,
            self.stats.bytes - before.1,
            self.stats.allocated_bytes - before.2,
        );
        let tree = state.tree.clone();
        self.new.insert(rel.to_string(), state);
        Ok(tree)
    }

    /// Takes the unchanged subtree at `rel` as the last snapshot recorded it.
    fn reuse(&mut self, rel: &str) -> String {
        let below = self.below(rel);
        let state = self
            .old
            .remove(rel)
            .expect("reuse is only asked of a remembered directory");
        let tree = state.tree.clone();
        let (entries, bytes, allocated) = state.totals;
        self.stats.entries += entries;
        self.stats.bytes += bytes;
        self.stats.allocated_bytes += allocated;
        let moved: Vec<(String, DirState)> = std::iter::once((rel.to_string(), state))
            .chain(
                below
                    .into_iter()
                    .filter_map(|key| self.old.remove(&key).map(|s| (key, s))),
            )
            .collect();
        for (key, state) in moved {
            self.refuse_all(&key, &state.refused);
            self.new.insert(key, state);
        }
        tree
    }

    /// Forgets what the last snapshot said of the subtree at `rel` (another
    /// directory now has its name).
    fn forget(&mut self, rel: &str) {
        self.old.remove(rel);
        for key in self.below(rel) {
            self.old.remove(&key);
        }
    }

    /// The remembered directories beneath `rel` (all others for the root).
    fn below(&self, rel: &str) -> Vec<String> {
        let prefix = if rel.is_empty() {
            String::new()
        } else {
            format!("{rel}/")
        };
        self.old
            .range(prefix.clone()..)
            .take_while(|(key, _)| key.starts_with(&prefix))
            .filter(|(key, _)| key.as_str() != rel)
            .map(|(key, _)| key.clone())
            .collect()
    }

    fn refuse_all(&mut self, rel: &str, names: &[RefusedName]) {
        for name in names {
            let path_hex = name.name_hex.as_ref().map(|hex| {
                let parent = if rel.is_empty() {
                    String::new()
                } else {
                    hex::encode(format!("{rel}/"))
                };
                format!("{parent}{hex}")
            });
            self.refuse(&join(rel, &name.name), path_hex, name.kind, name.why.clone());
        }
    }

    /// A directory whose own entries did not change but some below did:
    /// its remembered entries, with the changed subdirectories walked.
    fn rebuild(&mut self, dir: &DirHandle, rel: &str, depth: usize) -> Result<DirState> {
        let mut state = self
            .old
            .remove(rel)
            .expect("rebuild is only asked of a remembered directory");
        self.stats.entries += (state.entries.len() + state.refused.len()) as u64;
        self.refuse_all(rel, &state.refused);
        for (name, remembered) in state.entries.iter_mut() {
            match &mut remembered.entry {
                TreeEntry::Dir { tree } => {
                    let child = join(rel, name);
                    let walk = self.plan.as_ref().is_none_or(|plan| {
                        plan.changed.contains(&child) || plan.on_path.contains(&child) || !self.old.contains_key(&child)
                    });
                    *tree = if walk {
                        let sub = dir.open_dir(name.as_bytes()).map_err(|_| Restart)?;
                        self.dir(&sub, &child, depth + 1)?
                    } else {
                        self.reuse(&child)
                    };
                }
                TreeEntry::File { size, .. } => {
                    self.stats.bytes += *size;
                    self.stats.allocated_bytes += remembered.allocated;
                }
                TreeEntry::Symlink { .. } => {}
            }
        }
        Ok(state)
    }

    /// Lists `dir` and examines each entry (a file whose size, times and
    /// inode are as remembered is not read again).
    fn list(&mut self, dir: &DirHandle, rel: &str, depth: usize) -> Result<DirState> {
        let old = self.old.remove(rel);
        if self.store.watching
            && let Some(changes) = self.store.changes.as_mut()
            && !changes.watch(dir, rel)
        {
            tracing::debug!(
                dir = rel,
                "no inotify watch could be added: snapshots walk the whole workspace"
            );
            self.store.watching = false;
        }
        let ident = rustix::fs::fstat(dir).map(|s| (s.st_dev, s.st_ino)).unwrap_or_default();
        let mut state = DirState {
            ident,
            tree: String::new(),
            entries: BTreeMap::new(),
            refused: Vec::new(),
            recheck: false,
            totals: (0, 0, 0),
        };
        // One more than can be recorded, so that the cap is seen.
        let room = self.store.limits.workspace_files.saturating_sub(self.stats.entries) + 1;
        let names = match dir.names_up_to(usize::try_from(room).unwrap_or(usize::MAX)) {
            Ok(names) => names,
            Err(e) => {
                let why = format!("its entries could not be listed: {e}");
                self.refuse(rel, None, Kind::Directory, why);
                state.recheck = true;
                Vec::new()
            }
        };
        for name in names {
            if self.stats.truncated.is_some() {
                break;
            }
            if self.stats.entries >= self.store.limits.workspace_files {
                self.stats.truncated = Some(format!(
                    "the workspace holds more than {} entries; the rest is not recorded",
                    self.store.limits.workspace_files
                ));
                self.capped = true;
                break;
            }
            self.stats.entries += 1;
            self.entry(dir, &name, rel, depth, &mut state, old.as_ref())?;
        }
        if state.recheck && self.plan.is_some() && !old.is_some_and(|o| o.recheck) {
            // A new link's other names may be in directories this walk reuses.
            return Err(Restart.into());
        }
        Ok(state)
    }

    /// Stores the tree of `state` (sharded if large); its hash.
    fn store_dir(&mut self, state: &DirState) -> Result<String> {
        let count = state.entries.len() + state.refused.len();
        let mut trees: BTreeMap<String, Tree> = BTreeMap::new();
        let sharded = count > SHARD_ENTRIES;
        let bits = shard_bits(count);
        let key = |name: &[u8]| if sharded { shard_of(name, bits) } else { String::new() };
        for (name, remembered) in &state.entries {
            let tree = trees.entry(key(name.as_bytes())).or_default();
            tree.entries.insert(name.clone(), remembered.entry.clone());
        }
        for refused in &state.refused {
            let raw = match &refused.name_hex {
                Some(hex) => hex::decode(hex).unwrap_or_default(),
                None => refused.name.as_bytes().to_vec(),
            };
            trees.entry(key(&raw)).or_default().refused.push(refused.clone());
        }
        if !sharded {
            let (hash, written) = self.store.store_tree(&trees.remove("").unwrap_or_default())?;
            self.stats.written_bytes += written;
            return Ok(hash);
        }
        let mut index = Tree::default();
        for (key, shard) in trees {
            let (hash, written) = self.store.store_tree(&shard)?;
            self.stats.written_bytes += written;
            index.shards.insert(key, hash);
        }
        let (hash, written) = self.store.store_tree(&index)?;
        self.stats.written_bytes += written;
        Ok(hash)
    }

    fn refuse(&mut self, path: &str, path_hex: Option<String>, kind: Kind, why: String) {
        self.refused.push(Refused {
            path: path.to_string(),
            path_hex,
            kind,
            why,
        });
    }

    /// Records one entry of `dir` into `state` (or as refused).
    fn entry(
        &mut self,
        dir: &DirHandle,
        name: &[u8],
        parent: &str,
        depth: usize,
        state: &mut DirState,
        old: Option<&DirState>,
    ) -> Result<()> {
        let kind_now = || dir.stat_entry(name).map(|s| Kind::of(&s)).unwrap_or(Kind::Unknown);
        let Some(text) = utf8_name(name) else {
            let path = join(parent, &display_name(name));
            let hex = hex::encode([parent.as_bytes(), if parent.is_empty() { b"" } else { b"/" }, name].concat());
            let why = "its name is not UTF-8, so no tool call can name it; not recorded".to_string();
            let kind = kind_now();
            state.refused.push(RefusedName {
                name: display_name(name),
                name_hex: Some(hex::encode(name)),
                kind,
                why: why.clone(),
            });
            self.refuse(&path, Some(hex), kind, why);
            return Ok(());
        };
        let rel = join(parent, text);
        let outcome = if rel.len() > self.store.limits.path_bytes {
            Err((
                kind_now(),
                format!("its path is longer than {} bytes", self.store.limits.path_bytes),
            ))
        } else {
            let known = old.and_then(|o| o.entries.get(text));
            self.record(dir, name, &rel, depth, known, state)?
        };
        match outcome {
            Ok(remembered) => {
                state.entries.insert(text.to_string(), remembered);
            }
            Err((kind, why)) => {
                state.refused.push(RefusedName {
                    name: text.to_string(),
                    name_hex: None,
                    kind,
                    why: why.clone(),
                });
                self.refuse(&rel, None, kind, why);
            }
        }
        Ok(())
    }

    /// The entry for `name`, or the kind and why it is refused.
    fn record(
        &mut self,
        dir: &DirHandle,
        name: &[u8],
        rel: &str,
        depth: usize,
        known: Option<&Remembered>,
        state: &mut DirState,
    ) -> Result<Recorded> {
        let stat = match dir.stat_entry(name) {
            Ok(stat) => stat,
            Err(e) => return Ok(Err((Kind::Unknown, format!("it could not be examined: {e}")))),
        };
        if Kind::of(&stat) == Kind::File {
            state.recheck |= stat.st_nlink > 1;
            // Fast path: an unchanged file is not opened at all.
            let key = StatKey::of(&stat);
            let hash = match known {
                Some(Remembered {
                    entry: TreeEntry::File { hash, .. },
                    key: Some(k),
                    ..
                }) if *k == key => Some(hash.clone()),
                _ => self
                    .store
                    .materialized
                    .get(rel)
                    .filter(|(k, _)| *k == key)
                    .map(|(_, h)| h.clone()),
            };
            if let Some(hash) = hash {
                if let Some(over) = self.over_caps(&stat) {
                    return Ok(Err((Kind::File, over)));
                }
                return Ok(Ok(self.file_entry(&stat, key, hash)));
            }
        }
        let opened = match dir.open_entry(name) {
            Ok(opened) => opened,
            Err(e) => return Ok(Err((Kind::of(&stat), format!("it could not be opened: {e}")))),
        };
        match opened {
            Opened::File(file, stat) => {
                state.recheck |= stat.st_nlink > 1;
                self.read_file(&file, &stat)
            }
            Opened::Dir(sub, stat) => self.subdir(&sub, &stat, rel, depth),
            Opened::Symlink => match dir.read_link(name) {
                Ok(target) => match String::from_utf8(target) {
                    Ok(target) => Ok(Ok(Remembered {
                        entry: TreeEntry::Symlink { target },
                        key: None,
                        allocated: 0,
                    })),
                    Err(_) => Ok(Err((Kind::Symlink, "its target is not UTF-8".into()))),
                },
                Err(e) => Ok(Err((Kind::Symlink, format!("it could not be read: {e}")))),
            },
            Opened::Special(kind) => Ok(Err((
                kind,
                format!("it is {}, which is not workspace content", kind.describe()),
            ))),
        }
    }

    /// Stores a file's content (unless a cap refuses it).
    fn read_file(&mut self, file: &fs::File, stat: &rustix::fs::Stat) -> Result<Recorded> {
        if let Some(over) = self.over_caps(stat) {
            return Ok(Err((Kind::File, over)));
        }
        let left = self.store.limits.workspace_bytes - self.stats.bytes;
        match self.store.store_object(file, left)? {
            Some((hash, _size, written)) => {
                self.stats.written_bytes += written;
                Ok(Ok(self.file_entry(stat, StatKey::of(stat), hash)))
            }
            None => {
                self.capped = true;
                Ok(Err((
                    Kind::File,
                    format!(
                        "it grew past the workspace's cap of {} bytes while being read",
                        self.store.limits.workspace_bytes
                    ),
                )))
            }
        }
    }

    /// Records the subdirectory `sub` at `rel` (unless too deep).
    fn subdir(&mut self, sub: &DirHandle, stat: &rustix::fs::Stat, rel: &str, depth: usize) -> Result<Recorded> {
        if depth + 1 > self.store.limits.path_depth {
            return Ok(Err((
                Kind::Directory,
                format!("it is deeper than {} levels", self.store.limits.path_depth),
            )));
        }
        if self.old.get(rel).is_some_and(|o| o.ident != (stat.st_dev, stat.st_ino)) {
            self.forget(rel);
        }
        let tree = self.dir(sub, rel, depth + 1)?;
        Ok(Ok(Remembered {
            entry: TreeEntry::Dir { tree },
            key: None,
            allocated: 0,
        }))
    }

    /// Why a file of this size cannot be recorded, if the caps say so.
    fn over_caps(&mut self, stat: &rustix::fs::Stat) -> Option<String> {
        let max = self.store.limits.workspace_bytes;
        let size = stat.st_size as u64;
        let allocated = stat.st_blocks as u64 * 512;
        if self.stats.bytes + size > max || self.stats.allocated_bytes + allocated > max {
            self.capped = true;
            return Some(format!(
                "the workspace's files exceed its cap of {} MiB (this one is {} MiB, {} MiB on disk)",
                max >> 20,
                size >> 20,
                allocated >> 20
            ));
        }
        None
    }

    fn file_entry(&mut self, stat: &rustix::fs::Stat, key: StatKey, hash: String) -> Remembered {
        let size = stat.st_size as u64;
        let allocated = stat.st_blocks as u64 * 512;
        self.stats.bytes += size;
        self.stats.allocated_bytes += allocated;
        let executable = stat.st_mode & 0o111 != 0;
        Remembered {
            entry: TreeEntry::File { hash, size, executable },
            key: Some(key),
            allocated,
        }
    }
}

/// Whether `hash` names an object or tree (and so is safe to join to a path).
pub fn is_hash(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn read_tree(dir: &Path, hash: &str) -> Result<Tree> {
    if !is_hash(hash) {
        bail!("{}: `{hash}` is not a tree hash", dir.display());
    }
    let path = dir.join("trees").join(hash);
    let text = super::read_record_file(&path, super::MAX_JSON_RECORD)
        .with_context(|| format!("{}: missing tree", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: malformed tree", path.display()))
}

/// Fills `manifest.entries` and `refused` from its trees.
fn flatten(dir: &Path, manifest: &mut Manifest) -> Result<()> {
    let mut stack = vec![(String::new(), manifest.root.clone())];
    while let Some((rel, hash)) = stack.pop() {
        let tree = read_tree(dir, &hash)?;
        if !tree.shards.is_empty() {
            stack.extend(tree.shards.into_values().map(|h| (rel.clone(), h)));
            continue;
        }
        for refused in tree.refused {
            manifest.refused.push(Refused {
                path: join(&rel, &refused.name),
                path_hex: refused.name_hex,
                kind: refused.kind,
                why: refused.why,
            });
        }
        for (name, entry) in tree.entries {
            if name.is_empty() || name == "." || name == ".." || name.contains('/') {
                bail!("{}: tree {hash} has a malformed name `{name}`", dir.display());
            }
            let path = join(&rel, &name);
            let flat = match entry {
                TreeEntry::File { hash, size, executable } => {
                    if !is_hash(&hash) {
                        bail!("{}: tree {hash} has a malformed object hash", dir.display());
                    }
                    ManifestEntry::File { hash, size, executable }
                }
                TreeEntry::Symlink { target } => ManifestEntry::Symlink { target },
                TreeEntry::Dir { tree } => {
                    stack.push((path.clone(), tree));
                    ManifestEntry::Dir
                }
            };
            manifest.entries.insert(path, flat);
        }
    }
    manifest.refused.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(())
}

fn read_header(path: &Path) -> Result<Manifest> {
    let text = super::read_record_file(path, super::MAX_JSON_RECORD)
        .with_context(|| format!("{}: no such snapshot", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: malformed manifest", path.display()))
}

/// Reads a manifest with its entries (from the trees; an older flat
/// manifest holds them itself).
fn load(dir: &Path, path: &Path) -> Result<Manifest> {
    let mut manifest = read_header(path)?;
    if !manifest.root.is_empty() {
        flatten(dir, &mut manifest)?;
    }
    for (rel, entry) in &manifest.entries {
        if let ManifestEntry::File { hash, .. } = entry
            && !is_hash(hash)
        {
            bail!("{}: `{rel}` has a malformed object hash", path.display());
        }
    }
    Ok(manifest)
}

/// The manifest `id` of an episode's snapshot directory, with its entries.
pub fn read_manifest(dir: &Path, id: u64) -> Result<Manifest> {
    load(dir, &dir.join("manifests").join(format!("{id:06}.json")))
}

fn manifest_paths(dir: &Path) -> Result<Vec<PathBuf>> {
    let manifests = dir.join("manifests");
    let mut names: Vec<PathBuf> = fs::read_dir(&manifests)
        .with_context(|| format!("{}: no snapshots here", manifests.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    Ok(names)
}

/// Every manifest header of an episode's snapshot directory, in order
/// (without entries: listing stays cheap however large the trees).
pub fn list_manifests(dir: &Path) -> Result<Vec<Manifest>> {
    manifest_paths(dir)?.iter().map(|p| read_header(p)).collect()
}

/// The manifest with the highest id in an episode's snapshot directory.
pub fn latest_manifest(dir: &Path) -> Result<Manifest> {
    let names = manifest_paths(dir)?;
    let last = names
        .last()
        .with_context(|| format!("{}: no snapshot manifest", dir.join("manifests").display()))?;
    load(dir, last)
}

/// Links followed at most while resolving one path, as the kernel allows.
const MAX_LINK_HOPS: usize = 40;

/// Where the link at `rel` (workspace-relative) pointing to `target` leads
/// inside the tree `entries` describes, every link on the way followed as
/// the kernel would: its workspace-relative path without links (`""` is the
/// root), or `None` when it is absolute, climbs above the root at any point,
/// needs a path the tree lacks, or loops. Judging each link's text alone is
/// not enough: with `s -> .`, the link `s/../x` climbs out of the root.
pub fn resolve_link(entries: &BTreeMap<String, ManifestEntry>, rel: &str, target: &str) -> Option<String> {
    let parent = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
    let mut hops = 0;
    resolve_from(entries, parent, target, &mut hops)
}

/// Resolves `path` (relative) from the link-free folder `base`.
fn resolve_from(entries: &BTreeMap<String, ManifestEntry>, base: &str, path: &str, hops: &mut usize) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut at: Vec<String> = base.split('/').filter(|p| !p.is_empty()).map(String::from).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                at.pop()?;
            }
            name => {
                let here = at.join("/");
                let next = if here.is_empty() {
                    name.to_string()
                } else {
                    format!("{here}/{name}")
                };
                match entries.get(&next)? {
                    ManifestEntry::Symlink { target } => {
                        *hops += 1;
                        if *hops > MAX_LINK_HOPS {
                            return None;
                        }
                        let resolved = resolve_from(entries, &here, target, hops)?;
                        at = resolved
                            .split('/')
                            .filter(|p| !p.is_empty())
                            .map(String::from)
                            .collect();
                    }
                    _ => at.push(name.to_string()),
                }
            }
        }
    }
    Some(at.join("/"))
}

/// The link text that leads from the folder of `rel` to `resolved` (both
/// link-free workspace-relative paths) by plain folders only.
fn direct_link(rel: &str, resolved: &str) -> String {
    let parent: Vec<&str> = rel
        .rsplit_once('/')
        .map_or(Vec::new(), |(dir, _)| dir.split('/').collect());
    let to: Vec<&str> = resolved.split('/').filter(|p| !p.is_empty()).collect();
    let common = parent.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; parent.len() - common];
    parts.extend(&to[common..]);
    if parts.is_empty() { ".".into() } else { parts.join("/") }
}

/// Rebuilds the files of `manifest` under `dest` (which must not exist),
/// leaving out every symbolic link that does not resolve inside the
/// workspace ([`resolve_link`]) and writing each other one as the direct
/// path to where it leads, through plain folders only: an evaluator mounted
/// next to hidden answers must never follow the agent's link to them. Files are hard links into the object store
/// where possible: callers must treat the result as read-only. Every entry
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
    let objects = snapshot_dir.join("objects");
    let objects_dir = DirHandle::open_root(&objects).with_context(|| format!("opening {}", objects.display()))?;
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
                restore_file(&objects_dir, hash, dir, name, *executable, copy)
                    .with_context(|| format!("restoring {rel} from object {hash}"))?;
            }
        }
    }
    Ok(())
}

/// Puts object `hash` at `name` in `dir`: a hard link, or a copy.
fn restore_file(
    objects: &DirHandle,
    hash: &str,
    dir: &DirHandle,
    name: &str,
    executable: bool,
    copy: bool,
) -> Result<()> {
    if !copy && rustix::fs::linkat(objects, hash, dir, name, rustix::fs::AtFlags::empty()).is_ok() {
        return Ok(());
    }
    let (source, _) = objects.open_file(hash.as_bytes())?;
    let out = dir.create_file(name.as_bytes(), if executable { 0o755 } else { 0o644 })?;
    // Holes stay holes: a sparse file never becomes its apparent size on disk.
    crate::record::walk::copy_sparse(&source, &out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(tmp: &Path) -> SnapshotStore {
        SnapshotStore::create(&tmp.join("snap"), &Limits::default()).unwrap()
    }

    fn root(path: &Path) -> DirHandle {
        DirHandle::open_root(path).unwrap()
    }

    /// Takes a snapshot that must record a change; it, with its entries.
    fn take(store: &mut SnapshotStore, ws: &Path, label: &str) -> Manifest {
        store.snapshot(&root(ws), label).unwrap().expect("a change");
        store.last_with_entries().unwrap()
    }

    #[test]
    fn links_that_leave_the_workspace_are_recognised() {
        let dir = || ManifestEntry::Dir;
        let link = |t: &str| ManifestEntry::Symlink { target: t.into() };
        let file = || ManifestEntry::File {
            hash: "0".into(),
            size: 1,
            executable: false,
        };
        let entries: BTreeMap<String, ManifestEntry> = [
            ("b", file()),
            ("d", dir()),
            ("d/e", dir()),
            ("s", link(".")),
            ("up", link("..")),
            ("d/up", link("..")),
            ("loop", link("loop")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let resolve = |rel: &str, target: &str| resolve_link(&entries, rel, target);
        assert_eq!(resolve("a", "b").as_deref(), Some("b"));
        assert_eq!(resolve("d/a", "../b").as_deref(), Some("b"));
        assert_eq!(resolve("d/e/a", "./../../b").as_deref(), Some("b"));
        assert_eq!(resolve("d/a", "up/b").as_deref(), Some("b"));
        assert_eq!(resolve("x", "s/d/e").as_deref(), Some("d/e"));
        for (rel, target) in [
            ("a", "../b"),
            ("d/a", "../../hidden/answers.csv"),
            ("d/a", "x/../../../b"),
            ("a", "/hidden/answers.csv"),
            // Each link's text stays inside; what they lead to together does not.
            ("a", "s/../hidden/answers.csv"),
            ("d/x", "up/../../hidden/answers.csv"),
            ("a", "up/b"),
            ("a", "loop"),
            ("a", "missing/../b"),
        ] {
            assert_eq!(resolve(rel, target), None, "{rel} -> {target}");
        }
        assert_eq!(direct_link("d/e/a", "b"), "../../b");
        assert_eq!(direct_link("d/a", "d/e"), "e");
        assert_eq!(direct_link("a", ""), ".");

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

    #[test]
    fn unchanged_files_are_not_stored_twice_and_changes_are_seen() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(ws.join("d")).unwrap();
        fs::write(ws.join("a.txt"), "one").unwrap();
        fs::write(ws.join("d/b.txt"), "two").unwrap();
        let mut store = store(tmp.path());
        let first = take(&mut store, &ws, "start");
        assert_eq!(first.entries.len(), 3);
        assert!(store.snapshot(&root(&ws), "noop").unwrap().is_none());
        fs::write(ws.join("a.txt"), "three").unwrap();
        let second = take(&mut store, &ws, "edit");
        assert_ne!(first.entries["a.txt"], second.entries["a.txt"]);
        assert_eq!(first.entries["d/b.txt"], second.entries["d/b.txt"]);
        // Read back from disk, the trees give the same entries.
        let snap = tmp.path().join("snap");
        assert_eq!(read_manifest(&snap, first.id).unwrap().entries, first.entries);
        assert_eq!(latest_manifest(&snap).unwrap().entries, second.entries);
        let back = tmp.path().join("back");
        materialize_contained(&snap, &first, &back).unwrap();
        assert_eq!(fs::read_to_string(back.join("a.txt")).unwrap(), "one");
    }

    #[test]
    fn special_files_odd_names_and_caps_are_refused_with_why() {
        use std::os::unix::ffi::OsStrExt;
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            ws.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        // Two names that a lossy conversion would make one.
        fs::write(ws.join(std::ffi::OsStr::from_bytes(b"bad\xff")), "1").unwrap();
        fs::write(ws.join(std::ffi::OsStr::from_bytes(b"bad\xfe")), "2").unwrap();
        let big = fs::File::create(ws.join("sparse")).unwrap();
        big.set_len(1 << 40).unwrap();
        let mut deep = ws.clone();
        for _ in 0..5 {
            deep = deep.join("d");
        }
        fs::create_dir_all(&deep).unwrap();
        fs::write(ws.join("ok.txt"), "fine").unwrap();
        let limits = Limits {
            workspace_bytes: 1 << 20,
            path_depth: 3,
            ..Limits::default()
        };
        let mut store = SnapshotStore::create(&tmp.path().join("snap"), &limits).unwrap();
        let manifest = take(&mut store, &ws, "s");
        assert!(manifest.entries.contains_key("ok.txt"));
        let why = |path: &str| {
            manifest
                .refused_why(path)
                .unwrap_or_else(|| panic!("{path} not refused"))
                .to_string()
        };
        assert!(why("fifo").contains("FIFO"));
        assert!(why("sparse").contains("cap"));
        assert!(why("d/d/d/d").contains("deeper"));
        let odd: Vec<_> = manifest.refused.iter().filter_map(|r| r.path_hex.clone()).collect();
        assert_eq!(odd.len(), 2, "two distinct entries: {odd:?}");
        assert_ne!(odd[0], odd[1]);
        assert_eq!(manifest.stats.refused, 5);
        // The same from disk.
        let back = read_manifest(&tmp.path().join("snap"), manifest.id).unwrap();
        assert_eq!(back.refused, manifest.refused);
        assert_eq!(back.entries, manifest.entries);
    }

    #[test]
    fn a_large_directory_is_sharded_and_a_change_rewrites_one_shard() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        for i in 0..(SHARD_ENTRIES + 100) {
            fs::write(ws.join(format!("f{i}")), i.to_string()).unwrap();
        }
        let mut store = store(tmp.path());
        let first = take(&mut store, &ws, "s");
        assert_eq!(first.entries.len(), SHARD_ENTRIES + 100);
        fs::write(ws.join("f7"), "changed").unwrap();
        let second = take(&mut store, &ws, "t");
        // One object, one shard, the shard index and the manifest.
        assert!(
            second.stats.written_bytes < first.stats.written_bytes / 10,
            "{:?}",
            second.stats
        );
        let back = read_manifest(&tmp.path().join("snap"), second.id).unwrap();
        assert_eq!(back.entries, second.entries);
    }

    #[test]
    fn a_tree_swapped_while_it_is_walked_never_yields_a_byte_from_outside() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let tmp = tempfile::tempdir().unwrap();
        let secret_dir = tmp.path().join("outside");
        fs::create_dir_all(&secret_dir).unwrap();
        let token = "OUTSIDE-SECRET-TOKEN";
        fs::write(secret_dir.join("secret.txt"), token.repeat(10)).unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(ws.join("dir")).unwrap();
        fs::write(ws.join("dir/inner.txt"), "inner").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = {
            let (ws, secret_dir, stop) = (ws.clone(), secret_dir.clone(), stop.clone());
            std::thread::spawn(move || {
                let secret = secret_dir.join("secret.txt");
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    rounds += 1;
                    let _ = std::os::unix::fs::symlink(&secret, ws.join("f.tmp"));
                    let _ = fs::rename(ws.join("f.tmp"), ws.join("file.txt"));
                    let _ = fs::write(ws.join("g.tmp"), "plain");
                    let _ = fs::rename(ws.join("g.tmp"), ws.join("file.txt"));
                    let _ = std::os::unix::fs::symlink(&secret_dir, ws.join("link"));
                    // The folder and the link to the outside trade places.
                    let _ = rustix::fs::renameat_with(
                        rustix::fs::CWD,
                        ws.join("dir"),
                        rustix::fs::CWD,
                        ws.join("link"),
                        rustix::fs::RenameFlags::EXCHANGE,
                    );
                }
                rounds
            })
        };
        let mut store = store(tmp.path());
        let handle = root(&ws);
        let mut snapshots = 0;
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_secs(2) {
            if store.snapshot(&handle, &format!("s{snapshots}")).unwrap().is_some() {
                snapshots += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let rounds = swapper.join().unwrap();
        assert!(rounds > 100 && snapshots > 10, "{rounds} swaps, {snapshots} snapshots");
        for entry in walkdir::WalkDir::new(tmp.path().join("snap")) {
            let entry = entry.unwrap();
            if entry.file_type().is_file() {
                let bytes = fs::read(entry.path()).unwrap();
                assert!(
                    !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                    "{} holds a byte from outside the tree",
                    entry.path().display()
                );
            }
        }
    }

    /// One change of the kinds an agent's script can make, picked by `n`.
    fn mutate(ws: &Path, n: u64, step: u64) {
        use std::os::unix::fs::PermissionsExt;
        let dir = ws.join(format!("d{}", n % 4));
        let sub = dir.join(format!("s{}", (n / 4) % 3));
        let _ = fs::create_dir_all(&sub);
        let file = sub.join(format!("f{}", (n / 12) % 5));
        match (n / 60) % 14 {
            0 => drop(fs::write(&file, format!("write {step}"))),
            1 => drop(
                fs::OpenOptions::new()
                    .write(true)
                    .open(&file)
                    .and_then(|f| f.set_len(1)),
            ),
            2 => drop(fs::set_permissions(&file, fs::Permissions::from_mode(0o755))),
            3 => drop(fs::remove_file(&file)),
            // A directory renamed away, another renamed into its place, or swapped.
            4 => drop(fs::rename(&sub, dir.join(format!("moved{step}")))),
            5 => drop(fs::rename(ws.join("d3"), ws.join(format!("d{}", n % 3)))),
            6 => drop(rustix::fs::renameat_with(
                rustix::fs::CWD,
                ws.join("d0"),
                rustix::fs::CWD,
                ws.join("d1"),
                rustix::fs::RenameFlags::EXCHANGE,
            )),
            // A hard link, then a write through the other name.
            7 => {
                let _ = fs::write(&file, "linked");
                let _ = fs::hard_link(&file, ws.join(format!("link{}", n % 2)));
            }
            8 => drop(fs::write(
                ws.join(format!("link{}", n % 2)),
                format!("through the link {step}"),
            )),
            // A write through a mapping, with no write(2) at all.
            9 => {
                let f = fs::OpenOptions::new().read(true).write(true).open(&file);
                if let Ok(f) = f.and_then(|f| {
                    if f.metadata()?.len() >= 4 {
                        Ok(f)
                    } else {
                        Err(std::io::ErrorKind::Other.into())
                    }
                }) {
                    // SAFETY: a private test file, mapped and unmapped here.
                    unsafe {
                        let p = libc::mmap(
                            std::ptr::null_mut(),
                            4,
                            libc::PROT_WRITE,
                            libc::MAP_SHARED,
                            std::os::fd::AsRawFd::as_raw_fd(&f),
                            0,
                        );
                        if p != libc::MAP_FAILED {
                            drop(f);
                            *(p as *mut u8) = b'a' + (step % 26) as u8;
                            libc::munmap(p, 4);
                        }
                    }
                }
            }
            10 => drop(fs::remove_dir_all(&sub)),
            11 => {
                let _ = fs::remove_dir_all(&sub);
                let _ = std::os::unix::fs::symlink("..", &sub);
            }
            12 => drop(rustix::fs::mknodat(
                rustix::fs::CWD,
                dir.join("fifo"),
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o644),
                0,
            )),
            _ => {
                let deep = sub.join(format!("n{step}/m"));
                let _ = fs::create_dir_all(&deep);
                let _ = fs::write(deep.join("x"), step.to_string());
            }
        }
    }

    #[test]
    fn an_incremental_snapshot_records_exactly_what_a_full_walk_does() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        let limits = Limits::default();
        let mut tracked = SnapshotStore::create(&tmp.path().join("tracked"), &limits).unwrap();
        let mut full = SnapshotStore::create(&tmp.path().join("full"), &limits)
            .unwrap()
            .without_change_tracking();
        let handle = root(&ws);
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for step in 0..400u64 {
            for _ in 0..(step % 3) + 1 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                mutate(&ws, rng % 840, step);
            }
            let a = tracked.snapshot(&handle, "s").unwrap().map(|m| m.root.clone());
            let b = full.snapshot(&handle, "s").unwrap().map(|m| m.root.clone());
            assert_eq!(a, b, "step {step}: the incremental snapshot differs from a full walk");
            let (a, b) = (tracked.last().unwrap(), full.last().unwrap());
            assert_eq!(a.root, b.root, "step {step}");
            assert_eq!(a.refused, b.refused, "step {step}");
            let (mut sa, mut sb) = (a.stats.clone(), b.stats.clone());
            (sa.written_bytes, sb.written_bytes) = (0, 0);
            assert_eq!(sa, sb, "step {step}");
        }
        assert!(tracked.watching, "inotify watched throughout");
        assert!(
            tracked.full_walks < 200,
            "most snapshots are incremental: {} of 400 walked everything",
            tracked.full_walks
        );
        let last = tracked.last_with_entries().unwrap();
        assert_eq!(last.entries, full.last_with_entries().unwrap().entries);
        assert_eq!(
            last.entries,
            read_manifest(&tmp.path().join("tracked"), last.id).unwrap().entries
        );
    }

    #[test]
    fn a_write_through_another_hard_link_is_recorded_under_both_names() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(ws.join("a")).unwrap();
        fs::create_dir_all(ws.join("b")).unwrap();
        fs::write(ws.join("a/x"), "one").unwrap();
        let mut store = store(tmp.path());
        take(&mut store, &ws, "start");
        fs::hard_link(ws.join("a/x"), ws.join("b/y")).unwrap();
        take(&mut store, &ws, "linked");
        // Reported to b only; a/x is the same file.
        fs::write(ws.join("b/y"), "two, longer").unwrap();
        let after = take(&mut store, &ws, "written");
        assert_eq!(after.entries["a/x"], after.entries["b/y"]);
        let ManifestEntry::File { size, .. } = &after.entries["a/x"] else {
            panic!()
        };
        assert_eq!(*size, 11);
    }
}
