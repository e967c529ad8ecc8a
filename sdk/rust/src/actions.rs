//! The MLAgentBench research agent's high-level actions, on top of `llm`
//! and `workspace`, for any agent to use: Understand File, Inspect Script
//! Lines, Edit Script (AI) with a diff and a backup, Reflection, and the
//! research log (append and retrieve). Long observations are summarised
//! the way the original agent does: in chunks, then together.
//!
//! Every action returns the observation text, or an [`ActionError`] saying
//! what failed; a failed action is information for the agent.

use std::fmt;

use crate::{LlmError, ToolError, ToolErrorExt, episode, llm, workspace};

/// Lines per chunk when a file is read by the model.
const CHUNK_LINES: usize = 200;
/// Inspect Script Lines shows at most this many lines, as MLAgentBench does.
const MAX_INSPECT_LINES: u32 = 100;

#[derive(Debug)]
pub enum ActionError {
    Tool(ToolError),
    Llm(LlmError),
    /// The action's input is wrong (the message says how).
    Input(String),
}

impl fmt::Display for ActionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ActionError::Tool(e) => write!(f, "{}: {}", e.kind(), e.message()),
            ActionError::Llm(e) => {
                let (kind, message) = llm::describe(e);
                write!(f, "the model failed ({kind}): {message}")
            }
            ActionError::Input(m) => f.write_str(m),
        }
    }
}

impl From<ToolError> for ActionError {
    fn from(e: ToolError) -> Self {
        ActionError::Tool(e)
    }
}

impl From<LlmError> for ActionError {
    fn from(e: LlmError) -> Self {
        ActionError::Llm(e)
    }
}

/// Which model alias each kind of action asks.
#[derive(Debug, Clone)]
pub struct Models {
    /// Reading and summarising (Understand File, Reflection, summaries).
    pub fast: String,
    /// Writing code (Edit Script (AI)).
    pub edit: String,
}

impl Default for Models {
    fn default() -> Self {
        Self {
            fast: "main".into(),
            edit: "main".into(),
        }
    }
}

fn ask(model: &str, prompt: &str, max_tokens: u32) -> Result<String, ActionError> {
    Ok(llm::ask(model, None, prompt, max_tokens)?)
}

/// Understand File: the model reads `file` (in chunks when long) looking
/// for `things_to_look_for`, and the per-chunk findings are combined.
pub fn understand_file(models: &Models, file: &str, things_to_look_for: &str) -> Result<String, ActionError> {
    let text = workspace::read(file)?;
    let lines: Vec<&str> = text.lines().collect();
    let chunks: Vec<String> = lines.chunks(CHUNK_LINES).map(|c| c.join("\n")).collect();
    let mut findings = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let (from, to) = (i * CHUNK_LINES + 1, (i * CHUNK_LINES + CHUNK_LINES).min(lines.len()));
        let prompt = format!(
            "Given this (partial) file from line {from} to line {to}:\n\n```\n{chunk}\n```\n\n\
             Here is a detailed description on what to look for and what should be returned: {things_to_look_for}\n\n\
             The description should short and also reference crtical lines in the script relevant to what is being looked for. \
             Only describe what is objectively confirmed by the file content. Do not include guessed numbers. \
             If you cannot find the answer to certain parts of the request, you should say \"In this segment, I cannot find ...\"."
        );
        findings.push(ask(&models.fast, &prompt, 1024)?);
    }
    if findings.len() <= 1 {
        return Ok(findings.pop().unwrap_or_else(|| format!("{file} is empty")));
    }
    let prompt = format!(
        "Given the relevant observations for each segment of a file, summarize to get a cohesive description of the entire file \
         on what to look for and what should be returned: {things_to_look_for}\n{}",
        findings
            .iter()
            .enumerate()
            .map(|(i, f)| format!("Segment {{{i}}}: \n\n{f}"))
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    ask(&models.fast, &prompt, 1024)
}

/// Inspect Script Lines: lines `start..=end` (at most 100) of a script.
pub fn inspect_script_lines(script: &str, start: u32, end: u32) -> Result<String, ActionError> {
    if end < start {
        return Err(ActionError::Input(format!(
            "end_line_number {end} is before start_line_number {start}"
        )));
    }
    if end - start >= MAX_INSPECT_LINES {
        return Err(ActionError::Input(format!(
            "the number of lines to display is limited to {MAX_INSPECT_LINES}"
        )));
    }
    Ok(workspace::inspect_lines(script, start, end)?)
}

