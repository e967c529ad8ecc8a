//! Exercises intermediate scoring: validates the starting workspace, runs
//! train.py and validates, breaks submission.csv and validates, then keeps
//! validating past the task's limit. Its final answer is one line per call,
//! `<label>: <outcome>`, which the tests read.
use mlrb_sdk::{Agent, ScoreReport, TaskInfo, ToolError, ToolErrorExt, episode, exec, workspace};

struct Validator;

fn line(label: &str, result: &Result<ScoreReport, ToolError>) -> String {
    match result {
        Ok(report) => format!(
            "{label}: valid={} score={} message={}",
            report.valid,
            report.score.map_or("none".to_string(), |s| s.to_string()),
            report.message
        ),
        Err(error) => format!("{label}: error {}: {}", error.kind(), error.message()),
    }
}

impl Agent for Validator {
    fn run(_: TaskInfo) -> Result<String, String> {
        let mut lines = vec![line("start", &episode::validate())];
        let trained = exec::run("train.py", &[]).map_err(|e| e.message().to_string())?;
        lines.push(format!("train: exit={:?}", trained.exit_code));
        lines.push(line("trained", &episode::validate()));
        workspace::write("submission.csv", "id,label\nnot,numbers\n").map_err(|e| e.message().to_string())?;
        lines.push(line("broken", &episode::validate()));
        lines.push(line("extra", &episode::validate()));
        Ok(lines.join("\n"))
    }
}

mlrb_sdk::register_agent!(Validator);
