//! A script that sleeps far past its timeout, with children of its own.
use hostile_agents::{run_python, script_report, sleeper};
use mlrb_sdk::{Agent, TaskInfo};

struct ScriptTimeout;

impl Agent for ScriptTimeout {
    fn run(_: TaskInfo) -> Result<String, String> {
        Ok(script_report("sleep", &run_python("sleep.py", &sleeper(1000), Some(2))))
    }
}

mlrb_sdk::register_agent!(ScriptTimeout);
