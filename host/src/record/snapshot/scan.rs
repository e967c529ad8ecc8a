//! One snapshot's walk of the workspace: every directory listed (a full
//! walk), or only those the plan names, the rest taken as remembered.

use std::collections::BTreeMap;
use std::fs;

use anyhow::Result;

use crate::limits::Limits;
use crate::record::snapshot::manifest::{Refused, SnapshotStats};
use crate::record::snapshot::objects::Objects;
use crate::record::snapshot::tracking::{DirState, Plan, Remembered, StatKey, Tracking};
use crate::record::snapshot::tree::{RefusedName, SHARD_ENTRIES, Tree, TreeEntry, join, shard_bits, shard_of};
use crate::record::walk::{DirHandle, Kind, Opened, display_name, utf8_name};

/// An entry recorded, or the kind of what was refused and why.
type Recorded = std::result::Result<Remembered, (Kind, String)>;

/// An incremental walk met what only a full walk records as a full walk
/// would (a cap, a new hard link, a directory gone missing).
#[derive(Debug, thiserror::Error)]
#[error("the incremental snapshot needs a full walk")]
pub(super) struct Restart;

/// One snapshot walk in progress.
pub(super) struct Walk<'a> {
    tracking: &'a mut Tracking,
    objects: &'a mut Objects,
    limits: &'a Limits,
    /// What to look at again; `None`: everything.
    plan: Option<Plan>,
    /// The last snapshot's directories, taken as the walk uses them.
    old: BTreeMap<String, DirState>,
    /// This snapshot's.
    new: BTreeMap<String, DirState>,
    refused: Vec<Refused>,
    stats: SnapshotStats,
    capped: bool,
    /// The latest ctime (ns since the epoch) of a file this walk vouches
    /// for by its `stat`.
    latest_ctime: i128,
}

/// What a walk found.
pub(super) struct Walked {
    pub(super) root: String,
    pub(super) dirs: BTreeMap<String, DirState>,
    pub(super) refused: Vec<Refused>,
    pub(super) stats: SnapshotStats,
    pub(super) capped: bool,
    pub(super) latest_ctime: i128,
}

impl<'a> Walk<'a> {
    /// A walk that takes the directories `tracking` remembers, stores what
    /// it reads in `objects` and records what `limits` allow.
    pub(super) fn new(
        tracking: &'a mut Tracking,
        objects: &'a mut Objects,
        limits: &'a Limits,
        plan: Option<Plan>,
    ) -> Self {
        let old = std::mem::take(&mut tracking.dirs);
        Self {
            tracking,
            objects,
            limits,
            plan,
            old,
            new: BTreeMap::new(),
            refused: Vec::new(),
            stats: SnapshotStats::default(),
            capped: false,
            latest_ctime: 0,
        }
    }

    pub(super) fn run(mut self, root: &DirHandle) -> Result<Walked> {
        let incremental = self.plan.is_some();
        let result = self.dir(root, "", 0);
        let limits = self.limits;
        let over = self.stats.entries > limits.workspace_files
            || self.stats.bytes > limits.workspace_bytes
            || self.stats.allocated_bytes > limits.workspace_bytes;
        if incremental && (result.is_err() || over || self.capped) {
            // A full walk starts from what the last snapshot remembered.
            let mut old = std::mem::take(&mut self.old);
            old.append(&mut self.new);
            self.tracking.dirs = old;
            return Err(result.err().unwrap_or_else(|| Restart.into()));
        }
        Ok(Walked {
            root: result?,
            dirs: self.new,
            refused: self.refused,
            stats: self.stats,
            capped: self.capped,
            latest_ctime: self.latest_ctime,
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
        if self.tracking.watching
            && let Some(changes) = self.tracking.changes.as_mut()
            && !changes.watch(dir, rel)
        {
            tracing::debug!(
                dir = rel,
                "no inotify watch could be added: snapshots walk the whole workspace"
            );
            self.tracking.watching = false;
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
        let room = self.limits.workspace_files.saturating_sub(self.stats.entries) + 1;
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
            if self.stats.entries >= self.limits.workspace_files {
                self.stats.truncated = Some(format!(
                    "the workspace holds more than {} entries; the rest is not recorded",
                    self.limits.workspace_files
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
            let (hash, written) = self.objects.store_tree(&trees.remove("").unwrap_or_default())?;
            self.stats.written_bytes += written;
            return Ok(hash);
        }
        let mut index = Tree::default();
        for (key, shard) in trees {
            let (hash, written) = self.objects.store_tree(&shard)?;
            self.stats.written_bytes += written;
            index.shards.insert(key, hash);
        }
        let (hash, written) = self.objects.store_tree(&index)?;
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
        let outcome = if rel.len() > self.limits.path_bytes {
            Err((
                kind_now(),
                format!("its path is longer than {} bytes", self.limits.path_bytes),
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
                    .tracking
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
        let (hash, size, written) = self.objects.store_object(file, stat.st_size as u64)?;
        self.stats.written_bytes += written;
        let mut remembered = self.file_entry(stat, StatKey::of(stat), hash);
        if let TreeEntry::File { size: recorded, .. } = &mut remembered.entry
            && *recorded != size
        {
            // It shrank while read: what was read is what is recorded.
            self.stats.bytes -= *recorded - size;
            *recorded = size;
        }
        Ok(Ok(remembered))
    }

    /// Records the subdirectory `sub` at `rel` (unless too deep).
    fn subdir(&mut self, sub: &DirHandle, stat: &rustix::fs::Stat, rel: &str, depth: usize) -> Result<Recorded> {
        if depth + 1 > self.limits.path_depth {
            return Ok(Err((
                Kind::Directory,
                format!("it is deeper than {} levels", self.limits.path_depth),
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
        let max = self.limits.workspace_bytes;
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
        self.latest_ctime = self.latest_ctime.max(key.changed_ns());
        Remembered {
            entry: TreeEntry::File { hash, size, executable },
            key: Some(key),
            allocated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::snapshot::fixtures::{root, store, take};
    use crate::record::snapshot::read::read_manifest;
    use crate::record::snapshot::store::SnapshotStore;

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
}
