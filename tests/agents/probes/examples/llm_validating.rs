//! A model-driven agent that checks its work: asks the model what to try,
//! keeps the plan in its research log, runs train.py, validates, and tells
//! the model what validate() said; its final answer is the model's reply.
use mlrb_sdk::{Agent, Message, TaskInfo, ToolErrorExt, episode, exec, llm};

struct LlmValidating;

fn ask(messages: &[Message]) -> Result<String, String> {
    llm::complete(&llm::request("main", messages.to_vec()))
        .map(|completion| completion.text)
        .map_err(|error| llm::describe(&error).1.to_string())
}

impl Agent for LlmValidating {
    fn run(task: TaskInfo) -> Result<String, String> {
        let mut messages = vec![
            llm::system("You improve machine-learning scripts."),
            llm::user(&task.research_problem),
        ];
        let plan = ask(&messages)?;
        episode::note(&format!("plan: {plan}"));
        messages.push(llm::assistant(&plan));
        let run = exec::run("train.py", &[]).map_err(|e| e.message().to_string())?;
        let told = match episode::validate() {
            Ok(report) => format!(
                "validate(): valid={} score={:?} {}",
                report.valid, report.score, report.message
            ),
            Err(error) => format!("validate() refused: {}", error.message()),
        };
        messages.push(llm::user(&format!("train.py exited with {:?}. {told}", run.exit_code)));
        ask(&messages)
    }
}

mlrb_sdk::register_agent!(LlmValidating);