/// The code of the first fenced block of `text` (```python or ```), or
/// the whole text when it has no fence.
pub fn code_block(text: &str) -> String {
    let Some(open) = text.find("```") else {
        return text.trim().to_string() + "\n";
    };
    let after = &text[open + 3..];
    let body = after.split_once('\n').map_or("", |(_, rest)| rest);
    let code = body.split("```").next().unwrap_or(body);
    code.trim_end().to_string() + "\n"
}

/// A unified diff of two texts.
pub fn unified_diff(before: &str, after: &str, name: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

/// Edit Script (AI): the model rewrites `script` following `instruction`;
/// the result is saved as `save_name` (the old version kept as
/// `backup/<save_name>_<n>` and for undo) and the diff is returned.
pub fn edit_script(models: &Models, script: &str, instruction: &str, save_name: &str) -> Result<String, ActionError> {
    let before = match workspace::read(script) {
        Ok(text) => text,
        Err(ToolError::NotFound(_)) => String::new(),
        Err(e) => return Err(e.into()),
    };
    let prompt = format!(
        "Given this python script:\n    ```python \n    {before}\n    ```\n    Edit the script by following the instruction:\n    {instruction}\n    \
         Provide the full code after the edit, making no other changes. Start the python code with \"```python\". \n\n    "
    );
    let answer = ask(&models.edit, &prompt, 4096)?;
    let after = code_block(&answer);
    if let Ok(previous) = workspace::read(save_name) {
        let mut n = 0;
        while workspace::read(&format!("backup/{save_name}_{n}")).is_ok() {
            n += 1;
        }
        workspace::write(&format!("backup/{save_name}_{n}"), &previous)?;
    }
    workspace::write(save_name, &after)?;
    let diff = unified_diff(&before, &after, save_name);
    Ok(format!(
        "The edited file is saved to {save_name}. Here is the diff, please check if the edit is correct and desirable:\n\n{diff}"
    ))
}

/// The research log an agent keeps: every entry also goes to the trace.
#[derive(Debug, Default, Clone)]
pub struct ResearchLog {
    entries: Vec<String>,
}

impl ResearchLog {
    /// Append Summary to Research Log.
    pub fn append(&mut self, text: &str) -> String {
        episode::note(text);
        self.entries.push(text.to_string());
        "Successfully appended to research log".to_string()
    }

    /// Retrieval from Research Log: all of it.
    pub fn retrieve(&self) -> String {
        self.entries.join("\n")
    }
}

/// Reflection: the model thinks about `things_to_reflect_on` given the
/// research log so far.
pub fn reflection(models: &Models, log: &ResearchLog, things_to_reflect_on: &str) -> Result<String, ActionError> {
    let prompt = format!(
        "We are trying to solve this research problem: {}\nYour current research log:\n```\n{}\n```\n\
         Reflect on this: {things_to_reflect_on} \nGive an answer in natural language paragraphs as truthfully as possible. ",
        episode::task().research_problem,
        log.retrieve()
    );
    ask(&models.fast, &prompt, 1024)
}

/// An observation of at most `limit` characters: longer ones are
/// summarised by the model chunk by chunk, and cut if the model fails.
pub fn condense_observation(models: &Models, action: &str, observation: &str, limit: usize) -> String {
    if observation.chars().count() <= limit {
        return observation.to_string();
    }
    let chars: Vec<char> = observation.chars().collect();
    let mut summaries = Vec::new();
    for chunk in chars.chunks(limit) {
        let segment: String = chunk.iter().collect();
        let prompt = format!(
            "{action}\n\nThe full observation is too long. Given this (partial) observation:\n```\n{segment}\n```\n\
             Summarize the observation concisely in this format:\n[Observation]: Summarize all relevant details in the observation \
             objectively\n\nDo not include any result that is guessed rather than directly confirmed by the observation. "
        );
        match ask(&models.fast, &prompt, 512) {
            Ok(summary) => summaries.push(summary),
            Err(_) => {
                let cut: String = chars[..limit].iter().collect();
                return format!("{cut}\n[observation cut at {limit} characters]");
            }
        }
    }
    summaries.join("\n")
}
