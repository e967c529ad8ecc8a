//! Probe agents for mlrb's benchmarks (see host/benches/) and tests.

use mlrb_sdk::{LlmRequest, ToolErrorExt, exec, llm, workspace};

/// Asks model `main` once per prompt, in order, stopping after two refusals
/// for a spent budget. Each answer is appended to `answers.txt` in the
/// workspace; a script then prints its own environment (to show what a
/// script can see). Returns one line per call:
/// `call N: ok <text> (<in>+<out> tokens)` or `call N: <kind>: <message>`,
/// then `script env: ...`.
pub fn llm_calls(prompts: &[&str]) -> String {
    let mut lines = Vec::new();
    let mut exhausted = 0;
    for (i, prompt) in prompts.iter().enumerate() {
        let request = LlmRequest {
            max_tokens: Some(64),
            temperature: Some(0.0),
            stop: vec!["STOP".into()],
            ..llm::request(
                "main",
                vec![llm::system("You are a test double's audience."), llm::user(prompt)],
            )
        };
        match llm::complete(&request) {
            Ok(c) => {
                let _ = workspace::append("answers.txt", &format!("{}\n", c.text));
                lines.push(format!(
                    "call {}: ok {} ({}+{} tokens, {})",
                    i + 1,
                    c.text,
                    c.input_tokens,
                    c.output_tokens,
                    c.finish_reason
                ));
            }
            Err(error) => {
                let (kind, message) = llm::describe(&error);
                lines.push(format!("call {}: {kind}: {message}", i + 1));
                if kind == "budget-exhausted" {
                    exhausted += 1;
                    if exhausted == 2 {
                        break;
                    }
                }
            }
        }
    }
    let script = "import os\nprint(' '.join(f'{k}={v}' for k, v in sorted(os.environ.items())))\n";
    let env = workspace::write("print_env.py", script).and_then(|_| exec::run("print_env.py", &[]));
    match env {
        Ok(result) => lines.push(format!("script env: {}", result.stdout.trim())),
        Err(error) => lines.push(format!("script env: {}: {}", error.kind(), error.message())),
    }
    lines.join("\n")
}
