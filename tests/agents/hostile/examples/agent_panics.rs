//! An agent with a bug: it panics after one step.
use mlrb_sdk::{Agent, TaskInfo, workspace};

struct AgentPanics;

impl Agent for AgentPanics {
    fn run(_: TaskInfo) -> Result<String, String> {
        let entries = workspace::list("").map(|e| e.len()).unwrap_or(0);
        let empty: Vec<u32> = Vec::new();
        Ok(format!("{}", empty[entries]))
    }
}

mlrb_sdk::register_agent!(AgentPanics);
