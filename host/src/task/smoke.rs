//! The smoke profile (`--smoke` of `mlrb tasks test`, `run` and `bench`):
//! a task's real preparation, starter, evaluator (and an agent's
//! episode), run on the CPU and offline against the stand-in hub
//! ([`super::hub::Hub::stand_in`]: toy models and synthetic data in each
//! real dataset's schema), so that the scripts run unchanged in seconds.
//!
//! Nothing of it can reach a benchmark result: a smoke task's prepared data
//! have their own key and a [`PREPARED_MARK`] that evaluation outside the
//! profile refuses, and its records and reports say `smoke` wherever a
//! score appears.

use std::path::Path;

use super::requirements::HostOffer;
use super::{Task, hub};

/// The file beside prepared data that marks them as the smoke profile's.
pub const PREPARED_MARK: &str = "smoke";
/// What every table and page of smoke results says first.
pub const BANNER: &str = "SMOKE PROFILE: stand-in data and toy models; these scores measure nothing";
/// What the smoke profile leaves of a task's memory and time per script.
const MAX_MEMORY_MB: u64 = 8192;
const MAX_SCRIPT_SECONDS: u64 = 900;

/// The task as the smoke profile runs it: no GPU, no network, one CPU
/// (toy models gain nothing from more, and PyTorch's threads beside other
/// work on a small machine slow each step a hundredfold), a few GiB and
/// minutes per script. `on_gpu` (the host offers GPUs): a GPU task keeps
/// its GPUs, of any memory, so the same toy models run through CUDA, a
/// check of the scripts' GPU path and of the sandbox's GPU passthrough.
pub fn resources(mut task: Task, on_gpu: bool) -> Task {
    let resources = &mut task.spec.resources;
    if !on_gpu {
        resources.gpus = 0;
    }
    resources.gpu_memory_gb = 0.0;
    resources.network = Default::default();
    resources.cpus = 1.0;
    resources.memory_mb = resources.memory_mb.min(MAX_MEMORY_MB);
    resources.script_timeout_seconds = resources.script_timeout_seconds.min(MAX_SCRIPT_SECONDS);
    task.prepare_network = false;
    task
}

/// Why `task` has no smoke profile, if it has none: known from its folder
/// alone (for an MLAgentBench folder, the overlay's word), so that a run
/// is refused before anything starts.
pub fn refusal(task: &Task) -> Option<String> {
    if task.layout != super::Layout::MlAgentBench {
        return None;
    }
    match super::mlagentbench::known(&task.root) {
        Some(known) if known.smoke.is_some() => None,
        Some(known) => Some(format!(
            "the smoke profile does not run the upstream MLAgentBench folder `{}`: {}; it runs with its real \
             data only (`mlrb tasks check --suite mlagentbench` says what it needs)",
            task.spec.name,
            known.no_smoke.as_deref().unwrap_or("mlrb has no stand-in data for it")
        )),
        None => Some(format!(
            "`{}` is not an unchanged upstream MLAgentBench folder, so the smoke profile has no stand-in for \
             its data: test it with its real data",
            task.spec.name
        )),
    }
}

/// Refuses, before anything starts, a `--smoke` run of `task` that cannot
/// be: the task has no stand-in, or the user's `--network` asks for what
/// the offline profile never gives.
pub fn check(task: &Task, overrides: &crate::limits::Overrides) -> anyhow::Result<()> {
    if let Some(why) = refusal(task) {
        anyhow::bail!("task {} has no smoke profile: {why}", task.spec.name);
    }
    if overrides.network == Some(true) {
        anyhow::bail!(
            "--smoke runs offline against the stand-in hub: drop --network (or `network = true` in the plan)"
        );
    }
    Ok(())
}

/// `task` in its smoke profile, exactly as every command runs it: its
/// [`resources`] (keeping its GPUs where `offer` has some) and the
/// stand-in hub (built once), so that its data are prepared apart (the
/// key's `smoke-` prefix); or the one-line reason it has none.
pub async fn profile(task: &Task, offer: &HostOffer<'_>, cache_dir: &Path) -> Result<Task, String> {
    if let Some(why) = refusal(task) {
        return Err(why);
    }
    let task = resources(task.clone(), offer.gpus.size() > 0);
    let stand_in = hub::Hub::stand_in(&task, offer.sandbox, cache_dir)
        .await
        .map_err(|error| format!("{error:#}").replace('\n', " "))?;
    let missing = stand_in.missing(&task);
    if !missing.is_empty() {
        return Err(format!(
            "the stand-in hub has nothing for {}: add it to host/python/mlrb_standin.py",
            missing.join(", ")
        ));
    }
    Ok(Task {
        hub: Some(stand_in),
        ..task
    })
}

/// `task` in the smoke profile with an empty stand-in (for tests elsewhere).
#[cfg(test)]
pub(super) fn for_tests(task: Task) -> Task {
    Task {
        hub: Some(super::hub::for_tests(&[], &[])),
        ..resources(task, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_takes_gpus_and_network_away() {
        let task = Task::load(&super::super::builtin_tasks_dir().join("mini_baby_lm")).unwrap();
        assert!(task.spec.resources.gpus > 0 && task.spec.resources.network.granted());
        let on_gpu = resources(task.clone(), true);
        assert_eq!(
            (on_gpu.spec.resources.gpus, on_gpu.spec.resources.gpu_memory_gb),
            (1, 0.0)
        );
        let smoke = resources(task, false);
        let r = &smoke.spec.resources;
        assert_eq!((r.gpus, r.gpu_memory_gb), (0, 0.0));
        assert!(!r.network.granted() && !smoke.prepare_network());
        assert!(r.memory_mb <= MAX_MEMORY_MB && r.script_timeout_seconds <= MAX_SCRIPT_SECONDS);
        assert_eq!(r.cpus, 1.0);
    }
}
