//! Ignores its step budget and keeps calling tools.
use mlrb_sdk::{Agent, TaskInfo, workspace};

struct StepBudget;

impl Agent for StepBudget {
    fn run(_: TaskInfo) -> Result<String, String> {
        let mut exhausted = 0u32;
        loop {
            if workspace::list("").is_err() {
                exhausted += 1;
            }
            if exhausted > 1_000_000 {
                return Ok("the host never stopped me".into());
            }
        }
    }
}

mlrb_sdk::register_agent!(StepBudget);
