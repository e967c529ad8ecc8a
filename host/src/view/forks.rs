//! The episodes under a viewer's root and which is a fork of which.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::read_json;

/// The episodes under a root and which is a fork of which.
pub struct ForkTree {
    /// Each episode's id and canonical folder, in id order.
    episodes: Vec<(String, PathBuf)>,
    /// Each episode's parent's canonical folder, for forks.
    parents: std::collections::HashMap<String, PathBuf>,
}

impl ForkTree {
    pub fn of(root: &Path) -> Self {
        let mut tree = Self {
            episodes: Vec::new(),
            parents: std::collections::HashMap::new(),
        };
        for id in episodes(root) {
            let dir = root.join(&id);
            let record = read_json(&dir.join("episode.json")).unwrap_or(Value::Null);
            if let Some(parent) = record["fork"]["parent"].as_str() {
                let parent = Path::new(parent);
                tree.parents
                    .insert(id.clone(), parent.canonicalize().unwrap_or(parent.to_path_buf()));
            }
            tree.episodes.push((id, dir.canonicalize().unwrap_or(dir)));
        }
        tree
    }

    pub fn id_of(&self, dir: &Path) -> Option<String> {
        let dir = dir.canonicalize().ok()?;
        self.episodes.iter().find(|(_, d)| *d == dir).map(|(id, _)| id.clone())
    }

    pub fn children_of(&self, dir: &Path) -> Vec<String> {
        let Ok(dir) = dir.canonicalize() else { return Vec::new() };
        self.episodes
            .iter()
            .filter(|(id, _)| self.parents.get(id) == Some(&dir))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Every episode with its depth: each parent (or an episode whose
    /// parent is not here) followed by its forks, depth first.
    pub fn in_order(&self) -> Vec<(String, usize)> {
        let known: std::collections::HashSet<&PathBuf> = self.episodes.iter().map(|(_, d)| d).collect();
        let mut out = Vec::new();
        let mut stack: Vec<(String, PathBuf, usize)> = self
            .episodes
            .iter()
            .rev()
            .filter(|(id, _)| self.parents.get(id).is_none_or(|p| !known.contains(p)))
            .map(|(id, dir)| (id.clone(), dir.clone(), 0))
            .collect();
        while let Some((id, dir, depth)) = stack.pop() {
            out.push((id, depth));
            // A fork's chain cannot loop back (a parent exists before its
            // forks), but a hand-edited record could: depth bounds it.
            if depth < 64 {
                for child in self.children_of(&dir).into_iter().rev() {
                    let child_dir = self
                        .episodes
                        .iter()
                        .find(|(i, _)| *i == child)
                        .map(|(_, d)| d.clone())
                        .unwrap_or_default();
                    stack.push((child, child_dir, depth + 1));
                }
            }
        }
        // Forks of each other (only by hand-edited records) are still listed.
        for (id, _) in &self.episodes {
            if !out.iter().any(|(listed, _)| listed == id) {
                out.push((id.clone(), 0));
            }
        }
        out
    }
}

/// Episode directories under `root` (relative, `/`-separated), sorted.
pub fn episodes(root: &Path) -> Vec<String> {
    let is_episode = |dir: &Path| std::fs::symlink_metadata(dir.join("episode.json")).is_ok_and(|m| m.is_file());
    let mut found: Vec<String> = Vec::new();
    let mut walk = walkdir::WalkDir::new(root).min_depth(1).max_depth(4).into_iter();
    // Nothing inside an episode is listed: its workspace is the agent's.
    while let Some(entry) = walk.next() {
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_dir() || !is_episode(entry.path()) {
            continue;
        }
        walk.skip_current_dir();
        if let Ok(rel) = entry.path().strip_prefix(root) {
            found.push(rel.to_string_lossy().into_owned());
        }
    }
    found.sort();
    found
}
