//! Tries to change the task's read-only data, shared with later episodes
//! through the prepare cache, from a script and through tool calls.
use hostile_agents::{outcome, script_lines};
use mlrb_sdk::{Agent, TaskInfo, exec, workspace};

struct Tamper;

impl Agent for Tamper {
    fn run(_: TaskInfo) -> Result<String, String> {
        let report = [
            script_lines("tamper", &exec::run("attacks/tamper.py", &[])),
            outcome("write data/extra.csv", &workspace::write("data/extra.csv", "t")),
            outcome(
                "copy onto data/extra.csv",
                &workspace::copy("train.py", "data/extra.csv"),
            ),
        ];
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(Tamper);
