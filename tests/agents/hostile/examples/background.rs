//! Leaves a daemon behind after a script returns, and another after a
//! script that times out; each time asks whether anything still runs.
use hostile_agents::script_lines;
use mlrb_sdk::{Agent, TaskInfo, exec};

struct Background;

impl Agent for Background {
    fn run(_: TaskInfo) -> Result<String, String> {
        let report = [
            script_lines("returned", &exec::run("attacks/background.py", &[])),
            script_lines("after return", &exec::run("attacks/heartbeat.py", &[])),
            script_lines(
                "hung",
                &exec::run_with_timeout("attacks/background.py", &["hang"], Some(2)),
            ),
            script_lines("after timeout", &exec::run("attacks/heartbeat.py", &[])),
        ];
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(Background);
