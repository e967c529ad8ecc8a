//! The research agent: MLAgentBench's research method on mlrb, in one of
//! two ways of asking the model.
//!
//! * Tool calling (the default, [`calls`]): the actions are tools of the
//!   request and the model must call one; the host checks each call
//!   against the tool's schema (and, for the local model, constrains
//!   decoding to it), so every answer is a well-formed action.
//! * The original prompt (feature `prompt-method`): each step the model
//!   gets the tool descriptions, the research problem, the research log of
//!   older steps and the last three steps in full, and answers with
//!   Reflection, Research Plan and Status, Fact Check, Thought, Action and
//!   Action Input (JSON). A malformed answer is asked again (up to three
//!   times).
//!
//! Either way long observations are summarised, and the actions are the
//! SDK's (`mlrb_sdk::toolbox`), so any agent can use them.

#[cfg(not(feature = "prompt-method"))]
mod calls;
mod prompt;

use mlrb_sdk::actions::{self, ActionError};
use mlrb_sdk::toolbox::{self, Outcome, Toolbox};
use mlrb_sdk::{Agent, LlmRequest, TaskInfo, episode, llm};
use serde_json::Value;

/// Steps shown in full in the prompt (older ones are in the research log).
pub(crate) const STEPS_IN_CONTEXT: usize = 3;
/// Attempts at a well-formed answer per step.
const ATTEMPTS: usize = 3;
/// Observations longer than this are summarised.
const OBSERVATION_LIMIT: usize = 10_000;
pub(crate) const MODEL: &str = "main";

struct ResearchAgent;

/// One step as the prompt shows it.
struct Step {
    response: String,
    observation: String,
}

impl Agent for ResearchAgent {
    fn run(task: TaskInfo) -> Result<String, String> {
        #[cfg(not(feature = "prompt-method"))]
        return calls::run(&task);
        #[cfg(feature = "prompt-method")]
        return by_prompt(&task);
    }
}

/// MLAgentBench's own loop: the action is parsed out of free text.
#[cfg_attr(not(feature = "prompt-method"), allow(dead_code))]
fn by_prompt(task: &TaskInfo) -> Result<String, String> {
    let mut toolbox = Toolbox::default();
    let mut steps: Vec<Step> = Vec::new();
    let head = prompt::initial(&task.research_problem);
    for number in 1..=task.budget.max_steps {
        let context = prompt::with_history(
            &head,
            &toolbox.log.retrieve(),
            &steps[steps.len().saturating_sub(STEPS_IN_CONTEXT)..],
        );
        let (response, parsed) = match ask_well_formed(&context) {
            Ok(answer) => answer,
            Err(why) => return Ok(why),
        };
        let observation = match parsed {
            Ok((action, input)) => match toolbox.run(&action, &input) {
                Outcome::Observation(observation) => observation,
                Outcome::Final(answer) => {
                    toolbox
                        .log
                        .append(&format!("Step {number}: submitted the final answer"));
                    return Ok(answer);
                }
                Outcome::Stop(why) => return Ok(why),
            },
            Err(malformed) => malformed,
        };
        let observation = actions::condense_observation(&toolbox.models, &response, &observation, OBSERVATION_LIMIT);
        let short: String = observation.chars().take(300).collect();
        toolbox.log.append(&format!(
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

/// The model's reply, and the action it names with its input (or why the
/// reply named none).
type Answer = (String, Result<(String, Value), String>);

/// Asks for the next step until the answer parses (or attempts run out,
/// in which case the observation says what was wrong).
/// A spent budget or no model ends it with the reason.
fn ask_well_formed(context: &str) -> Result<Answer, String> {
    let mut messages = vec![llm::user(context)];
    let mut last = (String::new(), Err(String::new()));
    for _ in 0..ATTEMPTS {
        let request = LlmRequest {
            max_tokens: Some(2000),
            temperature: Some(0.5),
            stop: vec!["\nObservation:".into()],
            ..llm::request(MODEL, messages.clone())
        };
        let response = match llm::complete(&request) {
            Ok(completion) => completion.text,
            Err(error) => match toolbox::stops(&error) {
                Some(why) => return Err(why),
                None => return Ok((String::new(), Err(format!("EnvError: {}", ActionError::Llm(error))))),
            },
        };
        let parsed = prompt::parse(&response);
        match &parsed {
            Ok(_) => return Ok((response, parsed)),
            Err(why) => {
                episode::note(&format!("malformed response ({why}); asking again"));
                messages.push(llm::assistant(&response));
                messages.push(llm::user(&format!(
                    "Your response was not in the required format: {why}. Respond again, exactly in the format given, \
                     with a valid JSON object as Action Input."
                )));
            }
        }
        last = (
            response,
            parsed.map_err(|why| format!("The response was not in the required format: {why}")),
        );
    }
    Ok(last)
}

mlrb_sdk::register_agent!(ResearchAgent);
