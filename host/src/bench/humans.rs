//! A person's episodes in a bench (`{ human = "NAME", episodes = "DIR" }`
//! in a plan): each task and seed of the plan must have one, recorded by
//! `mlrb human` on the same task folder, ended and scored; the bench takes
//! a copy of each into its own folder and its results as they are.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::episode::{EpisodeRecord, ScoreRecord};
use crate::task::Task;

/// Where `name`'s episode of `task` with `seed` lies under the run folder `episodes`.
pub(super) fn recorded(episodes: &Path, name: &str, task: &str, seed: u64) -> PathBuf {
    crate::episode::episode_dir(episodes, task, &format!("human-{name}"), seed)
}

/// Refuses a plan whose person lacks an ended, scored episode of one of
/// its tasks and seeds, or has one of another version of the task.
pub(super) fn check(name: &str, episodes: &Path, tasks: &[&Task], seeds: &[u64]) -> Result<()> {
    for task in tasks {
        let hash = task.content_hash()?;
        for &seed in seeds {
            let dir = recorded(episodes, name, &task.spec.name, seed);
            let record = EpisodeRecord::read(&dir).with_context(|| {
                format!(
                    "agent human:{name}: no episode of task {} seed {seed} (record one with `mlrb human --task {} --name {name} --seed {seed} --out {} --run-name {}`)",
                    task.spec.name,
                    task.spec.name,
                    episodes.parent().unwrap_or(Path::new(".")).display(),
                    episodes.file_name().unwrap_or_default().to_string_lossy(),
                )
            })?;
            if record.person.as_ref().is_none_or(|p| p.name != name) {
                bail!("{}: not an episode of human:{name}", dir.display());
            }
            if record.end.is_none() || ScoreRecord::read(&dir).is_err() {
                bail!(
                    "{}: the session has not ended and been scored ({}); end it with `mlrb human --resume {}` and `task submit`",
                    dir.display(),
                    record.status(),
                    dir.display()
                );
            }
            if record.task.content_hash != hash {
                bail!(
                    "{}: recorded on another version of task {} (its folder changed since)",
                    dir.display(),
                    task.spec.name
                );
            }
        }
    }
    Ok(())
}

/// Copies the episode folder `from` to `to` (files, folders and links as
/// they are), unless `to` already holds one.
pub(super) fn copy_in(from: &Path, to: &Path) -> Result<()> {
    if to.join("episode.json").exists() {
        return Ok(());
    }
    let partial = to.with_extension("copying");
    if partial.exists() {
        std::fs::remove_dir_all(&partial)?;
    }
    copy_tree(from, &partial).with_context(|| format!("copying {} into the bench", from.display()))?;
    std::fs::rename(&partial, to)?;
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target)?;
        }
    }
    Ok(())
}
