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

/// Where `scripts/setup.sh` installs tools in venvs (`python/` for agent
/// builds, `llm/` for the local model): `$MLRB_TOOLS_DIR`, else
/// `$XDG_CACHE_HOME/mlrb/tools`, else `~/.cache/mlrb/tools`. Not under
/// `MLRB_CACHE_DIR`: a separate compile cache (a test's, say) still finds
/// the one installed toolchain.
pub fn tools_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MLRB_TOOLS_DIR") {
        return PathBuf::from(dir);
    }
    let cache = match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(dir), _) => PathBuf::from(dir),
        (None, Some(home)) => PathBuf::from(home).join(".cache"),
        (None, None) => std::env::temp_dir(),
    };
    cache.join("mlrb/tools")
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

/// `text` with absolute paths shortened for a reader: the current folder's
/// prefix dropped (`./runs/...` becomes `runs/...`) and the home folder
/// written `~`.
pub fn shorten(text: &str) -> String {
    let mut out = text.to_string();
    if let Ok(cwd) = std::env::current_dir()
        && cwd.as_os_str().len() > 1
    {
        out = out.replace(&format!("{}/", cwd.display()), "");
    }
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from)
        && home.as_os_str().len() > 1
    {
        out = out.replace(&format!("{}/", home.display()), "~/");
    }
    out
}

#[cfg(test)]
mod shorten_tests {
    use super::*;

    #[test]
    fn paths_under_the_current_folder_and_home_are_shortened() {
        let cwd = std::env::current_dir().unwrap();
        let text = format!("error: {}/runs/x/episode.json: missing", cwd.display());
        assert_eq!(shorten(&text), "error: runs/x/episode.json: missing");
        assert_eq!(shorten("/etc/passwd"), "/etc/passwd");
    }
}
