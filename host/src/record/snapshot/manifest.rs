//! What a snapshot is, as readers see it: its header and totals, every
//! recorded path and what was refused with why.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::walk::Kind;

/// One path of a snapshot, as readers see it (the flattened view).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ManifestEntry {
    /// A regular file.
    File {
        /// The name of its content (its object's name; see `record::extents`).
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
