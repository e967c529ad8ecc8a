//! A script that prints without end.
use hostile_agents::{run_python, script_report};
use mlrb_sdk::{Agent, TaskInfo};

struct ScriptOutputFlood;

const FLOOD: &str = r#"
import sys
line = "x" * (1 << 20)
while True:
    sys.stdout.write(line)
"#;

impl Agent for ScriptOutputFlood {
    fn run(_: TaskInfo) -> Result<String, String> {
        let result = run_python("flood.py", FLOOD, Some(60));
        let size = result.as_ref().map(|r| r.stdout.len()).unwrap_or(0);
        Ok(format!(
            "{}\nreturned stdout bytes: {size}",
            script_report("flood", &result).chars().take(300).collect::<String>()
        ))
    }
}

mlrb_sdk::register_agent!(ScriptOutputFlood);
