//! How an episode is recorded: the event trace and workspace snapshots,
//! and the walk that reads agent-writable trees without leaving them.
//! Shared by the capabilities that write them and the episode that owns them.

pub mod archive;
pub mod changes;
pub mod extents;
pub mod recording;
pub mod signature;
pub mod snapshot;
pub mod trace;
pub mod walk;

use std::path::Path;

use anyhow::{Context, Result};

/// Opens a file of a run record without following a link or blocking on a
/// FIFO, and only if it is a regular file: a run directory may come from
/// someone else (a submission to verify, a recording to replay) and must
/// never lead mlrb to another file of the host or stall it.
pub fn open_record_file(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    if !file.metadata()?.is_file() {
        anyhow::bail!("{}: not a regular file", path.display());
    }
    Ok(file)
}

/// A record file as text (see [`open_record_file`]); one longer than
/// `max` bytes is refused.
pub fn read_record_file(path: &Path, max: u64) -> Result<String> {
    use std::io::Read;
    let file = open_record_file(path)?;
    if file.metadata()?.len() > max {
        anyhow::bail!(
            "{}: larger than the {} MiB a record file may be",
            path.display(),
            max >> 20
        );
    }
    let mut text = String::new();
    file.take(max)
        .read_to_string(&mut text)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(text)
}

/// The blake3 (hex) of a record file, read as a stream (see [`open_record_file`]).
pub fn hash_record_file(path: &Path) -> Result<String> {
    let file = open_record_file(path)?;
    let mut hasher = blake3::Hasher::new();
    hasher
        .update_reader(file)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    Ok(hasher.finalize().to_hex().to_string())
}

/// The most a JSON record (`episode.json`, `score.json`, a manifest or a
/// tree) may be.
pub const MAX_JSON_RECORD: u64 = 256 << 20;

/// The most `events.jsonl` may be when read back (past any trace budget).
pub const MAX_EVENTS: u64 = 2 << 30;
