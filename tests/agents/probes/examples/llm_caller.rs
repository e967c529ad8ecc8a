//! Asks the host's model five questions (see `probe_agents::llm_calls`).
use mlrb_sdk::{Agent, TaskInfo};

struct LlmCaller;

impl Agent for LlmCaller {
    fn run(_: TaskInfo) -> Result<String, String> {
        Ok(probe_agents::llm_calls(&["one", "two", "three", "four", "five"]))
    }
}

mlrb_sdk::register_agent!(LlmCaller);
