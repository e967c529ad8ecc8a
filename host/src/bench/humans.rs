//! A person's episodes in a bench (`{ human = "NAME", episodes = "DIR" }`
//! in a plan): each task and seed of the plan must have one, recorded by
//! `mlrb human` on the same task folder, ended and scored; the bench takes
//! a copy of each into its own folder and its results as they are. Each
//! must have run under the plan's limits (`human_limits`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::plan::Plan;
use crate::episode::{EpisodeRecord, ScoreRecord};
use crate::task::overrides::Configured;

/// Where `name`'s episode of `task` with `seed` lies under the run folder `episodes`.
pub(super) fn recorded(episodes: &Path, name: &str, task: &str, seed: u64) -> PathBuf {
    crate::episode::episode_dir(episodes, task, &format!("human-{name}"), seed)
}

/// Refuses `plan` (whose limits `tasks` are configured with; `whose` names
/// it in errors: "the plan", "benchmark cpu-mini/1") when a person of it
/// lacks an ended, scored episode of one of its tasks and seeds, or has
/// one of another version of the task or under looser limits.
pub fn check_people(plan: &Plan, tasks: &[Configured], whose: &str) -> Result<()> {
    for (name, episodes) in plan.agents.iter().filter_map(super::AgentEntry::person) {
        check(
            name,
            episodes,
            tasks,
            (&plan.seeds.list(), plan.host.sandbox.unwrap_or_default()),
            whose,
        )?;
    }
    Ok(())
}

/// [`check_people`] for the tasks of `plan` as it configures them.
pub fn check_plan_people(plan: &Plan, whose: &str) -> Result<()> {
    let tasks: Vec<Configured> = plan
        .tasks
        .iter()
        .map(|t| Configured::new(crate::task::resolve(t)?, &plan.limits))
        .collect::<Result<_>>()?;
    check_people(plan, &tasks, whose)
}

fn check(
    name: &str,
    episodes: &Path,
    tasks: &[Configured],
    (seeds, sandbox): (&[u64], crate::sandbox::SandboxKind),
    whose: &str,
) -> Result<()> {
    for Configured { task, limits } in tasks {
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
            if let Some(why) = super::human_limits::looser(&record, task, limits, sandbox) {
                bail!(
                    "{}: not under the limits {whose} gives task {}: {why}",
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
