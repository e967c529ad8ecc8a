//! The research loop by tool calling: each step the model gets the
//! research problem, the research log of older steps and the last steps'
//! calls and results, and must call one of the MLAgentBench tools. The
//! host checks the call against the tool's schema, so a step either acts
//! or is told exactly what was malformed.

use mlrb_sdk::toolbox::{self, Outcome, Toolbox};
use mlrb_sdk::{LlmError, LlmRequest, Message, TaskInfo, ToolChoice, actions, episode, llm};

use crate::{MODEL, STEPS_IN_CONTEXT};

/// Observations longer than this are summarised (calls and results of
/// recent steps share the context with the tools' schemas).
const OBSERVATION_LIMIT: usize = 4_000;

/// One step's turn: the model's call and what came of it.
struct Turn {
    call: Message,
    results: Vec<Message>,
}

fn system(task: &TaskInfo) -> String {
    format!(
        "You are a helpful research assistant. You work on the research problem below by calling the tools you are \
         given, one call per turn, and see each call's result.\n\n{}\
         Each turn, call the one tool that brings you closest to the goal: look at the files, run the training script \
         to measure the baseline, edit it to improve it, run it again to confirm.",
        crate::prompt::instructions(&task.research_problem)
    )
}

fn context(task: &TaskInfo, toolbox: &Toolbox, turns: &[Turn]) -> Vec<Message> {
    let mut messages = vec![llm::system(&system(task))];
    let log = toolbox.log.retrieve();
    let mut state = String::from("Here is a summary of the steps so far:\n");
    state.push_str(if log.is_empty() {
        "(none: this is the first step)"
    } else {
        &log
    });
    messages.push(llm::user(&state));
    for turn in &turns[turns.len().saturating_sub(STEPS_IN_CONTEXT)..] {
        messages.push(turn.call.clone());
        messages.extend(turn.results.iter().cloned());
    }
    messages
}

/// Tools that look or prepare (a copy is a backup); the others change what
/// a run measures or end the episode.
const LOOKING: &[&str] = &[
    "list_files",
    "understand_file",
    "inspect_script_lines",
    "reflection",
    "copy_file",
];

/// Looking calls in a row after which the next call must act.
const LOOKS_BEFORE_ACTING: u32 = 3;

/// What the episode's history makes pointless to offer: running a script
/// when nothing changed since the last run observes nothing new; undoing
/// needs an edit; after a few looks in a row it is time to act; and the
/// final answer waits until a change has been measured (an edit, then a
/// run) or the budget is nearly spent, since submitting the starter as it
/// is only reproduces the baseline.
#[derive(Debug)]
struct Progress {
    changed_since_run: bool,
    edits: u32,
    looks_in_a_row: u32,
    measured_change: bool,
    last_steps: bool,
}

impl Progress {
    fn new() -> Self {
        Self {
            changed_since_run: true,
            edits: 0,
            looks_in_a_row: 0,
            measured_change: false,
            last_steps: false,
        }
    }

    /// Counts a call that succeeded.
    fn record(&mut self, tool: &str) {
        self.looks_in_a_row = if LOOKING.contains(&tool) {
            self.looks_in_a_row + 1
        } else {
            0
        };
        match tool {
            "edit_script" => {
                self.changed_since_run = true;
                self.edits += 1;
            }
            "undo_edit_script" => {
                self.changed_since_run = true;
                self.edits = self.edits.saturating_sub(1);
            }
            "execute_script" => {
                self.measured_change |= self.changed_since_run && self.edits > 0;
                self.changed_since_run = false;
            }
            _ => {}
        }
    }

    fn pointless(&self, tool: &str) -> bool {
        match tool {
            "execute_script" => !self.changed_since_run,
            "undo_edit_script" => self.edits == 0,
            "final_answer" => !self.measured_change && !self.last_steps,
            _ => LOOKING.contains(&tool) && self.looks_in_a_row >= LOOKS_BEFORE_ACTING,
        }
    }
}

/// The tools for the next step: none that `Progress` finds pointless, and
/// a call the model just made twice in a row is withheld for one step (a
/// small model otherwise repeats itself to the end of the budget).
fn offered(toolbox: &Toolbox, turns: &[Turn], progress: &Progress) -> Vec<mlrb_sdk::Tool> {
    let all = toolbox.tools();
    let mut tools = all.clone();
    tools.retain(|t| !progress.pointless(&t.name));
    if let [.., a, b] = turns
        && !a.call.tool_calls.is_empty()
        && a.call.tool_calls.iter().map(|c| (&c.name, &c.arguments)).eq(b
            .call
            .tool_calls
            .iter()
            .map(|c| (&c.name, &c.arguments)))
    {
        tools.retain(|t| a.call.tool_calls.iter().all(|c| c.name != t.name));
    }
    if tools.is_empty() { all } else { tools }
}

/// Runs the loop; the final answer, or why it stopped.
pub fn run(task: &TaskInfo) -> Result<String, String> {
    let mut toolbox = Toolbox::default();
    // One look at the workspace first: the tools then name its files.
    if let Outcome::Stop(why) = toolbox.run("List Files", &serde_json::json!({"dir_path": "."})) {
        return Ok(why);
    }
    let mut turns: Vec<Turn> = Vec::new();
    let mut progress = Progress::new();
    let (mut asked, mut well_formed) = (0u32, 0u32);
    let tally = |asked: u32, well_formed: u32| {
        episode::note(&format!("{well_formed} of {asked} answers were well-formed tool calls"));
    };
    for number in 1..=task.budget.max_steps {
        progress.last_steps = number + 2 > task.budget.max_steps;
        let request = LlmRequest {
            tools: offered(&toolbox, &turns, &progress),
            tool_choice: ToolChoice::Required,
            max_tokens: Some(1000),
            temperature: Some(0.5),
            ..llm::request(MODEL, context(task, &toolbox, &turns))
        };
        asked += 1;
        let answer = match llm::complete(&request) {
            Ok(answer) => answer,
            Err(LlmError::MalformedAnswer(why)) => {
                toolbox
                    .log
                    .append(&format!("Step {number}: the answer was not a well-formed call: {why}"));
                continue;
            }
            Err(error) => match toolbox::stops(&error) {
                Some(why) => {
                    tally(asked, well_formed);
                    return Ok(why);
                }
                None => continue,
            },
        };
        well_formed += 1;
        let mut results = Vec::new();
        for call in &answer.tool_calls {
            let observation = match toolbox.call(call) {
                Outcome::Observation(observation) => observation,
                Outcome::Final(answer) => {
                    toolbox
                        .log
                        .append(&format!("Step {number}: submitted the final answer"));
                    tally(asked, well_formed);
                    return Ok(answer);
                }
                Outcome::Stop(why) => {
                    tally(asked, well_formed);
                    return Ok(why);
                }
            };
            if !observation.starts_with("EnvError") {
                progress.record(&call.name);
            }
            let what = format!("{} {}", call.name, call.arguments);
            let observation = actions::condense_observation(&toolbox.models, &what, &observation, OBSERVATION_LIMIT);
            let short: String = observation.chars().take(300).collect();
            toolbox
                .log
                .append(&format!("Step {number}: {what}\nObservation: {short}"));
            results.push(llm::tool_result(&call.id, &observation));
        }
        turns.push(Turn {
            call: llm::assistant_calls(&answer),
            results,
        });
    }
    tally(asked, well_formed);
    Ok(format!(
        "stopped after {} steps without a final answer",
        task.budget.max_steps
    ))
}
