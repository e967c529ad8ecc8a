//! What a run wrote to its output folder: watched while the run runs (a run
//! whose folder grows past [`MAX_BYTES`] or [`MAX_ENTRIES`] is stopped),
//! and handed to the evaluator only when within both, regular files and
//! folders only, never a link or a special file, sparse files kept sparse.
//! The run's own folder is never mounted where the evaluator reads (a link
//! planted there could point anywhere), and is removed once copied.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::record::walk::{self, DirHandle, Opened, Usage};
use crate::sandbox::Stopper;

/// The most bytes a run's output folder may hold, counted both by apparent
/// size (a sparse file counts whole) and by size on disk (space allocated
/// past a file's end counts too). Also the largest file a run may write
/// anywhere (`RLIMIT_FSIZE`).
pub const MAX_BYTES: u64 = 256 << 20;
/// The most entries (files, folders, links, anything) it may hold.
pub const MAX_ENTRIES: u64 = 4096;
/// The deepest folder copied; deeper ones are left out.
const MAX_DEPTH: usize = 16;
/// How often the folder is measured while the run runs.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// What came of a run's output folder, as the evaluator and the records see it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outputs {
    /// Entries the folder held (at least this many, where refused).
    pub entries: u64,
    /// Bytes it held, apparent or on disk, whichever is more (at least
    /// this many, where refused).
    pub bytes: u64,
    /// Entries left out of the copy: links, special files, folders too deep.
    pub left_out: u64,
    /// Which bound the folder broke, when it did: `bytes`, `entries` or
    /// `uncounted` (a folder of it could not be read); nothing was copied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over: Option<&'static str>,
    /// Why nothing was copied, in one line (for the records, never the agent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl Outputs {
    /// Whether the folder broke a bound (the run is refused).
    pub fn is_refused(&self) -> bool {
        self.over.is_some()
    }
}

/// The caps [`walk::usage`] stops counting past.
fn caps() -> Usage {
    Usage {
        entries: MAX_ENTRIES,
        bytes: MAX_BYTES,
        allocated_bytes: MAX_BYTES,
        uncounted: 0,
    }
}

/// The bound `usage` breaks, and why in words.
fn over(usage: &Usage) -> Option<(&'static str, String)> {
    if usage.bytes.max(usage.allocated_bytes) > MAX_BYTES {
        Some(("bytes", format!("the run's outputs grew past {} MiB", MAX_BYTES >> 20)))
    } else if usage.entries > MAX_ENTRIES {
        Some(("entries", format!("the run's outputs grew past {MAX_ENTRIES} entries")))
    } else if usage.uncounted > 0 {
        let why = "a folder of the run's outputs cannot be read (or is nested too deep) to be counted";
        Some(("uncounted", why.to_string()))
    } else {
        None
    }
}

/// Resolves as `run` does, measuring the output folder `out` meanwhile
/// and stopping the run (through `stop`) once it breaks a bound: at most
/// one tick of writes gets past the bounds, each file at most
/// [`MAX_BYTES`] (the run's `RLIMIT_FSIZE`).
pub async fn watched<T>(out: &Path, stop: &Stopper, run: impl Future<Output = T>) -> T {
    let Ok(root) = DirHandle::open_root(out) else {
        return run.await;
    };
    let root = Arc::new(root);
    let watch = async {
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            let tree = root.clone();
            let counted = tokio::task::spawn_blocking(move || walk::usage(&tree, &caps())).await;
            if let Ok(Ok(usage)) = counted
                && let Some((_, why)) = over(&usage)
            {
                stop.stop(why);
                return std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        value = run => value,
        _ = watch => unreachable!("the watch never ends"),
    }
}

/// Copies what is under `from` to `to` (created) when it is within the
/// bounds, then removes `from`; where it is not, nothing is copied and
/// the answer says which bound it broke.
pub fn copy_back(from: &Path, to: &Path) -> Result<Outputs> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    let source = DirHandle::open_root(from).with_context(|| format!("opening {}", from.display()))?;
    let usage = walk::usage(&source, &caps()).with_context(|| format!("measuring {}", from.display()))?;
    let mut outputs = Outputs {
        entries: usage.entries,
        bytes: usage.bytes.max(usage.allocated_bytes),
        ..Outputs::default()
    };
    if let Some((bound, why)) = over(&usage) {
        outputs.over = Some(bound);
        outputs.refused = Some(why);
    } else {
        let dest = DirHandle::open_root(to).with_context(|| format!("opening {}", to.display()))?;
        let mut budget = Budget {
            bytes: MAX_BYTES,
            entries: MAX_ENTRIES,
            left_out: 0,
        };
        copy_dir(&source, &dest, 0, &mut budget)
            .with_context(|| format!("copying the run's outputs to {}", to.display()))?;
        outputs.left_out = budget.left_out;
    }
    drop(source);
    walk::remove_tree(from).with_context(|| format!("removing {}", from.display()))?;
    Ok(outputs)
}

