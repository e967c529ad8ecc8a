//! What a task needs from the host (GPUs and their memory, memory, Python
//! modules in the sandbox), checked before anything starts: a run that
//! cannot succeed is refused at once with everything that is missing, not an
//! hour later.

use std::time::Duration;

use anyhow::{Result, bail};
use serde::Serialize;

use super::Task;
use crate::sandbox::gpu::{GpuHost, GpuPool};
use crate::sandbox::{self, Sandbox};

/// One thing the task needs and this host lacks.
#[derive(Debug, Clone, Serialize)]
pub struct Shortfall {
    /// The resource, as `task.toml` names it (`gpus`, `memory`, `python_packages`, ...).
    pub resource: &'static str,
    /// What the task needs and what this host has, in words.
    pub message: String,
}

/// What this host offers the task.
pub struct HostOffer<'a> {
    /// The sandbox the task's scripts would run in.
    pub sandbox: &'a dyn Sandbox,
    /// The GPUs this host may hand to episodes.
    pub gpus: &'a GpuPool,
}

/// Every requirement of `task` this host does not meet (empty: it can run).
pub async fn shortfalls(task: &Task, offer: &HostOffer<'_>) -> Vec<Shortfall> {
    let resources = &task.spec.resources;
    let mut missing = Vec::new();
    if let Some(gpu) = gpu_shortfall(resources, offer) {
        missing.push(gpu);
    }
    let mut lack = |resource, message: String| missing.push(Shortfall { resource, message });
    if let Some(total_mb) = host_memory_mb()
        && resources.memory_mb > total_mb
    {
        lack(
            "memory",
            format!("{} MiB of memory; this host has {total_mb} MiB", resources.memory_mb),
        );
    }
    // An upstream evaluator imports what the host may lack: known before
    // an episode is spent on a folder that cannot be scored.
    if task.layout == super::Layout::MlAgentBench
        && task.spec.scoring.evaluator.is_none()
        && let Some(why) = super::imports::evaluator_fault(task, offer.sandbox, &crate::paths::cache_dir()).await
    {
        lack("python_packages", why);
    }
    if let Some(why) = super::code_scan::refusal(task) {
        lack(
            "scoring",
            format!("an evaluator that reads its submission as data ({why})"),
        );
    }
    if !resources.python_packages.is_empty() {
        match missing_modules(task, offer.sandbox).await {
            Ok(absent) if absent.is_empty() => {}
            Ok(absent) => lack(
                "python_packages",
                format!(
                    "the Python modules {} in the sandbox, which lacks {} ({})",
                    resources.python_packages.join(", "),
                    absent.join(", "),
                    offer.sandbox.python_hint()
                ),
            ),
            Err(error) => lack(
                "python_packages",
                format!(
                    "the Python modules {}, which could not be checked: {error:#}",
                    resources.python_packages.join(", ")
                ),
            ),
        }
    }
    missing
}

/// Refuses, naming everything missing, when the task cannot run here.
pub async fn ensure(task: &Task, offer: &HostOffer<'_>) -> Result<()> {
    let missing = shortfalls(task, offer).await;
    if missing.is_empty() {
        return Ok(());
    }
    let needs: Vec<String> = missing.iter().map(|s| s.message.clone()).collect();
    bail!(
        "task {} cannot run on this host: it needs {}. Nothing was started",
        task.spec.name,
        needs.join("; and ")
    )
}

fn host_memory_mb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

/// Memory of each given GPU in GB, as nvidia-smi reports it; devices it does
/// not know (or no nvidia-smi) are left out, unverified, and said so.
fn gpu_memory_gb(devices: &[String]) -> Vec<(String, f64)> {
    let host = GpuHost::from_env();
    let inventory = host.inventory();
    if let Some(why) = &inventory.unavailable {
        tracing::warn!("GPU memory is not checked: {why}");
    }
    devices
        .iter()
        .filter_map(|id| {
            let mib = inventory.find(id)?.memory_mib?;
            Some((id.clone(), mib / 1024.0))
        })
        .collect()
}

/// The modules of `resources.python_packages` that python3 in the sandbox
/// cannot find.
async fn missing_modules(task: &Task, sandbox: &dyn Sandbox) -> Result<Vec<String>> {
    const PROBE: &str = "import importlib.util, sys\n\
        def absent(name):\n    try:\n        return importlib.util.find_spec(name) is None\n    except Exception:\n        return True\n\
        print(' '.join(m for m in sys.argv[1:] if absent(m)))";
    let mut argv = vec!["python3".to_string(), "-c".to_string(), PROBE.to_string()];
    argv.extend(task.spec.resources.python_packages.iter().cloned());
    let outcome = sandbox
        .run(sandbox::Command {
            argv,
            cwd: "/tmp".into(),
            mounts: Vec::new(),
            env: Vec::new(),
            network: sandbox::Reach::Nothing,
            limits: sandbox::CommandLimits {
                memory_bytes: 512 << 20,
                ..sandbox::CommandLimits::new(&crate::limits::Limits::default(), Duration::from_secs(60))
            },
            gpus: Vec::new(),
            log_prefix: None,
            stop: Default::default(),
            meter: Default::default(),
        })
        .await?;
    if !outcome.success() {
        bail!(
            "python3 in the sandbox failed: {}",
            outcome.stderr.text.trim().lines().last().unwrap_or("")
        );
    }
    Ok(outcome.stdout.text.split_whitespace().map(str::to_string).collect())
}

/// The episode's GPUs this host or sandbox cannot provide, if any.
fn gpu_shortfall(resources: &super::spec::Resources, offer: &HostOffer<'_>) -> Option<Shortfall> {
    if resources.gpus == 0 {
        return None;
    }
    let lack = |resource, message: String| Some(Shortfall { resource, message });
    let per_gpu = if resources.gpu_memory_gb > 0.0 {
        format!(" with at least {} GB each", resources.gpu_memory_gb)
    } else {
        String::new()
    };
    if !offer.sandbox.supports_gpus() {
        return lack(
            "gpus",
            format!(
                "{} GPU(s){per_gpu}, which this sandbox cannot provide (this is {})",
                resources.gpus,
                offer.sandbox.describe()
            ),
        );
    }
    let given = offer.gpus.devices();
    if (given.len() as u32) < resources.gpus {
        let ids = if given.is_empty() {
            "none".to_string()
        } else {
            given.join(",")
        };
        return lack(
            "gpus",
            format!(
                "{} GPU(s){per_gpu}; this host was given {} (--gpus {ids}; pass the device ids of NVIDIA GPUs)",
                resources.gpus,
                given.len()
            ),
        );
    }
    if let Some(why) = offer.sandbox.gpu_shortfall(given) {
        return lack("gpus", format!("{} GPU(s){per_gpu}; {why}", resources.gpus));
    }
    let (device, gb) = gpu_memory_gb(given)
        .into_iter()
        .find(|(_, gb)| resources.gpu_memory_gb > 0.0 && *gb < resources.gpu_memory_gb)?;
    lack(
        "gpu_memory",
        format!("{} GB per GPU; GPU {device} has {gb:.0} GB", resources.gpu_memory_gb),
    )
}
