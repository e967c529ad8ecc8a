//! Attacks the launcher that starts the episode's scripts (its memory, its
//! descriptors, tracing, signals, its socket) from a script, then runs a
//! control script whose exit status must come back as it is: a launcher
//! taken over would report what the agent chooses.
use hostile_agents::script_lines;
use mlrb_sdk::{Agent, TaskInfo, exec};

struct Launcher;

impl Agent for Launcher {
    fn run(_: TaskInfo) -> Result<String, String> {
        let attacks = script_lines("launcher", &exec::run("attacks/launcher.py", &[]));
        let control = script_lines("control", &exec::run("attacks/exit7.py", &[]));
        Ok(format!("{attacks}\n{control}"))
    }
}

mlrb_sdk::register_agent!(Launcher);
