//! Attacks the sandbox's init and the host from a script (ptrace, pidfd_getfd,
//! /proc/1/fd, signals, namespaces, mounts), then checks scripts still run.
use hostile_agents::script_lines;
use mlrb_sdk::{Agent, TaskInfo, exec};

struct Supervisor;

impl Agent for Supervisor {
    fn run(_: TaskInfo) -> Result<String, String> {
        let attacks = script_lines("supervisor", &exec::run("attacks/supervisor.py", &[]));
        let after = script_lines("after", &exec::run("attacks/heartbeat.py", &[]));
        Ok(format!("{attacks}\n{after}"))
    }
}

mlrb_sdk::register_agent!(Supervisor);
