//! The MLAgentBench action set as tools: [`tools`] gives their definitions
//! for a tool-calling request (`mlagentbench-tools.json`, shared with the
//! Python and C SDKs), and a [`Toolbox`] carries out a call and says what
//! came of it. A tool-calling agent is then a few lines:
//!
//! ```no_run
//! use mlrb_sdk::toolbox::{Outcome, Toolbox, tools};
//! use mlrb_sdk::{LlmRequest, ToolChoice, llm};
//!
//! let mut toolbox = Toolbox::default();
//! let mut messages = vec![llm::user("Improve train.py's accuracy.")];
//! loop {
//!     let request = LlmRequest { tools: tools(), tool_choice: ToolChoice::Required, ..llm::request("main", messages.clone()) };
//!     let Ok(answer) = llm::complete(&request) else { break };
//!     messages.push(llm::assistant_calls(&answer));
//!     for call in &answer.tool_calls {
//!         match toolbox.call(call) {
//!             Outcome::Observation(text) => messages.push(llm::tool_result(&call.id, &text)),
//!             Outcome::Final(_) | Outcome::Stop(_) => return,
//!         }
//!     }
//! }
//! ```

use serde_json::Value;

use crate::actions::{self, ActionError, Models, ResearchLog};
use crate::{EntryKind, LlmError, Tool, ToolCall, ToolError, ToolErrorExt, exec, llm, workspace};

const DEFINITIONS: &str = include_str!("mlagentbench-tools.json");

/// One action: its tool name, its MLAgentBench name, what it does, and the
/// JSON Schema of its input.
#[derive(Debug, Clone)]
pub struct Action {
    /// The tool's name, e.g. `execute_script`.
    pub name: String,
    /// MLAgentBench's name, e.g. `Execute Script`.
    pub action: String,
    /// What it does, for the model.
    pub description: String,
    /// Its input's JSON Schema.
    pub parameters: Value,
}

impl Action {
    /// The action as a tool of an LLM request.
    pub fn into_tool(self) -> Tool {
        Tool {
            name: self.name,
            description: self.description,
            parameters: self.parameters.to_string(),
        }
    }
}

/// The MLAgentBench actions.
pub fn actions() -> Vec<Action> {
    let parsed: Value = serde_json::from_str(DEFINITIONS).expect("mlagentbench-tools.json is JSON");
    parsed
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| Action {
            name: a["name"].as_str().unwrap_or_default().to_string(),
            action: a["action"].as_str().unwrap_or_default().to_string(),
            description: a["description"].as_str().unwrap_or_default().to_string(),
            parameters: a["parameters"].clone(),
        })
        .collect()
}

/// The actions as tools of an LLM request.
pub fn tools() -> Vec<Tool> {
    actions().into_iter().map(Action::into_tool).collect()
}

/// What came of a call.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// What the action observed (an error of the action is an observation too).
    Observation(String),
    /// The agent submitted this final answer.
    Final(String),
    /// The host will not go on (a spent budget, no model): why.
    Stop(String),
}

/// Carries out actions: the models the LLM-backed ones ask, the research
/// log, and the files it knows the workspace has.
#[derive(Debug, Default)]
pub struct Toolbox {
    /// The model aliases of Understand File, Edit Script (AI), Reflection.
    pub models: Models,
    /// The research log (Reflection reads it).
    pub log: ResearchLog,
    /// Files seen by List Files or written by the actions.
    pub files: std::collections::BTreeSet<String>,
}

/// The inputs that must name a file the workspace has (`scripts`: a script).
const EXISTING: &[(&str, &str, bool)] = &[
    ("execute_script", "script_name", true),
    ("inspect_script_lines", "script_name", true),
    ("undo_edit_script", "script_name", true),
    ("understand_file", "file_name", false),
    ("copy_file", "source", false),
];

impl Toolbox {
    /// The tools, with every input that must name an existing file narrowed
    /// to the files the toolbox knows of (a model under a grammar can then
    /// only name one of them).
    pub fn tools(&self) -> Vec<Tool> {
        let mut tools = actions();
        for tool in &mut tools {
            for (name, input, scripts) in EXISTING {
                let known: Vec<&String> = self
                    .files
                    .iter()
                    .filter(|f| !scripts || f.ends_with(".py") || f.ends_with(".sh"))
                    .collect();
                if tool.name == *name && !known.is_empty() {
                    tool.parameters["properties"][input]["enum"] = serde_json::json!(known);
                }
            }
        }
        tools.into_iter().map(Action::into_tool).collect()
    }

    /// Carries out a tool call (by tool name).
    pub fn call(&mut self, call: &ToolCall) -> Outcome {
        let Some(action) = actions().into_iter().find(|a| a.name == call.name) else {
            return Outcome::Observation(format!("EnvError: no tool {:?}", call.name));
        };
        match serde_json::from_str::<Value>(&call.arguments) {
            Ok(input) => {
                let outcome = self.run(&action.action, &input);
                if matches!(outcome, Outcome::Observation(ref o) if !o.starts_with("EnvError")) {
                    for key in ["destination", "save_name"] {
                        if let Some(file) = input[key].as_str().filter(|f| !f.trim().is_empty()) {
                            self.files.insert(file.trim_start_matches("./").to_string());
                        }
                    }
                }
                outcome
            }
            Err(e) => Outcome::Observation(format!("EnvError: the arguments are not JSON: {e}")),
        }
    }

