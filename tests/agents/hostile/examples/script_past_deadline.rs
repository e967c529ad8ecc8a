//! Asks for a script timeout far beyond the episode's wall-clock budget.
use hostile_agents::{run_python, script_report, sleeper};
use mlrb_sdk::{Agent, TaskInfo};

struct ScriptPastDeadline;

impl Agent for ScriptPastDeadline {
    fn run(_: TaskInfo) -> Result<String, String> {
        let result = run_python("sleep.py", &sleeper(2000), Some(100_000));
        // Spin so that only the deadline can end the episode.
        let report = script_report("sleep", &result);
        let mut x = 0u64;
        loop {
            x = std::hint::black_box(x.wrapping_add(report.len() as u64));
        }
    }
}

mlrb_sdk::register_agent!(ScriptPastDeadline);
