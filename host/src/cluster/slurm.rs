//! The Slurm side of a bench: one job array of `mlrb worker`s submitted with
//! `sbatch --array --requeue`, watched with `squeue`, cancelled with
//! `scancel`. These are run as programs and their machine-readable output
//! parsed: no Slurm crate is well kept (the REST API needs slurmrestd and
//! JWT set up, which most clusters do not offer users).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::bench::placement::{ClusterSetup, SlurmSetup, slurm_time_seconds};

/// What the worker script needs.
pub struct Submission<'a> {
    /// The Slurm settings of the plan.
    pub slurm: &'a SlurmSetup,
    /// The queue server's settings.
    pub cluster: &'a ClusterSetup,
    /// The server's URL as workers reach it.
    pub url: &'a str,
    /// The run's token file (on a filesystem the nodes share).
    pub token_file: &'a Path,
    /// Where the job's logs go.
    pub log_dir: &'a Path,
    /// Array tasks to submit.
    pub workers: u32,
    /// The run's name, the job's name.
    pub name: &'a str,
}

/// The batch script of a worker array.
pub fn script(s: &Submission<'_>) -> Result<String> {
    let mlrb = match &s.slurm.mlrb {
        Some(path) => path.clone(),
        None => std::env::current_exe()
            .context("finding this mlrb binary for the workers")?
            .display()
            .to_string(),
    };
    let mut lines = vec![
        "#!/bin/bash".to_string(),
        format!("#SBATCH --job-name=mlrb-{}", s.name),
        format!("#SBATCH --array=0-{}", s.workers.max(1) - 1),
        "#SBATCH --requeue".into(),
        // Appended to, not truncated, when the job is requeued.
        "#SBATCH --open-mode=append".into(),
        format!("#SBATCH --output={}/worker-%A_%a.log", s.log_dir.display()),
        format!("#SBATCH --cpus-per-task={}", s.slurm.cpus_per_worker.unwrap_or(1)),
        // SIGTERM well before the kill, so leases are given back cleanly.
        "#SBATCH --signal=B:TERM@120".into(),
    ];
    let mut add = |flag: &str, value: &Option<String>| {
        if let Some(value) = value {
            lines.push(format!("#SBATCH --{flag}={value}"));
        }
    };
    add("partition", &s.slurm.partition);
    add("account", &s.slurm.account);
    add("time", &s.slurm.time);
    add("gpus-per-task", &s.slurm.gpus_per_worker.map(|g| g.to_string()));
    for extra in &s.slurm.sbatch {
        if extra.contains('\n') {
            bail!("[slurm] sbatch: `{extra}` spans lines; give one option per entry");
        }
        lines.push(format!("#SBATCH {extra}"));
    }
    let mut worker = format!(
        "exec {} worker --server {} --token-file {} --name \"slurm-${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}-r${{SLURM_RESTART_COUNT:-0}}\"",
        quote(&mlrb),
        quote(s.url),
        quote(&s.token_file.display().to_string())
    );
    if let Some(limit) = s.slurm.time.as_deref() {
        let Some(seconds) = slurm_time_seconds(limit) else {
            bail!("[slurm] time: `{limit}` is not a Slurm time (minutes, H:M:S or D-H:M:S)");
        };
        worker.push_str(&format!(" --time-limit {seconds}"));
    }
    if let Some(parallel) = s.cluster.parallel {
        worker.push_str(&format!(" --parallel {parallel}"));
    }
    if s.slurm.gpus_per_worker.is_some_and(|g| g > 0) {
        // The devices Slurm gave this job, by their ids on the node.
        worker.push_str(" --gpus \"${SLURM_JOB_GPUS:-}\"");
    }
    lines.push(worker);
    Ok(lines.join("\n") + "\n")
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Runs a Slurm command, with a one-line error when it is missing or fails.
fn slurm(program: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(program).args(args).output().map_err(|e| {
        anyhow::anyhow!("cannot run `{program}` ({e}): is this a Slurm login node with Slurm's commands on PATH?")
    })?;
    if !output.status.success() {
        bail!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Refuses at once, before a run is made, where Slurm's commands are missing.
pub fn check_available() -> Result<()> {
    slurm("sbatch", &["--version"]).map(drop)
}

/// Submits a batch script; returns the job id.
pub fn submit(script: &Path) -> Result<String> {
    let out = slurm("sbatch", &["--parsable", &script.display().to_string()])?;
    // `--parsable`: "<job id>[;<cluster>]".
    let id = out.trim().split(';').next().unwrap_or_default().to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        bail!("sbatch answered `{}`, not a job id", out.trim());
    }
    Ok(id)
}

/// The array tasks of `job` that are still alive (pending, running,
/// requeued, ...), as `(task id, state)`.
pub fn alive(job: &str) -> Result<Vec<(String, String)>> {
    let out = slurm(
        "squeue",
        &["--noheader", "--array", "--states=all", "--jobs", job, "--format=%i|%T"],
    )?;
    Ok(parse_states(&out)
        .into_iter()
        .filter(|(_, state)| !ENDED.contains(&state.as_str()))
        .collect())
}

/// States of a job that will not run again by itself.
const ENDED: &[&str] = &[
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "SPECIAL_EXIT",
    "REVOKED",
];

/// `squeue --format=%i|%T` lines as `(id, state)`.
fn parse_states(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|line| line.trim().split_once('|'))
        .map(|(id, state)| (id.to_string(), state.to_string()))
        .collect()
}

/// Cancels every task of `job` still alive.
pub fn cancel(job: &str) -> Result<()> {
    slurm("scancel", &[job]).map(drop)
}

#[cfg(test)]
mod tests {
    use super::{Submission, parse_states, script};
    use crate::bench::placement::{ClusterSetup, SlurmSetup};

    #[test]
    fn the_script_asks_for_a_requeueable_array_and_passes_the_token_as_a_file() {
        let slurm = SlurmSetup {
            partition: Some("gpu".into()),
            time: Some("1:00:00".into()),
            cpus_per_worker: Some(4),
            sbatch: vec!["--qos=low".into()],
            mlrb: Some("/opt/mlrb".into()),
            ..Default::default()
        };
        let cluster = ClusterSetup::default();
        let text = script(&Submission {
            slurm: &slurm,
            cluster: &cluster,
            url: "http://login:8700",
            token_file: std::path::Path::new("/shared/run/cluster/token"),
            log_dir: std::path::Path::new("/shared/run/cluster/slurm"),
            workers: 8,
            name: "run1",
        })
        .unwrap();
        for line in [
            "#SBATCH --array=0-7",
            "#SBATCH --requeue",
            "#SBATCH --open-mode=append",
            "#SBATCH --partition=gpu",
            "#SBATCH --cpus-per-task=4",
            "#SBATCH --qos=low",
            "--token-file '/shared/run/cluster/token'",
            "--time-limit 3600",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        let bad = SlurmSetup {
            sbatch: vec!["--qos=low\nrm -rf /".into()],
            ..Default::default()
        };
        let refused = script(&Submission {
            slurm: &bad,
            ..Submission {
                slurm: &slurm,
                cluster: &cluster,
                url: "u",
                token_file: std::path::Path::new("t"),
                log_dir: std::path::Path::new("l"),
                workers: 1,
                name: "n",
            }
        });
        assert!(refused.unwrap_err().to_string().contains("spans lines"));
    }

    #[test]
    fn squeue_lines_parse_into_tasks_and_states() {
        let states = parse_states("12_0|RUNNING\n12_1|PENDING\n\n12_2|COMPLETED\n");
        assert_eq!(states.len(), 3);
        assert_eq!(states[1], ("12_1".to_string(), "PENDING".to_string()));
    }
}