    /// Carries out an action by its MLAgentBench name with its input.
    pub fn run(&mut self, action: &str, input: &Value) -> Outcome {
        if action == "Final Answer" {
            let answer = input["final_answer"].as_str().map(String::from);
            return Outcome::Final(answer.unwrap_or_else(|| input.to_string()));
        }
        match self.observe(action, input) {
            Ok(observation) => Outcome::Observation(observation),
            Err(ActionError::Tool(ToolError::BudgetExhausted(m))) => Outcome::Stop(format!("stopped: {m}")),
            Err(ActionError::Llm(error)) => match stops(&error) {
                Some(why) => Outcome::Stop(why),
                None => Outcome::Observation(format!("EnvError: {}", ActionError::Llm(error))),
            },
            Err(ActionError::Tool(error)) => {
                Outcome::Observation(format!("EnvError: {}: {}", error.kind(), error.message()))
            }
            Err(error) => Outcome::Observation(format!("EnvError: {error}")),
        }
    }

    fn observe(&mut self, action: &str, input: &Value) -> Result<String, ActionError> {
        match action {
            "List Files" => {
                let dir = input["dir_path"].as_str().unwrap_or(".");
                let entries = workspace::list(dir)?;
                self.files.extend(
                    entries
                        .iter()
                        .filter(|e| matches!(e.kind, EntryKind::File))
                        .map(|e| e.path.clone()),
                );
                Ok(listing(&entries))
            }
            "Copy File" => {
                let (source, destination) = (text(input, "source")?, text(input, "destination")?);
                workspace::copy(&source, &destination)?;
                Ok(format!("File {source} copied to {destination}"))
            }
            "Undo Edit Script" => {
                let script = text(input, "script_name")?;
                workspace::undo(&script)?;
                let now = workspace::read(&script)?;
                Ok(format!("Content of {script} after undo the most recent edit:\n{now}"))
            }
            "Execute Script" => execute(&text(input, "script_name")?),
            "Understand File" => actions::understand_file(
                &self.models,
                &text(input, "file_name")?,
                &text(input, "things_to_look_for")?,
            ),
            "Inspect Script Lines" => actions::inspect_script_lines(
                &text(input, "script_name")?,
                number(input, "start_line_number")?,
                number(input, "end_line_number")?,
            ),
            "Edit Script (AI)" => {
                let script = text(input, "script_name")?;
                let save_name = match input["save_name"].as_str() {
                    Some(name) if !name.trim().is_empty() => name.to_string(),
                    _ => script.clone(),
                };
                actions::edit_script(&self.models, &script, &text(input, "edit_instruction")?, &save_name)
            }
            "Reflection" => actions::reflection(&self.models, &self.log, &text(input, "things_to_reflect_on")?),
            "Append Summary to Research Log" => Ok(self.log.append(&text(input, "content")?)),
            "Retrieval from Research Log" => Ok(self.log.retrieve()),
            other => {
                let names: Vec<String> = actions().into_iter().map(|a| a.action).collect();
                Err(ActionError::Input(format!(
                    "Invalid action: {other}. Use one of: {}",
                    names.join(", ")
                )))
            }
        }
    }
}

/// Whether an LLM failure ends the loop (a spent budget, no model, a
/// request the host rejects), with why; other failures are observations.
pub fn stops(error: &LlmError) -> Option<String> {
    let (kind, message) = llm::describe(error);
    crate::episode::note(&format!("llm call failed ({kind}): {message}"));
    match error {
        LlmError::BudgetExhausted(_) | LlmError::Unavailable(_) | LlmError::InvalidRequest(_) => {
            Some(format!("stopped: the model is not available ({kind}: {message})"))
        }
        _ => None,
    }
}

fn listing(entries: &[crate::DirEntry]) -> String {
    let names: Vec<String> = entries
        .iter()
        .map(|e| {
            let name = e.path.rsplit('/').next().unwrap_or(&e.path);
            match e.kind {
                EntryKind::Directory => format!("{name}/"),
                _ => name.to_string(),
            }
        })
        .collect();
    names.join("\n")
}

fn execute(script: &str) -> Result<String, ActionError> {
    let result = exec::run(script, &[])?;
    let mut output = format!(
        "The script has been executed ({:?}, exit code {:?}). Here is the output:\n{}",
        result.termination, result.exit_code, result.stdout
    );
    if !result.stderr.trim().is_empty() {
        output.push_str(&format!("\nstderr:\n{}", result.stderr));
    }
    Ok(output)
}

fn text(input: &Value, key: &str) -> Result<String, ActionError> {
    input[key]
        .as_str()
        .map(String::from)
        .ok_or_else(|| ActionError::Input(format!("the input needs \"{key}\" (a string)")))
}

fn number(input: &Value, key: &str) -> Result<u32, ActionError> {
    match &input[key] {
        Value::Number(n) => n.as_u64().map(|n| n as u32),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .ok_or_else(|| ActionError::Input(format!("the input needs \"{key}\" (a line number)")))
}
