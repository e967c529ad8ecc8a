//! Leaves a daemon behind and then runs a script for ten minutes: what a
//! host killed mid-script must not leave running.
use hostile_agents::script_lines;
use mlrb_sdk::{Agent, TaskInfo, exec};

struct Hang;

impl Agent for Hang {
    fn run(_: TaskInfo) -> Result<String, String> {
        Ok(script_lines(
            "hang",
            &exec::run_with_timeout("attacks/background.py", &["hang"], Some(600)),
        ))
    }
}

mlrb_sdk::register_agent!(Hang);
