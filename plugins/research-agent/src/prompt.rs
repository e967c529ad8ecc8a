//! The research agent's prompt and the parsing of its answers, after
//! MLAgentBench's `agent_research.py`.

use serde_json::Value;

pub const ACTION_NAMES: &[&str] = &[
    "List Files",
    "Copy File",
    "Undo Edit Script",
    "Execute Script",
    "Final Answer",
    "Understand File",
    "Inspect Script Lines",
    "Edit Script (AI)",
    "Reflection",
];

/// (name, description, input fields with their meaning).
const TOOLS: &[(&str, &str, &str)] = &[
    (
        "List Files",
        "Use this to navigate the file system.",
        r#""dir_path": [a valid relative path to a directory, such as "." or "folder1/folder2"]"#,
    ),
    (
        "Copy File",
        "Use this to copy a file to a new location with a new name.",
        r#""source": [a valid file name with relative path to current directory if needed],
    "destination": [a valid file name with relative path to current directory if needed]"#,
    ),
    (
        "Undo Edit Script",
        "Use this to undo the last edit of the python script.",
        r#""script_name": [a valid python script name with relative path to current directory if needed]"#,
    ),
    (
        "Execute Script",
        "Use this to execute the python script. The script must already exist.",
        r#""script_name": [a valid python script name with relative path to current directory if needed]"#,
    ),
    (
        "Final Answer",
        "Use this to provide the final answer to the current task.",
        r#""final_answer": [a detailed description on the final answer]"#,
    ),
    (
        "Understand File",
        "Use this to read the whole file and understand certain aspects. You should provide detailed description on what to look for and what should be returned. To get a better understanding of the file, you can use Inspect Script Lines action to inspect specific part of the file.",
        r#""file_name": [a valid file name with relative path to current directory if needed],
    "things_to_look_for": [a detailed description on what to look for and what should returned]"#,
    ),
    (
        "Inspect Script Lines",
        "Use this to inspect specific part of a python script precisely, or the full content of a short script. The number of lines to display is limited to 100 lines. This is especially helpful when debugging.",
        r#""script_name": [a valid python script name with relative path to current directory if needed],
    "start_line_number": [a valid line number],
    "end_line_number": [a valid line number]"#,
    ),
    (
        "Edit Script (AI)",
        "Use this to do a relatively large but cohesive edit over a python script. Instead of editing the script directly, you should describe the edit instruction so that another AI can help you do this.",
        r#""script_name": [a valid python script name with relative path to current directory if needed. An empty script will be created if it does not exist.],
    "edit_instruction": [a detailed step by step description on how to edit it.],
    "save_name": [a valid file name with relative path to current directory if needed]"#,
    ),
    (
        "Reflection",
        "Use this to look over all the past steps and reflect. You should provide detailed description on what to reflect on and what should be returned.",
        r#""things_to_reflect_on": [a detailed description on what to reflect on and what should be returned]"#,
    ),
];

const FORMAT: &str = "Reflection: What does the observation mean? If there is an error, what caused the error and how to debug?
Research Plan and Status: The full high level research plan, with current status and confirmed results of each step briefly annotated. It must only include progress that has been made by previous steps. If there is any update, enclose the new update text in double asterisks **like this**. If there is no update, just copy the previous step Research Plan and Status. The high level plan from the previous step should be fully retained, unless it is intentionally revised.
Fact Check: List all objective statements in the updates to Research Plan and Status one by one and point out whether it is guessed versus directly confirmed by the previous observation directly above. Performance numbers can only be confirmed by running the code and observing the output.
Thought: What you are currently doing, what actions to perform and why
Action: the action to take, should be one of the names of the tools
Action Input: the input to the action as a valid JSON string";

/// The part of the prompt that never changes within an episode.
pub fn initial(research_problem: &str) -> String {
    let tools: Vec<String> = TOOLS
        .iter()
        .map(|(name, description, fields)| {
            format!(
                "- {name}:\n{description}\nUsage:\n```\nAction: {name}\nAction Input: {{\n    {fields}\n}}\nObservation: [the result of the action]\n```\n"
            )
        })
        .collect();
    format!(
        "You are a helpful research assistant. You have access to the following tools:\n{}\n\n{}\
         Always respond in this format exactly:\n{FORMAT}\nObservation: \n```\nthe result of the action\n```\n\n",
        tools.join("\n"),
        instructions(research_problem)
    )
}

