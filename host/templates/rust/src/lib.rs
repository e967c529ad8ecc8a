//! {{name}}: an mlrb agent. It starts as the baseline policy (run the
//! task's train.py unchanged); make it do better.

use mlrb_sdk::{Agent, TaskInfo, ToolErrorExt, episode, exec, workspace};

struct MyAgent;

impl Agent for MyAgent {
    fn run(task: TaskInfo) -> Result<String, String> {
        episode::note(&format!("{{name}} on {}: {}", task.name, task.research_problem));
        let files: Vec<String> = workspace::list("")
            .map_err(|e| e.message().to_string())?
            .into_iter()
            .map(|entry| entry.path)
            .collect();
        episode::note(&format!("workspace: {}", files.join(", ")));
        let result = exec::run("train.py", &[]).map_err(|e| format!("train.py: {}: {}", e.kind(), e.message()))?;
        let summary = format!("train.py ended: {:?}, exit code {:?}", result.termination, result.exit_code);
        println!("{summary}");
        Ok(summary)
    }
}

mlrb_sdk::register_agent!(MyAgent);
