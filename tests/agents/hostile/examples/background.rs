//! Leaves a daemon behind after a script returns, after a script that
//! times out, one that kills whatever the host starts to end it, and one
//! behind a script that leaves no process free; each time asks whether
//! anything still runs.
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
            script_lines("killer", &exec::run("attacks/background.py", &["killer"])),
            script_lines("after killer", &exec::run("attacks/heartbeat.py", &[])),
            script_lines("saturate", &exec::run("attacks/background.py", &["saturate"])),
            script_lines("after saturate", &exec::run("attacks/heartbeat.py", &[])),
        ];
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(Background);
