//! The research agent: MLAgentBench's method on mlrb. Each step the model
//! gets the tool descriptions, the research problem, the research log of
//! older steps and the last three steps in full, and answers with
//! Reflection, Research Plan and Status, Fact Check, Thought, Action and
//! Action Input (JSON). A malformed answer is asked again (up to three
//! times); long observations are summarised. The high-level actions come
//! from `mlrb_sdk::actions`, so any agent can use them.

mod prompt;

use mlrb_sdk::actions::{self, ActionError, Models, ResearchLog};
use mlrb_sdk::{
    Agent, LlmError, LlmRequest, Message, Role, TaskInfo, ToolError, ToolErrorExt, episode, exec, llm, workspace,
};
use serde_json::Value;

/// Steps shown in full in the prompt (older ones are in the research log).
const STEPS_IN_CONTEXT: usize = 3;
/// Attempts at a well-formed answer per step.
const ATTEMPTS: usize = 3;
/// Observations longer than this are summarised.
const OBSERVATION_LIMIT: usize = 10_000;
const MODEL: &str = "main";

struct ResearchAgent;

/// One step as the prompt shows it.
struct Step {
    response: String,
    observation: String,
}

/// How the loop ends early.
enum Stop {
    /// The agent submitted.
    Final(String),
    /// The host will not go on (budget, no model): a reason to return.
    Host(String),
}

impl Agent for ResearchAgent {
    fn run(task: TaskInfo) -> Result<String, String> {
        let models = Models::default();
        let mut log = ResearchLog::default();
        let mut steps: Vec<Step> = Vec::new();
        let head = prompt::initial(&task.research_problem);
        for number in 1..=task.budget.max_steps {
            let context = prompt::with_history(
                &head,
                &log.retrieve(),
                &steps[steps.len().saturating_sub(STEPS_IN_CONTEXT)..],
            );
            let (response, parsed) = match ask_well_formed(&context) {
                Ok(answer) => answer,
                Err(Stop::Host(why)) => return Ok(why),
                Err(Stop::Final(answer)) => return Ok(answer),
            };
            let observation = match parsed {
                Ok((action, input)) => match act(&models, &mut log, &action, &input) {
                    Ok(observation) => observation,
                    Err(Stop::Final(answer)) => {
                        log.append(&format!("Step {number}: submitted the final answer"));
                        return Ok(answer);
                    }
                    Err(Stop::Host(why)) => return Ok(why),
                },
                Err(malformed) => malformed,
            };
            let observation = actions::condense_observation(&models, &response, &observation, OBSERVATION_LIMIT);
            let short: String = observation.chars().take(300).collect();
            log.append(&format!(
                "Step {number}: {}\nObservation: {short}",
                prompt::action_line(&response)
            ));
            steps.push(Step { response, observation });
        }
        Ok(format!(
            "stopped after {} steps without a final answer",
            task.budget.max_steps
        ))
    }
}

/// The model's reply, and the action it names with its input (or why the
/// reply named none).
type Answer = (String, Result<(String, Value), String>);

/// Asks for the next step until the answer parses (or attempts run out,
/// in which case the observation says what was wrong).
fn ask_well_formed(context: &str) -> Result<Answer, Stop> {
    let mut messages = vec![Message {
        role: Role::User,
        content: context.to_string(),
    }];
    let mut last = (String::new(), Err(String::new()));
    for _ in 0..ATTEMPTS {
        let request = LlmRequest {
            model: MODEL.into(),
            messages: messages.clone(),
            max_tokens: Some(2000),
            temperature: Some(0.5),
            stop: vec!["\nObservation:".into()],
        };
        let response = match llm::complete(&request) {
            Ok(completion) => completion.text,
            Err(error) => match llm_stop(&error) {
                Some(stop) => return Err(stop),
                None => return Ok((String::new(), Err(format!("EnvError: {}", ActionError::Llm(error))))),
            },
        };
        let parsed = prompt::parse(&response);
        match &parsed {
            Ok(_) => return Ok((response, parsed)),
            Err(why) => {
                episode::note(&format!("malformed response ({why}); asking again"));
                messages.push(Message {
                    role: Role::Assistant,
                    content: response.clone(),
                });
                messages.push(Message {
                    role: Role::User,
                    content: format!(
                        "Your response was not in the required format: {why}. Respond again, exactly in the format given, \
                         with a valid JSON object as Action Input."
                    ),
                });
            }
        }
        last = (
            response,
            parsed.map_err(|why| format!("The response was not in the required format: {why}")),
        );
    }
    Ok(last)
}

