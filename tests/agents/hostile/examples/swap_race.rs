//! Leaves a process that keeps swapping files for links to secrets outside
//! the workspace, then makes the host snapshot, validate and evaluate.
use hostile_agents::script_lines;
use mlrb_sdk::{Agent, TaskInfo, episode, exec, workspace};

struct SwapRace;

impl Agent for SwapRace {
    fn run(_: TaskInfo) -> Result<String, String> {
        let secret = workspace::read("secret_path.txt").unwrap_or_default();
        let targets = [secret.trim(), "/etc/shadow", "/proc/self/environ", "/proc/1/environ"];
        let mut report = vec![script_lines("swapper", &exec::run("attacks/swapper.py", &targets))];
        for i in 0..5 {
            let _ = workspace::write(&format!("step{i}.txt"), "x");
            let _ = exec::run("attacks/heartbeat.py", &[]);
        }
        report.push(match episode::validate() {
            Ok(r) => format!("validate: valid={} {}", r.valid, r.message),
            Err(e) => format!("validate: error {e:?}"),
        });
        Ok(report.join("\n"))
    }
}

mlrb_sdk::register_agent!(SwapRace);
