//! The baseline agent: what MLAgentBench measures every task's starting point
//! with. It runs the task's starter `train.py` unchanged and submits whatever
//! that produced, so its score is the task's baseline.

use mlrb_sdk::{Agent, TaskInfo, Termination, ToolErrorExt, episode, exec};

struct Baseline;

impl Agent for Baseline {
    fn run(task: TaskInfo) -> Result<String, String> {
        episode::note(&format!(
            "baseline on {} {}: running train.py unchanged",
            task.name, task.version
        ));
        let result = exec::run("train.py", &[]).map_err(|e| format!("train.py: {}: {}", e.kind(), e.message()))?;
        let summary = match (result.termination, result.exit_code) {
            (Termination::Exited, Some(0)) => "train.py finished".to_string(),
            (Termination::Exited, code) => format!("train.py failed with exit code {code:?}"),
            (other, _) => format!("train.py ended: {other:?}"),
        };
        episode::note(&summary);
        println!("{summary}");
        Ok(summary)
    }
}

mlrb_sdk::register_agent!(Baseline);
