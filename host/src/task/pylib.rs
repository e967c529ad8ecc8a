//! The Python helpers mlrb gives task scripts: `mlrb_eval` (safe submission
//! reading for evaluators), the MLAgentBench `get_score` adapter and the LLM
//! measurement code of the GPU tasks. They are embedded in the binary,
//! written once per content hash to the cache, and mounted read-only at
//! [`GUEST_DIR`] with `PYTHONPATH` pointing there.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::sandbox::Mount;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/pylib.rs"));
}

/// Where the helpers appear inside the sandbox.
pub const GUEST_DIR: &str = "/mlrb/lib";

/// The MLAgentBench adapter's path inside the sandbox.
pub const MLAGENTBENCH_ADAPTER: &str = "/mlrb/lib/mlrb_mlagentbench.py";

/// The helper files, by name.
pub fn files() -> &'static [(&'static str, &'static str)] {
    embedded::FILES
}

/// Writes the helpers under `cache_dir/pylib/<hash>/` unless already there.
pub fn install(cache_dir: &Path) -> Result<PathBuf> {
    let mut hasher = blake3::Hasher::new();
    for (name, text) in files() {
        hasher.update(name.as_bytes());
        hasher.update(b"\0");
        hasher.update(text.as_bytes());
        hasher.update(b"\0");
    }
    let base = cache_dir.join("pylib");
    let dir = base.join(&hasher.finalize().to_hex()[..16]);
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let staging = tempfile::Builder::new().prefix(".staging-").tempdir_in(&base)?;
    for (name, text) in files() {
        std::fs::write(staging.path().join(name), text)?;
    }
    std::fs::write(staging.path().join(".complete"), "")?;
    let staged = staging.keep();
    if std::fs::rename(&staged, &dir).is_err() {
        // Another host installed the same helpers first.
        let _ = std::fs::remove_dir_all(&staged);
    }
    Ok(dir)
}

/// The mount and environment that give a task script the helpers.
pub fn mount(cache_dir: &Path) -> Result<(Mount, (String, String))> {
    Ok(mount_dir(&install(cache_dir)?))
}

/// The mount and environment of helpers already installed at `dir`.
pub fn mount_dir(dir: &Path) -> (Mount, (String, String)) {
    (
        Mount::read_only(dir, GUEST_DIR),
        ("PYTHONPATH".to_string(), GUEST_DIR.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_are_embedded_and_installed_once() {
        let names: Vec<_> = files().iter().map(|(n, _)| *n).collect();
        assert!(names.contains(&"mlrb_mlagentbench.py"), "{names:?}");
        assert!(names.contains(&"mlrb_eval.py"), "{names:?}");
        let tmp = tempfile::tempdir().unwrap();
        let first = install(tmp.path()).unwrap();
        let second = install(tmp.path()).unwrap();
        assert_eq!(first, second);
        assert!(first.join("mlrb_mlagentbench.py").is_file());
    }
}
