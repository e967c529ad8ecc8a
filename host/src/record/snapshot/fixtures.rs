//! What the tests of the snapshot files share: a store in a scratch
//! folder, and a snapshot taken that must record a change.

use std::path::Path;

use super::manifest::Manifest;
use super::store::SnapshotStore;
use crate::limits::Limits;
use crate::record::walk::DirHandle;

pub fn store(tmp: &Path) -> SnapshotStore {
    SnapshotStore::create(&tmp.join("snap"), &Limits::default()).unwrap()
}

pub fn root(path: &Path) -> DirHandle {
    DirHandle::open_root(path).unwrap()
}

/// Takes a snapshot that must record a change; it, with its entries.
pub fn take(store: &mut SnapshotStore, ws: &Path, label: &str) -> Manifest {
    store.snapshot(&root(ws), label).unwrap().expect("a change");
    store.last_with_entries().unwrap()
}
