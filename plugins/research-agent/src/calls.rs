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

/// The tools for the next step: a call the model just made twice in a row
/// observes nothing new, so its tool is withheld for one step (a small
/// model otherwise repeats itself to the end of the budget).
fn offered(toolbox: &Toolbox, turns: &[Turn]) -> Vec<mlrb_sdk::Tool> {
    let mut tools = toolbox.tools();
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
    tools
}

/// Runs the loop; the final answer, or why it stopped.
pub fn run(task: &TaskInfo) -> Result<String, String> {
    let mut toolbox = Toolbox::default();
    // One look at the workspace first: the tools then name its files.
    if let Outcome::Stop(why) = toolbox.run("List Files", &serde_json::json!({"dir_path": "."})) {
        return Ok(why);
    }
    let mut turns: Vec<Turn> = Vec::new();
    let (mut asked, mut well_formed) = (0u32, 0u32);
    let tally = |asked: u32, well_formed: u32| {
        episode::note(&format!("{well_formed} of {asked} answers were well-formed tool calls"));
    };
    for number in 1..=task.budget.max_steps {
        let request = LlmRequest {
            tools: offered(&toolbox, &turns),
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
