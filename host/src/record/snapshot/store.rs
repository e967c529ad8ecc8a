//! An episode's snapshot store: takes snapshots, writes their manifests,
//! remembers the last, and forks.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::limits::Limits;
use crate::record::snapshot::manifest::{Manifest, ManifestEntry};
use crate::record::snapshot::objects::{Objects, link_all, write_new};
use crate::record::snapshot::read::{read_manifest, read_manifest_header};
use crate::record::snapshot::reader::ObjectReader;
use crate::record::snapshot::scan::{Restart, Walk, Walked};
use crate::record::snapshot::tracking::{Plan, StatKey, Tracking};
use crate::record::snapshot::tree::{flat_entry, join};
use crate::record::walk::{DirHandle, Kind};

/// An episode's snapshot store: writes snapshots and remembers what it wrote.
pub struct SnapshotStore {
    dir: PathBuf,
    content: Objects,
    manifests: PathBuf,
    limits: Limits,
    /// What the last snapshot recorded and what changed since.
    pub(super) tracking: Tracking,
    next_id: u64,
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
            content: Objects::new(dir),
            manifests: dir.join("manifests"),
            limits,
            tracking: Tracking::new(),
            next_id: 0,
            written: 0,
            last: None,
        };
        for sub in [
            &store.content.objects,
            &store.content.trees,
            &store.content.packs,
            &store.manifests,
        ] {
            fs::create_dir_all(sub).with_context(|| format!("creating {}", sub.display()))?;
        }
        Ok(store)
    }

    /// Walks every entry at every snapshot, as a store without inotify does
    /// (what incremental snapshots are checked against).
    pub fn without_change_tracking(mut self) -> Self {
        self.tracking.watching = false;
        self
    }

    /// A store in `dir` that starts as `parent`'s did after its snapshot
    /// `upto` (a fork): every object, pack and tree hard-linked (copied
    /// only across filesystems), the manifests up to `upto` likewise, and
    /// that one the last snapshot taken.
    pub fn forked(dir: &Path, parent: &Path, upto: u64, limits: &Limits) -> Result<Self> {
        let mut store = Self::create(dir, limits)?;
        for sub in ["objects", "trees", "packs"] {
            if sub != "packs" || parent.join(sub).is_dir() {
                link_all(&parent.join(sub), &dir.join(sub), |name| !name.starts_with(".tmp-"))?;
            }
        }
        store.content = Objects::new(dir);
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
                self.tracking
                    .materialized
                    .insert(rel.clone(), (StatKey::of(&stat), hash.clone()));
            }
        }
    }

    /// The snapshot directory (`objects/`, `trees/`, `manifests/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folder of loose contents, one file per name (where the trace
    /// keeps long strings whole; snapshots' contents are read through
    /// [`Self::reader`], since small ones are packed).
    pub fn objects_dir(&self) -> &Path {
        &self.content.objects
    }

    /// A reader of every content written so far, loose or packed.
    pub fn reader(&self) -> Result<ObjectReader> {
        ObjectReader::open(&self.dir)
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
        for (rel, state) in &self.tracking.dirs {
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
        let state = self.tracking.dirs.get(parent)?;
        state.entries.get(name).map(|r| flat_entry(&r.entry))
    }

    /// Whether the directories in memory are the latest snapshot's (not so
    /// in a fork before its first snapshot).
    fn remembers_last(&self) -> bool {
        match (&self.last, self.tracking.dirs.get("")) {
            (Some(last), Some(root)) => last.root == root.tree,
            _ => false,
        }
    }

    /// Records the current state of the tree under `root`. Returns `None`
    /// when nothing changed since the last snapshot (nothing is written).
    /// Errors are the host's own (the store cannot be written); whatever
    /// the agent left in the tree is recorded, or refused with why.
    ///
    /// Where the kernel reports changes (see [`crate::record::changes`]), only the
    /// directories it names are listed again, and unchanged subtrees cost
    /// nothing; anything it cannot vouch for makes the walk a full one.
    pub fn snapshot(&mut self, root: &DirHandle, label: &str) -> Result<Option<&Manifest>> {
        let plan = self.tracking.plan(root);
        let walked = match plan {
            Some(plan) => match self.walk(Some(plan)).run(root) {
                Err(e) if e.is::<Restart>() => None,
                other => Some(other?),
            },
            None => None,
        };
        let walked = match walked {
            Some(walked) => walked,
            None => {
                self.tracking.full_walks += 1;
                self.walk(None).run(root)?
            }
        };
        let Walked {
            root: root_tree,
            dirs,
            mut refused,
            mut stats,
            capped,
            latest_ctime,
        } = walked;
        stats.written_bytes += self.content.flush()?;
        wait_past(latest_ctime);
        self.tracking.dirs = dirs;
        self.tracking.capped = capped;
        self.tracking.materialized.clear();
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
        // On disk (objects, trees, manifest) before any event names it, so
        // that a resume after a crash finds every snapshot the trace does.
        self.content
            .sync(&path)
            .with_context(|| format!("syncing {}", self.dir.display()))?;
        self.next_id += 1;
        self.last = Some(manifest);
        Ok(self.last.as_ref())
    }

    /// A store that goes on in `dir` after its snapshot `upto` (an episode
    /// resumed after its host died): later manifests, taken for a step that
    /// was never recorded, are removed; their objects and packs stay,
    /// unreferenced, and a pack left half-written is removed.
    pub fn resumed(dir: &Path, upto: u64, limits: &Limits) -> Result<Self> {
        let mut store = Self::create(dir, limits)?;
        for entry in fs::read_dir(&store.content.packs)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                fs::remove_file(entry.path())?;
            }
        }
        for entry in fs::read_dir(&store.manifests)? {
            let entry = entry?;
            let name = entry.file_name();
            let id = name
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse::<u64>().ok());
            match id {
                Some(id) if id <= upto => {
                    store.written += read_manifest_header(dir, id).map_or(0, |m| m.stats.written_bytes);
                }
                _ => fs::remove_file(entry.path())?,
            }
        }
        store.last = Some(read_manifest_header(dir, upto)?);
        store.next_id = upto + 1;
        Ok(store)
    }

    /// A walk of the workspace into this store; `plan`: what to look at again.
    fn walk(&mut self, plan: Option<Plan>) -> Walk<'_> {
        Walk::new(&mut self.tracking, &mut self.content, &self.limits, plan)
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
}

