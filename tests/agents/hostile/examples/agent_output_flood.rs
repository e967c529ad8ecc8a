//! Prints two gigabytes to its own stdout, then returns.
use mlrb_sdk::{Agent, TaskInfo};
use std::io::Write;

struct AgentOutputFlood;

impl Agent for AgentOutputFlood {
    fn run(_: TaskInfo) -> Result<String, String> {
        let chunk = vec![b'y'; 1 << 20];
        let mut out = std::io::stdout().lock();
        for _ in 0..2048 {
            if out.write_all(&chunk).is_err() {
                return Ok("stdout refused a write".into());
            }
        }
        let _ = out.flush();
        Ok("printed 2 GiB".into())
    }
}

mlrb_sdk::register_agent!(AgentOutputFlood);
