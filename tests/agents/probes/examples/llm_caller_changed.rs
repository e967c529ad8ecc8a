//! llm_caller with its second question changed: what replay must catch.
use mlrb_sdk::{Agent, TaskInfo};

struct LlmCallerChanged;

impl Agent for LlmCallerChanged {
    fn run(_: TaskInfo) -> Result<String, String> {
        Ok(probe_agents::llm_calls(&[
            "one",
            "two, said differently",
            "three",
            "four",
            "five",
        ]))
    }
}

mlrb_sdk::register_agent!(LlmCallerChanged);