/// The coarsest tick by which a kernel stamps file times (HZ=100), with
/// room to spare.
const TICK_NS: i128 = 20_000_000;

/// Returns once the clock is a tick past `ctime` (ns since the epoch): a
/// file the walk vouched for by its `stat` then gets another ctime from
/// any change to come, even one within the tick of its last (which a
/// coarse clock would otherwise stamp the same, and a script can set its
/// size and mtime back). At most a tick's wait, and only after a file
/// changed just before the walk.
fn wait_past(ctime: i128) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let now = now.map_or(0, |d| d.as_nanos() as i128);
    let wait = (ctime + TICK_NS - now).clamp(0, TICK_NS);
    if wait > 0 {
        std::thread::sleep(std::time::Duration::from_nanos(wait as u64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::snapshot::fixtures::{root, store, take};
    use crate::record::snapshot::materialize::materialize_contained;
    use crate::record::snapshot::read::latest_manifest;
    use crate::record::snapshot::tree::SHARD_ENTRIES;

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

    /// Many new small files are one pack; a fork and a resumed store read
    /// it and never write those contents again, and a resume clears a pack
    /// left half-written.
    #[test]
    fn small_contents_are_packed_and_a_fork_or_resume_reads_the_pack() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(&ws).unwrap();
        for i in 0..100 {
            fs::write(ws.join(format!("f{i}")), format!("small {i}")).unwrap();
        }
        let mut store = store(tmp.path());
        let first = take(&mut store, &ws, "s");
        let snap = tmp.path().join("snap");
        let listed = |dir: &Path, sub: &str| fs::read_dir(dir.join(sub)).unwrap().count();
        assert_eq!((listed(&snap, "packs"), listed(&snap, "objects")), (1, 0));
        let child = tmp.path().join("child");
        let mut forked = SnapshotStore::forked(&child, &snap, first.id, &Limits::default()).unwrap();
        fs::write(ws.join("f0"), "small 1").unwrap();
        fs::write(ws.join("new"), "new").unwrap();
        let second = take(&mut forked, &ws, "t");
        assert_eq!((listed(&child, "packs"), listed(&child, "objects")), (1, 1));
        let back = tmp.path().join("back");
        materialize_contained(&child, &second, &back).unwrap();
        assert_eq!(fs::read_to_string(back.join("f0")).unwrap(), "small 1");
        assert_eq!(fs::read_to_string(back.join("f99")).unwrap(), "small 99");
        fs::write(snap.join("packs/.tmp-1-1"), "half a pack").unwrap();
        let mut resumed = SnapshotStore::resumed(&snap, first.id, &Limits::default()).unwrap();
        assert_eq!(listed(&snap, "packs"), 1);
        fs::write(ws.join("f0"), "small 0").unwrap();
        take(&mut resumed, &ws, "u");
        assert_eq!((listed(&snap, "packs"), listed(&snap, "objects")), (1, 1));
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
        assert!(tracked.tracking.watching, "inotify watched throughout");
        assert!(
            tracked.tracking.full_walks < 200,
            "most snapshots are incremental: {} of 400 walked everything",
            tracked.tracking.full_walks
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