/// What an LLM failure means for the loop: a spent budget, no model or a
/// request the host rejects ends it; a provider failure (after the host's
/// retries), a timeout or a refusal is a failed step, told to the model.
fn llm_stop(error: &LlmError) -> Option<Stop> {
    let (kind, message) = llm::describe(error);
    episode::note(&format!("llm call failed ({kind}): {message}"));
    match error {
        LlmError::BudgetExhausted(_) | LlmError::Unavailable(_) | LlmError::InvalidRequest(_) => Some(Stop::Host(
            format!("stopped: the model is not available ({kind}: {message})"),
        )),
        _ => None,
    }
}

fn text(input: &Value, key: &str) -> Result<String, ActionError> {
    input[key]
        .as_str()
        .map(String::from)
        .ok_or_else(|| ActionError::Input(format!("Action Input needs \"{key}\" (a string)")))
}

fn number(input: &Value, key: &str) -> Result<u32, ActionError> {
    match &input[key] {
        Value::Number(n) => n.as_u64().map(|n| n as u32),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| ActionError::Input(format!("Action Input needs \"{key}\" (a line number)")))
}

/// Runs one action; its observation, or why the loop stops.
fn act(models: &Models, log: &mut ResearchLog, action: &str, input: &Value) -> Result<String, Stop> {
    let result: Result<String, ActionError> = (|| match action {
        "List Files" => {
            let dir = input["dir_path"].as_str().unwrap_or(".");
            let entries = workspace::list(dir)?;
            Ok(entries
                .iter()
                .map(|e| {
                    let name = e.path.rsplit('/').next().unwrap_or(&e.path);
                    if matches!(e.kind, mlrb_sdk::EntryKind::Directory) {
                        format!("{name}/")
                    } else {
                        name.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"))
        }
        "Copy File" => {
            let (source, destination) = (text(input, "source")?, text(input, "destination")?);
            workspace::copy(&source, &destination)?;
            Ok(format!("File {source} copied to {destination}"))
        }
        "Undo Edit Script" => {
            let script = text(input, "script_name")?;
            workspace::undo(&script)?;
            Ok(format!(
                "Content of {script} after undo the most recent edit:\n{}",
                workspace::read(&script)?
            ))
        }
        "Execute Script" => {
            let script = text(input, "script_name")?;
            let result = exec::run(&script, &[])?;
            let mut output = format!(
                "The script has been executed ({:?}, exit code {:?}). Here is the output:\n{}",
                result.termination, result.exit_code, result.stdout
            );
            if !result.stderr.trim().is_empty() {
                output.push_str(&format!("\nstderr:\n{}", result.stderr));
            }
            Ok(output)
        }
        "Understand File" => {
            actions::understand_file(models, &text(input, "file_name")?, &text(input, "things_to_look_for")?)
        }
        "Inspect Script Lines" => actions::inspect_script_lines(
            &text(input, "script_name")?,
            number(input, "start_line_number")?,
            number(input, "end_line_number")?,
        ),
        "Edit Script (AI)" => {
            let script = text(input, "script_name")?;
            let save_name = input["save_name"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| script.clone());
            actions::edit_script(models, &script, &text(input, "edit_instruction")?, &save_name)
        }
        "Reflection" => actions::reflection(models, log, &text(input, "things_to_reflect_on")?),
        "Append Summary to Research Log" => Ok(log.append(&text(input, "content")?)),
        "Retrieval from Research Log" => Ok(log.retrieve()),
        "Final Answer" => Ok(String::new()),
        other => Err(ActionError::Input(format!(
            "Invalid action: {other}. Use one of: {}",
            prompt::ACTION_NAMES.join(", ")
        ))),
    })();
    if action == "Final Answer" {
        let answer = input["final_answer"]
            .as_str()
            .map(String::from)
            .unwrap_or_else(|| input.to_string());
        return Err(Stop::Final(answer));
    }
    match result {
        Ok(observation) => Ok(observation),
        Err(ActionError::Tool(ToolError::BudgetExhausted(m))) => Err(Stop::Host(format!("stopped: {m}"))),
        Err(ActionError::Llm(error)) => match llm_stop(&error) {
            Some(stop) => Err(stop),
            None => Ok(format!("EnvError: {}", ActionError::Llm(error))),
        },
        Err(ActionError::Tool(error)) => Ok(format!("EnvError: {}: {}", error.kind(), error.message())),
        Err(error) => Ok(format!("EnvError: {error}")),
    }
}

mlrb_sdk::register_agent!(ResearchAgent);
