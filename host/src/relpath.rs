//! Workspace-relative paths: their one spelling, and the task's read-only
//! patterns over them (`task.toml`'s `files.read_only`, MLAgentBench's
//! `read_only_files.txt`), which the task loader checks and the workspace
//! capability enforces.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use anyhow::Context;
use globset::{Glob, GlobSet, GlobSetBuilder};

/// A read-only pattern without its `fnmatch:` prefix, and whether `*` may
/// cross `/` in it.
pub fn read_only_glob(pattern: &str) -> (&str, bool) {
    match pattern.strip_prefix("fnmatch:") {
        Some(rest) => (rest, true),
        None => (pattern, false),
    }
}

/// Files the task marks read-only: its patterns plus the inodes they matched
/// when the workspace was made.
#[derive(Debug, Default)]
pub struct ReadOnlyFiles {
    patterns: Vec<String>,
    globs: GlobSet,
    inodes: HashSet<(u64, u64)>,
    paths: BTreeSet<String>,
}

impl ReadOnlyFiles {
    /// Compiles `patterns` and records the files under `root` they match.
    pub fn scan(root: &Path, patterns: &[String]) -> anyhow::Result<Self> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let (glob, crosses_slash) = read_only_glob(pattern);
            let normal = normalize(glob).map_err(|e| anyhow::anyhow!("read-only pattern `{pattern}`: {e}"))?;
            let glob = globset::GlobBuilder::new(&normal)
                .literal_separator(!crosses_slash)
                .build()
                .with_context(|| format!("read-only pattern `{pattern}` is not a valid glob"))?;
            builder.add(glob);
            // A directory pattern protects what is inside it.
            builder.add(Glob::new(&format!("{normal}/**"))?);
        }
        let globs = builder.build()?;
        let mut files = Self {
            patterns: patterns.to_vec(),
            globs,
            ..Self::default()
        };
        for entry in walkdir::WalkDir::new(root).follow_links(false) {
            let entry = entry?;
            if !entry.file_type().is_file() {
                continue;
            }
            let rel = relative_string(root, entry.path());
            if files.globs.is_match(&rel) {
                use std::os::unix::fs::MetadataExt;
                let meta = entry.metadata()?;
                files.inodes.insert((meta.dev(), meta.ino()));
                files.paths.insert(rel);
            }
        }
        Ok(files)
    }

    /// The patterns as the task wrote them.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// The read-only files present when the workspace was made.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.paths.iter().map(String::as_str)
    }

    /// Whether a normalized workspace path matches a read-only pattern.
    pub fn matches_path(&self, rel: &str) -> bool {
        !rel.is_empty() && self.globs.is_match(rel)
    }

    /// Whether `(dev, ino)` is a file matched when the workspace was made.
    pub fn matches_inode(&self, dev: u64, ino: u64) -> bool {
        self.inodes.contains(&(dev, ino))
    }
}

/// Why a path cannot name anything inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path holds a NUL byte.
    #[error("a path may not contain NUL bytes")]
    Nul,
    /// The path is absolute.
    #[error("{0}: absolute paths are not allowed; use a path relative to the workspace root")]
    Absolute(String),
    /// The path climbs out of the workspace root.
    #[error("{0}: leads outside of the workspace")]
    Outside(String),
}

/// Turns a workspace-relative path into its one spelling (`a/b/c`, "" for
/// the root), refusing absolute paths and climbs out, lexically.
pub fn normalize(path: &str) -> Result<String, PathError> {
    if path.contains('\0') {
        return Err(PathError::Nul);
    }
    if path.starts_with('/') || path.starts_with('\\') || path.get(1..2) == Some(":") {
        return Err(PathError::Absolute(path.to_string()));
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(PathError::Outside(path.to_string()));
                }
            }
            other => parts.push(other),
        }
    }
    Ok(parts.join("/"))
}

fn relative_string(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_spellings_agree() {
        assert_eq!(normalize("x").unwrap(), "x");
        assert_eq!(normalize("./x").unwrap(), "x");
        assert_eq!(normalize("a/../x").unwrap(), "x");
        assert_eq!(normalize("a//b/./c/").unwrap(), "a/b/c");
        assert_eq!(normalize("").unwrap(), "");
        assert!(matches!(normalize("../x"), Err(PathError::Outside(_))));
        assert!(matches!(normalize("a/../../x"), Err(PathError::Outside(_))));
        assert!(matches!(normalize("/etc/passwd"), Err(PathError::Absolute(_))));
        assert!(matches!(normalize("a\0b"), Err(PathError::Nul)));
    }
}
