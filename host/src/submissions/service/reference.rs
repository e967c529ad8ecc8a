//! `mlrb submissions reference`: a person's episodes (made by `mlrb
//! human` on a benchmark's tasks) added to that benchmark version's board
//! as a reference row. They are taken into a bench of the benchmark's plan
//! (which refuses a missing, unended or unscored episode, or one of another
//! task version), scanned, signed and verified (every episode re-scored)
//! like a submission; a run whose records do not verify is refused and
//! nothing is kept. Never a submission: no submitter, no quota, no rank.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result, bail};

use super::{Layout, load_benchmarks};
use crate::bench::AgentEntry;
use crate::bench::placement::On;
use crate::submissions::reference::Reference;
use crate::submissions::{Benchmark, Store, names};

/// What the organisers ask to add.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The service folder.
    pub service: &'a Path,
    /// The benchmark version, `name/version`.
    pub benchmark: &'a str,
    /// The run folder the person's episodes were recorded in.
    pub episodes: &'a Path,
    /// The person's name (`mlrb human --name`).
    pub name: &'a str,
}

/// Adds the person's run as a reference of the benchmark version, audited
/// as `actor`.
pub async fn add(request: &Request<'_>, actor: &str) -> Result<Reference> {
    let (layout, benchmark, store) = opened(request.service, request.benchmark, request.name)?;
    let benchmark = &benchmark;
    let key = (benchmark.name.as_str(), benchmark.version.as_str());
    if let Some(there) = store.references(key.0, key.1)?.iter().find(|r| r.name == request.name) {
        bail!(
            "{}: already has a reference of {} (reference {}): choose another --name",
            request.benchmark,
            request.name,
            there.id
        );
    }
    let episodes = std::fs::canonicalize(request.episodes)
        .with_context(|| format!("--episodes {}: no such folder", request.episodes.display()))?;
    only_the_benchmarks(benchmark, &episodes, request.name)?;
    let plan = plan_of(benchmark, &episodes, request.name);
    crate::bench::check_plan_people(&plan, &format!("benchmark {}", benchmark.id()))?;
    let dir = layout.reference(key, request.name);
    let verdict = run_and_check(&layout, benchmark, plan, &episodes, &dir)
        .await
        .inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&dir);
        })?;
    store.add_reference(key, request.name, &verdict, actor)
}

/// Takes the person `name`'s reference off the benchmark version
/// `benchmark` (`name/version`), audited as `actor`: its row leaves the
/// database, so every board and trace, and its folder goes.
pub fn remove(service: &Path, benchmark: &str, name: &str, actor: &str) -> Result<Reference> {
    if let Some(why) = names::refused("--remove", name, 40) {
        bail!("{why}");
    }
    let (layout, benchmark, store) = opened(service, benchmark, name)?;
    let key = (benchmark.name.as_str(), benchmark.version.as_str());
    let removed = store.remove_reference(key, name, actor)?;
    let dir = layout.reference(key, name);
    match std::fs::remove_dir_all(&dir) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            // The row is gone, so nothing serves the folder; say what is left.
            bail!(
                "removed reference {} of {name}, but {} is left ({error}): remove it by hand",
                removed.id,
                dir.display()
            )
        }
        _ => Ok(removed),
    }
}

/// The service folder, the benchmark version `benchmark` published in it
/// and its database, for the person `name`; or why not, in one line.
fn opened(service: &Path, benchmark: &str, name: &str) -> Result<(Layout, Benchmark, Store)> {
    if let Some(why) = names::refused("--name", name, 40) {
        bail!("{why}");
    }
    let layout = Layout {
        dir: service.to_path_buf(),
    };
    if !layout.database().is_file() || !layout.key().is_file() {
        bail!(
            "{}: not a submission service folder (no service.sqlite or service.key): make one with `mlrb submissions init {}`",
            service.display(),
            service.display()
        );
    }
    let mut benchmarks = load_benchmarks(&layout.benchmarks())?;
    let Some(found) = benchmarks.remove(benchmark) else {
        let published: Vec<&str> = benchmarks.keys().map(String::as_str).collect();
        bail!(
            "--benchmark {benchmark}: not published in {} (published: {})",
            layout.benchmarks().display(),
            published.join(", ")
        );
    };
    let store = Store::open(&layout.database())?;
    Ok((layout, found, store))
}

/// Refuses episodes of `name` in `episodes` of a task or seed the
/// benchmark does not have: a reference is of the benchmark as published.
fn only_the_benchmarks(benchmark: &Benchmark, episodes: &Path, name: &str) -> Result<()> {
    let mut tasks = BTreeSet::new();
    for task in &benchmark.plan.tasks {
        tasks.insert(crate::task::resolve(task)?.spec.name.clone());
    }
    let seeds: BTreeSet<String> = benchmark.plan.seeds.list().iter().map(u64::to_string).collect();
    let folder = format!("human-{name}");
    let listed =
        std::fs::read_dir(episodes).with_context(|| format!("--episodes {}: cannot list", episodes.display()))?;
    for task in listed.filter_map(|e| e.ok()) {
        let person = task.path().join(&folder);
        let Ok(seeds_there) = std::fs::read_dir(&person) else {
            continue;
        };
        let task_name = task.file_name().to_string_lossy().into_owned();
        if !tasks.contains(&task_name) {
            bail!(
                "{}: an episode of task {task_name}, which {} does not have (its tasks: {})",
                person.display(),
                benchmark.id(),
                tasks.iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        for seed in seeds_there.filter_map(|e| e.ok()) {
            let seed = seed.file_name().to_string_lossy().into_owned();
            if !seeds.contains(&seed) && !seed.ends_with(".copying") {
                bail!(
                    "{}: seed {seed}, which {} does not run (its seeds: {}); record the benchmark's seeds with `mlrb human --seed N`",
                    person.join(&seed).display(),
                    benchmark.id(),
                    seeds.iter().cloned().collect::<Vec<_>>().join(", ")
                );
            }
        }
    }
    Ok(())
}

/// The benchmark's plan with the person as its one agent, run here.
fn plan_of(benchmark: &Benchmark, episodes: &Path, name: &str) -> crate::bench::Plan {
    let mut plan = benchmark.plan.clone();
    plan.agents = vec![AgentEntry::Human {
        human: name.into(),
        episodes: episodes.to_path_buf(),
    }];
    plan.on = Some(On::Local);
    plan
}

/// `plan` run (the episodes are taken in, nothing runs), then scanned,
/// signed and verified; refused unless every record verifies.
async fn run_and_check(
    layout: &Layout,
    benchmark: &Benchmark,
    plan: crate::bench::Plan,
    episodes: &Path,
    dir: &Path,
) -> Result<crate::submissions::verdict::Verdict> {
    if dir.exists() {
        // Left by an attempt that was refused or cut off: never listed.
        std::fs::remove_dir_all(dir).with_context(|| format!("{}: cannot clear", dir.display()))?;
    }
    std::fs::create_dir_all(dir.parent().unwrap_or(dir))?;
    let cache = crate::paths::cache_dir();
    let outcome = crate::bench::run(Some(plan), dir, &cache, true, false, std::future::pending()).await?;
    if let Some(failed) = outcome.results.iter().find(|r| r.infra_error.is_some()) {
        bail!(
            "{}: could not be taken in: {}",
            failed.id,
            failed.infra_error.as_deref().unwrap_or_default()
        );
    }
    let verdict = super::runner::check_records(layout, benchmark, dir).await?;
    if !verdict.verified() {
        bail!(
            "{}: the records do not verify, nothing added: {}",
            episodes.display(),
            verdict.verify
        );
    }
    Ok(verdict)
}
