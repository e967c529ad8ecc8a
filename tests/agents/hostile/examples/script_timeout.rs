//! A script that sleeps far past its timeout, with children of its own.
use hostile_agents::{run_python, script_report};
use mlrb_sdk::{Agent, TaskInfo};

struct ScriptTimeout;

const SLEEPER: &str = r#"
import subprocess, time
subprocess.Popen(["sleep", "1000"])
time.sleep(1000)
"#;

impl Agent for ScriptTimeout {
    fn run(_: TaskInfo) -> Result<String, String> {
        Ok(script_report("sleep", &run_python("sleep.py", SLEEPER, Some(2))))
    }
}

mlrb_sdk::register_agent!(ScriptTimeout);
