//! Calls the host's model 200 times with a tiny request: each call's
//! event in the trace then says how long the host took around the
//! provider's time (host/benches/llm.rs).
use mlrb_sdk::{Agent, TaskInfo, llm};

struct LlmLatency;

impl Agent for LlmLatency {
    fn run(_: TaskInfo) -> Result<String, String> {
        for _ in 0..200 {
            llm::ask("main", None, "ping", 8).map_err(|e| format!("{e:?}"))?;
        }
        Ok("200 calls".into())
    }
}

mlrb_sdk::register_agent!(LlmLatency);
