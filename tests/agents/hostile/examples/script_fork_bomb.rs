//! Runs a fork bomb, then checks the host still answers.
use hostile_agents::{run_python, script_report};
use mlrb_sdk::{Agent, TaskInfo, workspace};

struct ScriptForkBomb;

const BOMB: &str = r#"
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"#;

impl Agent for ScriptForkBomb {
    fn run(_: TaskInfo) -> Result<String, String> {
        let bomb = run_python("bomb.py", BOMB, Some(5));
        let after = workspace::list("").map(|e| e.len());
        Ok(format!("{}\nafter: {after:?}", script_report("bomb", &bomb)))
    }
}

mlrb_sdk::register_agent!(ScriptForkBomb);
