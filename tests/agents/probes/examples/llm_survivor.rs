//! Calls the host's model 60 times with a tiny request, going on after
//! errors, and answers with one line per call: `ok` or the error's kind.
//! (The local model's server is killed under it in a test: the calls after
//! must be answered by the server the host starts again.)
use mlrb_sdk::{Agent, TaskInfo, llm};

struct LlmSurvivor;

impl Agent for LlmSurvivor {
    fn run(_: TaskInfo) -> Result<String, String> {
        let lines: Vec<String> = (0..60)
            .map(|_| match llm::ask("main", None, "ping", 4) {
                Ok(_) => "ok".to_string(),
                Err(error) => llm::describe(&error).0.to_string(),
            })
            .collect();
        Ok(lines.join("\n"))
    }
}

mlrb_sdk::register_agent!(LlmSurvivor);
