//! What a snapshot reads, keeps and restores whatever shape the workspace
//! takes: a huge sparse file, a file rewritten in place with its time set
//! back, a deep tree, many files (the benchmark `workspace_shapes` times
//! these, 200,000 files included).

use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use super::fixtures::{root, store, take};
use super::manifest::ManifestEntry;
use super::materialize::{materialize_contained, materialize_writable};
use super::store::SnapshotStore;
use crate::limits::Limits;

/// Bytes this thread has read through `read(2)` and its kin so far.
fn bytes_read() -> u64 {
    let io = fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn on_disk(path: &Path) -> u64 {
    fs::metadata(path).unwrap().blocks() * 512
}

const GIB: u64 = 1 << 30;

#[test]
fn an_8_gib_sparse_file_is_stored_and_restored_sparse_and_its_holes_are_never_read() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let big = File::create(ws.join("sparse.bin")).unwrap();
    big.set_len(8 * GIB).unwrap();
    big.write_all_at(b"head", 0).unwrap();
    big.write_all_at(&[7u8; 10_000], 3 * GIB + 5).unwrap();
    big.write_all_at(b"tail", 8 * GIB - 4).unwrap();
    drop(big);
    let mut store = store(tmp.path());
    let before = bytes_read();
    let manifest = take(&mut store, &ws, "s");
    let read = bytes_read() - before;
    assert!(
        read < 16 << 20,
        "the snapshot read {} MiB of an 8 GiB sparse file",
        read >> 20
    );
    let ManifestEntry::File { hash, size, .. } = &manifest.entries["sparse.bin"] else {
        panic!("not recorded: {:?}", manifest.refused)
    };
    assert_eq!(*size, 8 * GIB);
    let object = tmp.path().join("snap/objects").join(hash);
    assert_eq!(fs::metadata(&object).unwrap().len(), 8 * GIB);
    assert!(
        on_disk(&object) < 1 << 20,
        "the object takes {} bytes",
        on_disk(&object)
    );
    assert_eq!(manifest.stats.bytes, 8 * GIB);
    assert!(manifest.stats.written_bytes < 1 << 20, "{:?}", manifest.stats);

    // Restored as a copy of its own (a fork) and as links (scoring): sparse, same bytes.
    for (how, out) in [("copy", tmp.path().join("fork")), ("link", tmp.path().join("scored"))] {
        if how == "copy" {
            materialize_writable(&tmp.path().join("snap"), &manifest, &out).unwrap();
        } else {
            materialize_contained(&tmp.path().join("snap"), &manifest, &out).unwrap();
        }
        let back = out.join("sparse.bin");
        assert_eq!(fs::metadata(&back).unwrap().len(), 8 * GIB, "{how}");
        assert!(
            on_disk(&back) < 1 << 20,
            "{how}: restored whole, {} bytes",
            on_disk(&back)
        );
        let file = File::open(&back).unwrap();
        let mut buf = [0u8; 4];
        file.read_exact_at(&mut buf, 8 * GIB - 4).unwrap();
        assert_eq!(&buf, b"tail", "{how}");
        file.read_exact_at(&mut buf, 3 * GIB + 5 + 9_996).unwrap();
        assert_eq!(buf, [7u8; 4], "{how}");
        file.read_exact_at(&mut buf, 5 * GIB).unwrap();
        assert_eq!(buf, [0u8; 4], "{how}");
    }
    // Its name is what the same bytes, written whole, would be named.
    let file = File::open(ws.join("sparse.bin")).unwrap();
    assert_eq!(&crate::record::extents::content_hash(&file, 8 * GIB).unwrap(), hash);

    // The next step, nothing changed there: nothing of it read at all.
    fs::write(ws.join("note.txt"), "a small change").unwrap();
    let before = bytes_read();
    take(&mut store, &ws, "t");
    assert!(bytes_read() - before < 1 << 20);
}

#[test]
fn zeros_written_out_are_stored_as_holes_and_named_as_a_hole_would_be() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let mut dense = vec![0u8; 64 << 20];
    dense[..4].copy_from_slice(b"head");
    fs::write(ws.join("dense.bin"), &dense).unwrap();
    let sparse = File::create(ws.join("sparse.bin")).unwrap();
    sparse.set_len(64 << 20).unwrap();
    sparse.write_all_at(b"head", 0).unwrap();
    let mut store = store(tmp.path());
    let manifest = take(&mut store, &ws, "s");
    let hash = |name: &str| match &manifest.entries[name] {
        ManifestEntry::File { hash, .. } => hash.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(hash("dense.bin"), hash("sparse.bin"), "one content, one object");
    let object = tmp.path().join("snap/objects").join(hash("dense.bin"));
    assert!(
        on_disk(&object) < 1 << 20,
        "the object takes {} bytes",
        on_disk(&object)
    );
}

/// Rewrites `path` in place (same size, no truncation) with `fill`, then
/// sets its access and modification times back to what they were.
fn rewrite_keeping_size_and_mtime(path: &Path, fill: u8) {
    let before = fs::metadata(path).unwrap();
    let file = fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&vec![fill; before.len() as usize], 0).unwrap();
    file.set_times(
        fs::FileTimes::new()
            .set_accessed(before.accessed().unwrap())
            .set_modified(before.modified().unwrap()),
    )
    .unwrap();
    drop(file);
    let after = fs::metadata(path).unwrap();
    assert_eq!(
        (after.len(), after.mtime(), after.mtime_nsec()),
        (before.len(), before.mtime(), before.mtime_nsec())
    );
}

