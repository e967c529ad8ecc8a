//! An agent of `mlrb:agent@0.2.0` (`wit/0.2.0/`), the contract before tool
//! calling: it writes a script, runs it, reads a file, validates and asks
//! the model, each through the 0.2.0 interfaces, and answers with what it
//! saw, one line per call.

// The generated bindings' functions take one argument per record field.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({
    path: "../../../wit/0.2.0",
    world: "agent",
});

use mlrb::agent::{episode, exec, llm, workspace};

struct Legacy;

impl Guest for Legacy {
    fn run(task: mlrb::agent::types::TaskInfo) -> Result<String, String> {
        let mut lines = vec![format!("task {}", task.name)];
        let wrote = workspace::write_file("legacy.py", "print('legacy ran')\n");
        lines.push(format!("write {}", wrote.is_ok()));
        match exec::execute_script("legacy.py", &[], None) {
            Ok(result) => lines.push(format!("exec {:?} {}", result.exit_code, result.stdout.trim())),
            Err(e) => lines.push(format!("exec error {e:?}")),
        }
        let listed = workspace::list_files("").map(|entries| entries.len());
        lines.push(format!(
            "list {}",
            listed.map_or_else(|e| format!("{e:?}"), |n| n.to_string())
        ));
        episode::note("a 0.2.0 agent was here");
        let usage = episode::current_usage();
        lines.push(format!("steps {}", usage.steps));
        let request = llm::Request {
            model: "main".into(),
            messages: vec![llm::Message {
                role: llm::Role::User,
                content: "Say hello.".into(),
            }],
            max_tokens: Some(16),
            temperature: None,
            stop: Vec::new(),
        };
        match llm::complete(&request) {
            Ok(completion) => lines.push(format!("llm {} ({})", completion.text, completion.finish_reason)),
            Err(e) => lines.push(format!("llm error {e:?}")),
        }
        Ok(lines.join("\n"))
    }
}

export!(Legacy);
