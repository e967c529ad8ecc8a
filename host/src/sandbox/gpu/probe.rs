//! A probe of what a GPU script sees in its sandbox (`mlrb doctor
//! --gpu-probe`): run as a GPU task's steps run (its GPU passed through,
//! the Python environment named, the smoke profile's limits), it reports
//! who it is, its limits and seccomp state, its device nodes and
//! variables, what CUDA's driver and torch say, and whether what CUDA does
//! as it initialises works there (`probe.py`).

use std::path::Path;
use std::time::Duration;

use crate::sandbox::{Command, CommandLimits, Mount, Reach};

/// The probe's source, run with `python3 -c`.
pub const SOURCE: &str = include_str!("probe.py");

/// The probe as a command with `devices` (none: no GPU), its workspace
/// `workspace`, under the limits a GPU task's smoke profile gets (8 GiB,
/// 4096 processes, one CPU).
pub fn command(devices: Vec<String>, workspace: &Path) -> Command {
    let limits = crate::limits::Limits {
        script_memory_bytes: 8 << 30,
        script_max_processes: 4096,
        script_cpus: 1.0,
        ..Default::default()
    };
    Command {
        argv: ["python3", "-c", SOURCE].map(String::from).to_vec(),
        cwd: "/workspace".into(),
        mounts: vec![Mount::writable(workspace, "/workspace")],
        env: vec![],
        network: Reach::Nothing,
        limits: CommandLimits::new(&limits, Duration::from_secs(300)),
        gpus: devices,
        log_prefix: None,
        stop: Default::default(),
        meter: Default::default(),
    }
}
