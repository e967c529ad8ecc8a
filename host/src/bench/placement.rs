//! Where a bench's episodes run, as a plan says it: on this machine (the
//! default), or through a queue served to workers (`[cluster]`), which
//! Slurm (`[slurm]`) or Kubernetes (`[k8s]`) starts.

use serde::{Deserialize, Serialize};

/// Where a bench runs (`mlrb bench --on ...`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum On {
    /// Episodes run in this process.
    #[default]
    Local,
    /// A queue is served; workers are started by hand (`mlrb worker`).
    Server,
    /// A queue is served and a Slurm job array of workers is submitted.
    Slurm,
    /// A Kubernetes Job of workers (`--dry-run` prints its manifest).
    K8s,
}

/// The queue server of a bench on a cluster (`[cluster]` in a plan).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSetup {
    /// The address `mlrb serve` listens on [default: 0.0.0.0:0, any port].
    pub listen: String,
    /// The URL workers reach it at [default: http://<this host's name>:<port>].
    pub url: Option<String>,
    /// A lease's life without a heartbeat, in seconds: how long a dead
    /// worker's episode waits before another worker takes it.
    pub lease_seconds: u64,
    /// The largest episode upload accepted, in MiB.
    pub max_upload_mb: u64,
    /// Workers to start (Slurm array tasks, Kubernetes pods).
    pub workers: u32,
    /// Episodes a worker runs at once [default: as many as its CPUs and GPUs allow].
    pub parallel: Option<usize>,
    /// Leases given to an episode before it is recorded as an
    /// infrastructure failure (a worker that died on it each time).
    pub max_leases: u32,
    /// Every node mounts the run directory at the same path: workers write
    /// episodes into it and upload only their result lines.
    pub shared_filesystem: bool,
}

// What a `[cluster]` table leaves out (serde fills it from here).
impl Default for ClusterSetup {
    fn default() -> Self {
        Self {
            listen: "0.0.0.0:0".into(),
            url: None,
            lease_seconds: 60,
            max_upload_mb: 1024,
            workers: 2,
            parallel: None,
            max_leases: 5,
            shared_filesystem: false,
        }
    }
}

/// The Slurm job array of workers (`[slurm]` in a plan).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmSetup {
    /// `--partition` [default: the cluster's default].
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--time` of each worker, as Slurm writes it (`30`, `2:00:00`, `1-00:00:00`).
    pub time: Option<String>,
    /// `--cpus-per-task` of each worker [default: 1].
    pub cpus_per_worker: Option<u32>,
    /// `--gpus-per-task` of each worker.
    pub gpus_per_worker: Option<u32>,
    /// More `#SBATCH` lines, as written after `#SBATCH ` (e.g. `--qos=low`).
    pub sbatch: Vec<String>,
    /// The mlrb binary on the nodes [default: this one's path].
    pub mlrb: Option<String>,
}

/// The Kubernetes Job of workers (`[k8s]` in a plan).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct K8sSetup {
    /// The namespace [default: `default`].
    pub namespace: Option<String>,
    /// The worker image: mlrb and the tasks' dependencies.
    pub image: Option<String>,
    /// CPUs each worker pod requests [default: 2].
    pub cpus_per_worker: Option<u32>,
    /// Memory each worker pod requests, in MiB [default: 8192].
    pub memory_mb_per_worker: Option<u64>,
    /// GPUs each worker pod requests (`nvidia.com/gpu`).
    pub gpus_per_worker: Option<u32>,
}

/// Parses a Slurm `--time` value (`M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`,
/// `D-H:M:S`) into seconds.
pub fn slurm_time_seconds(time: &str) -> Option<u64> {
    let (days, rest) = match time.split_once('-') {
        Some((d, rest)) => (d.parse::<u64>().ok()?, rest),
        None => (0, time),
    };
    let parts: Vec<u64> = rest.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let (h, m, s) = match (time.contains('-'), parts.as_slice()) {
        (false, [m]) => (0, *m, 0),
        (false, [m, s]) => (0, *m, *s),
        (_, [h, m, s]) => (*h, *m, *s),
        (true, [h]) => (*h, 0, 0),
        (true, [h, m]) => (*h, *m, 0),
        _ => return None,
    };
    Some(((days * 24 + h) * 60 + m) * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::slurm_time_seconds;

    #[test]
    fn slurm_times_parse_as_slurm_reads_them() {
        assert_eq!(slurm_time_seconds("30"), Some(1800));
        assert_eq!(slurm_time_seconds("30:15"), Some(1815));
        assert_eq!(slurm_time_seconds("2:00:00"), Some(7200));
        assert_eq!(slurm_time_seconds("1-12"), Some(129_600));
        assert_eq!(slurm_time_seconds("1-00:30"), Some(88_200));
        assert_eq!(slurm_time_seconds("1-00:00:01"), Some(86_401));
        assert_eq!(slurm_time_seconds("soon"), None);
        assert_eq!(slurm_time_seconds("1:2:3:4"), None);
    }
}