#[test]
fn a_rewrite_in_place_with_its_size_and_mtime_kept_is_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    fs::create_dir_all(ws.join("d")).unwrap();
    fs::write(ws.join("d/weights.bin"), vec![1u8; 1 << 20]).unwrap();
    let limits = Limits::default();
    let mut tracked = SnapshotStore::create(&tmp.path().join("tracked"), &limits).unwrap();
    let mut full = SnapshotStore::create(&tmp.path().join("full"), &limits)
        .unwrap()
        .without_change_tracking();
    let handle = root(&ws);
    let mut names = Vec::new();
    for (step, fill) in [1u8, 2, 3, 4].into_iter().enumerate() {
        if step > 0 {
            rewrite_keeping_size_and_mtime(&ws.join("d/weights.bin"), fill);
        }
        for store in [&mut tracked, &mut full] {
            assert!(
                store.snapshot(&handle, "s").unwrap().is_some(),
                "step {step}: no change seen"
            );
            let Some(ManifestEntry::File { hash, .. }) = store.entry("d/weights.bin") else {
                panic!()
            };
            assert_eq!(
                hash,
                blake3::hash(&vec![fill; 1 << 20]).to_hex().to_string(),
                "step {step}"
            );
            names.push(hash);
        }
    }
    names.dedup();
    assert_eq!(names.len(), 4);
}

#[test]
fn a_snapshot_ends_only_once_the_clock_is_past_what_it_read() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    let mut store = store(tmp.path());
    for step in 0..20 {
        fs::write(ws.join("weights.bin"), format!("step {step}")).unwrap();
        take(&mut store, &ws, "s");
        // A change now, within the tick of the last, still gets a later
        // ctime than the one the snapshot vouches for it by.
        let ctime = fs::metadata(ws.join("weights.bin")).unwrap().ctime_nsec() as i128
            + fs::metadata(ws.join("weights.bin")).unwrap().ctime() as i128 * 1_000_000_000;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i128;
        assert!(
            now >= ctime + 10_000_000,
            "step {step}: the snapshot ended within a tick of its file's change"
        );
    }
}

#[test]
fn a_tree_1000_folders_deep_is_recorded_to_the_depth_limit_and_restored() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let mut dir = ws.clone();
    fs::create_dir_all(&dir).unwrap();
    let mut deep = root(&ws);
    for level in 0..1000 {
        deep = deep.create_dir(b"d").unwrap();
        if level % 100 == 0 {
            deep.create_file(b"f", 0o644)
                .unwrap()
                .write_all_at(level.to_string().as_bytes(), 0)
                .unwrap();
        }
        if level < 3 {
            dir = dir.join("d");
        }
    }
    let limits = Limits::default();
    let mut store = SnapshotStore::create(&tmp.path().join("snap"), &limits).unwrap();
    let manifest = take(&mut store, &ws, "s");
    let depth = limits.path_depth;
    assert_eq!(manifest.entries.keys().filter(|k| k.ends_with("/f")).count(), 1);
    assert_eq!(manifest.refused.len(), 1, "{:?}", manifest.refused);
    assert!(manifest.refused[0].why.contains("deeper"), "{:?}", manifest.refused);
    assert_eq!(manifest.refused[0].path.matches('/').count(), depth);
    // A change within the recorded part is seen; the rest stays refused.
    fs::write(dir.join("f2"), "x").unwrap();
    let second = take(&mut store, &ws, "t");
    assert!(second.entries.contains_key("d/d/d/f2"));
    assert_eq!(second.refused, manifest.refused);
    let out = tmp.path().join("out");
    materialize_writable(&tmp.path().join("snap"), &second, &out).unwrap();
    assert_eq!(fs::read_to_string(out.join("d/f")).unwrap(), "0");
    assert_eq!(fs::read_to_string(out.join("d/d/d/f2")).unwrap(), "x");
}

#[test]
fn twenty_thousand_files_are_recorded_and_a_step_after_reads_only_its_change() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    for d in 0..20 {
        let dir = ws.join(format!("d{d:03}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..1000 {
            fs::write(dir.join(format!("f{f}")), format!("{d} {f}")).unwrap();
        }
    }
    let mut store = store(tmp.path());
    let first = take(&mut store, &ws, "s");
    assert_eq!(first.stats.entries, 20_020);
    assert_eq!(first.entries.len(), 20_020);
    fs::write(ws.join("d007/f7"), "changed").unwrap();
    let before = bytes_read();
    let second = take(&mut store, &ws, "t");
    assert!(bytes_read() - before < 1 << 20);
    assert_eq!(second.entries.len(), 20_020);
    assert!(second.stats.written_bytes < first.stats.written_bytes / 10);
    let ManifestEntry::File { size, .. } = second.entries["d007/f7"] else {
        panic!()
    };
    assert_eq!(size, 7);
    // The first step's contents are one pack, the later change an object
    // of its own; both read back.
    let count = |sub: &str| fs::read_dir(tmp.path().join("snap").join(sub)).unwrap().count();
    assert_eq!((count("packs"), count("objects")), (1, 1));
    let back = tmp.path().join("back");
    materialize_writable(&tmp.path().join("snap"), &second, &back).unwrap();
    assert_eq!(fs::read_to_string(back.join("d019/f999")).unwrap(), "19 999");
    assert_eq!(fs::read_to_string(back.join("d007/f7")).unwrap(), "changed");
}
