//! What a store remembers between snapshots so that the next one looks only
//! at what changed: each directory as last recorded, the kernel's reports of
//! changes, and the plan they make of what to look at again.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::record::changes::{Changed, Changes};
use crate::record::snapshot::tree::{RefusedName, TreeEntry};
use crate::record::walk::DirHandle;

/// What identifies an unchanged file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StatKey {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    dev: u64,
}

impl StatKey {
    pub(super) fn of(stat: &rustix::fs::Stat) -> Self {
        Self {
            size: stat.st_size as u64,
            mtime_ns: stat.st_mtime as i128 * 1_000_000_000 + stat.st_mtime_nsec as i128,
            ctime_ns: stat.st_ctime as i128 * 1_000_000_000 + stat.st_ctime_nsec as i128,
            ino: stat.st_ino,
            dev: stat.st_dev,
        }
    }

    /// Its ctime, in ns since the epoch: what no script can set back.
    pub(super) fn changed_ns(&self) -> i128 {
        self.ctime_ns
    }
}

/// One entry of a directory as the last snapshot recorded it.
#[derive(Debug, Clone)]
pub(super) struct Remembered {
    pub(super) entry: TreeEntry,
    /// A file's identity when it was read.
    pub(super) key: Option<StatKey>,
    /// A file's bytes on disk.
    pub(super) allocated: u64,
}

/// What the store remembers of one directory after a snapshot: enough to
/// record it again, unchanged, without a system call.
#[derive(Debug, Clone)]
pub(super) struct DirState {
    /// Its device and inode: a directory renamed into its place is another.
    pub(super) ident: (u64, u64),
    /// The hash of its tree.
    pub(super) tree: String,
    pub(super) entries: BTreeMap<String, Remembered>,
    pub(super) refused: Vec<RefusedName>,
    /// It holds a file of more than one link (whose writes through another
    /// name are reported to that name's directory only), or could not be
    /// listed: examined again at every snapshot.
    pub(super) recheck: bool,
    /// Entries, bytes and bytes on disk of its whole subtree.
    pub(super) totals: (u64, u64, u64),
}

/// The directories an incremental snapshot must look at again.
pub(super) struct Plan {
    /// Their entries changed: listed and examined again.
    pub(super) changed: HashSet<String>,
    /// They lead to a changed one: their trees are rebuilt from memory.
    pub(super) on_path: HashSet<String>,
}

/// What a store keeps from one snapshot to the next to make it incremental.
pub(super) struct Tracking {
    /// Every directory of the last snapshot, by workspace-relative path.
    pub(super) dirs: BTreeMap<String, DirState>,
    /// Files just materialized from a snapshot (a fork), known unread.
    pub(super) materialized: HashMap<String, (StatKey, String)>,
    /// The kernel's account of what changed since the last snapshot.
    pub(super) changes: Option<Changes>,
    /// False once a watch could not be added: every snapshot walks all.
    pub(super) watching: bool,
    /// The last snapshot met a cap: the next one walks all.
    pub(super) capped: bool,
    /// Snapshots that walked the whole workspace.
    pub(super) full_walks: u64,
}

impl Tracking {
    /// Nothing remembered yet, changes to be watched from the first snapshot.
    pub(super) fn new() -> Self {
        Self {
            dirs: BTreeMap::new(),
            materialized: HashMap::new(),
            changes: None,
            watching: true,
            capped: false,
            full_walks: 0,
        }
    }

    /// Which directories the next snapshot must look at, or `None` for all
    /// of them (the first snapshot, a cap met, changes not tracked or lost).
    pub(super) fn plan(&mut self, root: &DirHandle) -> Option<Plan> {
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
}