/// The research problem and MLAgentBench's instructions, shared by both methods.
pub fn instructions(research_problem: &str) -> String {
    format!(
        "Research Problem: {research_problem}\n\n\
         You do not know anything about this problem so far. \n\n\
         Follow these instructions and do not forget them:\n\
         - First, come up with a high level plan based on your understanding of the problem and available tools and record it in the Research Plan and Status. You can revise the plan later.\n\
         - Research Plan and Status should well organized and succinctly keep track of 1) high level plan (can be revised), 2) what steps have been done and what steps are in progress, 3) short results and conclusions of each step after it has been performed. \n\
         - Research Plan and Status must only include progress that has been made by previous steps. It should not include results not directly confirmed by the previous observation. \n\
         - Performance numbers and estimates can only be confirmed and included in the status by running the code and observing the output.\n\
         - You should come up with a good experiment design that addresses the problem, and whenever applicable, define and measure the baseline performance of the relevant system or model before attempting any improvements.\n\
         - Follow the plan and try to achieve the goal as straightforwardly as possible.\n\
         - Highlight the supporting experiment results and reasoning before drawing any conclusions. \n\
         - Do not try installing any new packages or libraries.\n\
         - If you believe you have solved the problem, you can use the Final Answer action to submit your answer. You can only submit once, so double check that you have achieved the goal before submitting.\n\n"
    )
}

/// The prompt for the next step: the fixed part, the research log of
/// older steps, and the recent steps in full.
pub fn with_history(head: &str, log: &str, recent: &[crate::Step]) -> String {
    let mut prompt = head.to_string();
    if !log.is_empty() {
        prompt.push_str(&format!(
            "\n\nHere is a summary of relevant actions and observations you have done:\n```\n{log}\n```\n"
        ));
    }
    if recent.is_empty() {
        prompt.push_str("\n\nNow let's start!\n\n");
    } else {
        prompt.push_str("\nHere are the exact several steps you have done most recently (up to 3 steps):\n");
        for step in recent {
            prompt.push_str(&format!(
                "\n{}\nObservation:\n```\n{}\n```\n\n",
                step.response, step.observation
            ));
        }
    }
    prompt
}

/// The text after `header:` up to the next known header.
fn section<'a>(response: &'a str, header: &str) -> Option<&'a str> {
    const HEADERS: &[&str] = &[
        "Reflection:",
        "Research Plan and Status:",
        "Fact Check:",
        "Thought:",
        "Action:",
        "Action Input:",
        "Observation:",
    ];
    let start = response.find(header)? + header.len();
    let rest = &response[start..];
    let end = HEADERS
        .iter()
        .filter_map(|h| rest.find(&format!("\n{h}")))
        .min()
        .unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// The action and its JSON input, or what is wrong with the answer.
pub fn parse(response: &str) -> Result<(String, Value), String> {
    // "Action Input:" contains "Action:"? No, but find the action line, not the input's.
    let action = response
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("Action:"))
        .map(|a| a.trim().trim_matches(['*', '`', '"']).trim().to_string())
        .ok_or("no \"Action:\" line")?;
    let name = ACTION_NAMES
        .iter()
        .find(|n| n.eq_ignore_ascii_case(&action))
        .map(|n| n.to_string())
        .ok_or_else(|| format!("\"{action}\" is not one of the tools ({})", ACTION_NAMES.join(", ")))?;
    let input = section(response, "Action Input:").ok_or("no \"Action Input:\"")?;
    let open = input.find('{').ok_or("the Action Input has no JSON object")?;
    let close = input.rfind('}').ok_or("the Action Input's JSON object is not closed")?;
    if close < open {
        return Err("the Action Input's JSON object is not closed".into());
    }
    let json: Value =
        serde_json::from_str(&input[open..=close]).map_err(|e| format!("the Action Input is not valid JSON ({e})"))?;
    if !json.is_object() {
        return Err("the Action Input is not a JSON object".into());
    }
    Ok((name, json))
}

/// `Action: X` of a response, for the research log.
pub fn action_line(response: &str) -> String {
    match parse(response) {
        Ok((name, input)) => format!("{name} {input}"),
        Err(why) => format!("(malformed: {why})"),
    }
}
