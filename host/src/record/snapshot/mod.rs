//! Content-addressed workspace snapshots, stored as trees.
//!
//! * `snapshots/objects/<name>`: each distinct file content, once, named
//!   as [`super::extents`] says (its blake3 unless it holds blocks of
//!   zeros); holes are never read, and zero blocks stay holes.
//! * `snapshots/packs/<name>.pack`: where a snapshot has many new small
//!   contents (64 or more, each at most 64 KiB), they are written together
//!   as one pack instead (see `packs.rs`): 200,000 new small files cost one
//!   file, not 200,000. [`ObjectReader`] reads a content by its name
//!   wherever it lies; nothing else knows the layout.
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
//! and inode are unchanged since the last snapshot is not read again (its
//! ctime, which no script can set, is in that, and a snapshot ends only
//! once the clock is a tick past the ctimes it vouches for, so that no
//! later change can carry the same), and
//! where the kernel reports changes ([`super::changes`]) a directory in
//! which nothing changed is not even listed: a step costs what it changed.

#[cfg(test)]
mod fixtures;
mod links;
mod manifest;
mod materialize;
mod objects;
mod packs;
mod read;
mod reader;
mod scan;
#[cfg(test)]
mod shape_tests;
mod store;
mod tracking;
mod tree;

pub use links::resolve_link;
pub use manifest::{Manifest, ManifestEntry, Refused, SnapshotStats};
pub use materialize::{materialize_contained, materialize_writable};
pub use packs::{PackEntry, content_name, encode_tail};
pub use read::{is_hash, latest_manifest, list_manifests, read_manifest, read_manifest_header};
pub use reader::ObjectReader;
pub use store::SnapshotStore;
pub use tree::SHARD_ENTRIES;
