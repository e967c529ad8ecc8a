//! The stored tree format: one JSON object per directory, its entries and
//! the ones refused, and the shards a large directory is split into.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::snapshot::manifest::ManifestEntry;
use crate::record::walk::Kind;

/// Directories with more entries than this are stored as shards.
pub const SHARD_ENTRIES: usize = 2048;

/// How a tree names one of its entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub(super) enum TreeEntry {
    File { hash: String, size: u64, executable: bool },
    Dir { tree: String },
    Symlink { target: String },
}

/// A refused entry inside a tree: its name and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct RefusedName {
    pub(super) name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) name_hex: Option<String>,
    pub(super) kind: Kind,
    pub(super) why: String,
}

/// One directory (or one shard of a large one).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Tree {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) entries: BTreeMap<String, TreeEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) refused: Vec<RefusedName>,
    /// Set instead of the above for a large directory: shard key → tree.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) shards: BTreeMap<String, String>,
}

/// A manifest entry from a tree entry.
pub(super) fn flat_entry(entry: &TreeEntry) -> ManifestEntry {
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

/// The path of `name` in the directory at `parent` (`""` is the root).
pub(super) fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}/{name}")
    }
}

/// How many bits of a name's hash pick its shard in a directory of `n`
/// entries: about sqrt(n/2) shards, which keeps a one-file change's rewrite
/// (one shard plus the shard index) smallest.
pub(super) fn shard_bits(n: usize) -> u32 {
    let shards = ((n / 2) as f64).sqrt().max(2.0);
    (shards.log2().round() as u32).clamp(1, 16)
}

/// The shard a name belongs to in a large directory.
pub(super) fn shard_of(name: &[u8], bits: u32) -> String {
    let hash = blake3::hash(name);
    let prefix = u32::from_be_bytes(hash.as_bytes()[..4].try_into().unwrap_or_default());
    format!("{:04x}", prefix >> (32 - bits))
}
