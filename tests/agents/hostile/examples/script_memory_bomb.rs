//! A script that allocates memory until it is stopped.
use hostile_agents::{run_python, script_report};
use mlrb_sdk::{Agent, TaskInfo};

struct ScriptMemoryBomb;

const BOMB: &str = r#"
hoard = []
while True:
    hoard.append(bytearray(64 << 20))
"#;

impl Agent for ScriptMemoryBomb {
    fn run(_: TaskInfo) -> Result<String, String> {
        Ok(script_report("bomb", &run_python("bomb.py", BOMB, Some(60))))
    }
}

mlrb_sdk::register_agent!(ScriptMemoryBomb);
