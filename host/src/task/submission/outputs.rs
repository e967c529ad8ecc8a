//! What a run wrote to its output folder, handed to the evaluator: regular
//! files and folders only, never a link or a special file, within a size
//! and count budget. The run's own folder is never mounted where the
//! evaluator reads (a link planted there could point anywhere).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::record::walk::{DirHandle, Opened, read_chunks};

/// The most bytes a run's outputs may hand over.
const MAX_BYTES: u64 = 1 << 30;
/// The most entries.
const MAX_ENTRIES: usize = 10_000;
/// The deepest folder.
const MAX_DEPTH: usize = 8;

/// Copies what is under `from` to `to` (created); what is over the budget
/// is left out.
pub fn copy_back(from: &Path, to: &Path) -> Result<()> {
    let source = DirHandle::open_root(from).with_context(|| format!("opening {}", from.display()))?;
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    let dest = DirHandle::open_root(to).with_context(|| format!("opening {}", to.display()))?;
    let mut budget = Budget {
        bytes: MAX_BYTES,
        entries: MAX_ENTRIES,
    };
    copy_dir(&source, &dest, 0, &mut budget).with_context(|| format!("copying the run's outputs to {}", to.display()))
}

struct Budget {
    bytes: u64,
    entries: usize,
}

fn copy_dir(source: &DirHandle, dest: &DirHandle, depth: usize, budget: &mut Budget) -> Result<()> {
    for name in source.names_up_to(budget.entries)? {
        if budget.entries == 0 {
            return Ok(());
        }
        budget.entries -= 1;
        match source.open_entry(&name)? {
            Opened::Dir(dir, _) if depth < MAX_DEPTH => copy_dir(&dir, &dest.create_dir(&name)?, depth + 1, budget)?,
            Opened::File(file, stat) if (stat.st_size as u64) <= budget.bytes => {
                let mut target = dest.create_file(&name, 0o644)?;
                let limit = budget.bytes;
                let copied = read_chunks(&file, limit, |chunk| target.write_all(chunk))?;
                budget.bytes -= copied.unwrap_or(limit);
            }
            _ => {}
        }
    }
    Ok(())
}