/// What is left to copy: the tree may change between its count and its
/// copy only if something of the run outlived it, and even then no more
/// than the bounds is copied.
struct Budget {
    bytes: u64,
    entries: u64,
    left_out: u64,
}

fn copy_dir(source: &DirHandle, dest: &DirHandle, depth: usize, budget: &mut Budget) -> Result<()> {
    for name in source.names_up_to(budget.entries as usize)? {
        if budget.entries == 0 {
            budget.left_out += 1;
            continue;
        }
        budget.entries -= 1;
        match source.open_entry(&name) {
            Ok(Opened::Dir(dir, _)) if depth < MAX_DEPTH => {
                copy_dir(&dir, &dest.create_dir(&name)?, depth + 1, budget)?
            }
            Ok(Opened::File(file, stat)) if size_of(&stat) <= budget.bytes => {
                let target = dest.create_file(&name, 0o644)?;
                walk::copy_sparse(&file, &target)?;
                budget.bytes -= size_of(&stat);
            }
            // Links, special files, folders too deep, what is unreadable.
            _ => budget.left_out += 1,
        }
    }
    Ok(())
}

/// An entry's apparent size or size on disk, whichever is larger.
fn size_of(stat: &rustix::fs::Stat) -> u64 {
    (stat.st_size as u64).max(stat.st_blocks as u64 * 512)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    /// A sparse file within the bounds is copied sparse; links and FIFOs
    /// are left out, never followed; the run's folder is gone afterwards.
    #[test]
    fn a_sparse_file_stays_sparse_and_links_are_left_out() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, to) = (tmp.path().join("out"), tmp.path().join("copy"));
        std::fs::create_dir_all(from.join("sub")).unwrap();
        let sparse = std::fs::File::create(from.join("sub/sparse")).unwrap();
        sparse.set_len(100 << 20).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&sparse, b"end", (100 << 20) - 3).unwrap();
        std::fs::write(tmp.path().join("secret"), "secret").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret"), from.join("link")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            from.join("fifo"),
            rustix::fs::FileType::Fifo,
            0o600.into(),
            0,
        )
        .unwrap();
        let outputs = copy_back(&from, &to).unwrap();
        assert!(!outputs.is_refused(), "{outputs:?}");
        assert_eq!(outputs.left_out, 2, "{outputs:?}");
        let copy = std::fs::metadata(to.join("sub/sparse")).unwrap();
        assert_eq!(copy.len(), 100 << 20);
        assert!(copy.blocks() * 512 < 1 << 20, "{} blocks", copy.blocks());
        assert!(!to.join("link").exists() && !to.join("fifo").exists());
        assert!(!from.exists());
    }

    /// Past either bound nothing is copied, and the answer says which.
    #[test]
    fn past_a_bound_nothing_is_copied() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, to) = (tmp.path().join("out"), tmp.path().join("copy"));
        std::fs::create_dir_all(&from).unwrap();
        std::fs::File::create(from.join("big"))
            .unwrap()
            .set_len(MAX_BYTES + 1)
            .unwrap();
        let outputs = copy_back(&from, &to).unwrap();
        assert_eq!(outputs.over, Some("bytes"), "{outputs:?}");
        assert_eq!(std::fs::read_dir(&to).unwrap().count(), 0);
        std::fs::create_dir_all(&from).unwrap();
        for n in 0..=MAX_ENTRIES {
            std::fs::write(from.join(n.to_string()), "").unwrap();
        }
        let outputs = copy_back(&from, &to).unwrap();
        assert_eq!(outputs.over, Some("entries"), "{outputs:?}");
        assert_eq!(std::fs::read_dir(&to).unwrap().count(), 0);
    }
}
