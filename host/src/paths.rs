//! Where mlrb keeps things on disk.

use std::path::PathBuf;

/// The cache for compiled agents and prepared task data:
/// `$MLRB_CACHE_DIR`, else `$XDG_CACHE_HOME/mlrb`, else `~/.cache/mlrb`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MLRB_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("mlrb");
    }
    if let Some(home) = std::env::var_os("HOME") {
        return PathBuf::from(home).join(".cache/mlrb");
    }
    std::env::temp_dir().join("mlrb-cache")
}

/// A directory-safe form of a name (agent file stems, run names).
pub fn safe_component(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = cleaned.trim_start_matches('.');
    if trimmed.is_empty() {
        "_".into()
    } else {
        trimmed.to_string()
    }
}
