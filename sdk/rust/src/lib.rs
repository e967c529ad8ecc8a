//! # mlrb-sdk: write an mlrb agent in Rust
//!
//! An mlrb agent is a WebAssembly component that exports `run(task)` and
//! reaches the world only through the host's tool interfaces. This crate
//! wraps the generated bindings in a small, typed API:
//!
//! * [`workspace`]: list, read, write, append, copy, undo, inspect lines;
//! * [`exec`]: run a script of the workspace in the host's sandbox;
//! * [`episode`]: the task, the usage so far, the research log, validation;
//! * [`llm`]: a language model, through the host (the agent holds no key);
//! * [`actions`]: the MLAgentBench research agent's high-level actions
//!   (Understand File, Edit Script (AI), Reflection, the research log, ...);
//! * [`toolbox`]: those actions as tools of a tool-calling request, and
//!   what carries out the model's calls.
//!
//! Every tool call returns `Result<_, ToolError>`; a failure is information
//! for the agent, never a crash ([`ToolErrorExt`] gives its kind and message).
//!
//! ```no_run
//! use mlrb_sdk::{Agent, TaskInfo, episode, exec};
//!
//! struct Baseline;
//!
//! impl Agent for Baseline {
//!     fn run(task: TaskInfo) -> Result<String, String> {
//!         episode::note(&format!("working on {}", task.name));
//!         let out = exec::run("train.py", &[]).map_err(|e| format!("{e:?}"))?;
//!         Ok(format!("train.py ended: {:?}", out.termination))
//!     }
//! }
//!
//! mlrb_sdk::register_agent!(Baseline);
//! ```
//!
//! Build with `cargo build --release --target wasm32-wasip2`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the component `mlrb run --agent` takes.

#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "agent",
        pub_export_macro: true,
        export_macro_name: "export_agent",
        default_bindings_module: "mlrb_sdk::bindings",
    });
}

use bindings::mlrb::agent as wit;

pub mod actions;
pub mod toolbox;

pub use wit::episode::ScoreReport;
pub use wit::exec::{ExecResult, Termination};
pub use wit::llm::{Completion, LlmError, Message, Request as LlmRequest, Role, Tool, ToolCall, ToolChoice};
pub use wit::types::{Budget, TaskInfo, ToolError, Usage};
pub use wit::workspace::{DirEntry, EntryKind};

/// What an agent author implements.
pub trait Agent {
    /// Works on the task. `Ok` carries the final answer, `Err` a reason for giving up.
    fn run(task: TaskInfo) -> Result<String, String>;
}

/// Registers the type implementing [`Agent`] as this component's export.
/// Call it once, at the crate root.
#[macro_export]
macro_rules! register_agent {
    ($agent:ty) => {
        #[doc(hidden)]
        pub struct __MlrbAgentExport;
        impl $crate::bindings::Guest for __MlrbAgentExport {
            fn run(task: $crate::TaskInfo) -> ::core::result::Result<String, String> {
                <$agent as $crate::Agent>::run(task)
            }
        }
        $crate::bindings::export_agent!(__MlrbAgentExport with_types_in $crate::bindings);
    };
}

/// The kind and message of a [`ToolError`], for logs and prompts.
pub trait ToolErrorExt {
    /// A short kebab-case name of the error kind, e.g. `permission-denied`.
    fn kind(&self) -> &'static str;
    /// What the host said.
    fn message(&self) -> &str;
}

impl ToolErrorExt for ToolError {
    fn kind(&self) -> &'static str {
        match self {
            ToolError::NotFound(_) => "not-found",
            ToolError::PermissionDenied(_) => "permission-denied",
            ToolError::InvalidArgument(_) => "invalid-argument",
            ToolError::TooLarge(_) => "too-large",
            ToolError::Timeout(_) => "timeout",
            ToolError::BudgetExhausted(_) => "budget-exhausted",
            ToolError::Unavailable(_) => "unavailable",
            ToolError::Io(_) => "io",
        }
    }

    fn message(&self) -> &str {
        match self {
            ToolError::NotFound(m)
            | ToolError::PermissionDenied(m)
            | ToolError::InvalidArgument(m)
            | ToolError::TooLarge(m)
            | ToolError::Timeout(m)
            | ToolError::BudgetExhausted(m)
            | ToolError::Unavailable(m)
            | ToolError::Io(m) => m,
        }
    }
}

/// Files of the workspace. Paths are relative to the workspace root.
pub mod workspace {
    use super::{DirEntry, ToolError, wit::workspace as w};

    /// Lists `dir` ("" for the root).
    pub fn list(dir: &str) -> Result<Vec<DirEntry>, ToolError> {
        w::list_files(dir)
    }
    /// Reads a UTF-8 text file.
    pub fn read(path: &str) -> Result<String, ToolError> {
        w::read_file(path)
    }
    /// Creates or replaces a file (its previous version is kept for [`undo`]).
    pub fn write(path: &str, content: &str) -> Result<(), ToolError> {
        w::write_file(path, content)
    }
    /// Appends to a file, creating it if needed.
    pub fn append(path: &str, content: &str) -> Result<(), ToolError> {
        w::append_file(path, content)
    }
    /// Copies a file inside the workspace.
    pub fn copy(source: &str, destination: &str) -> Result<(), ToolError> {
        w::copy_file(source, destination)
    }
    /// Restores the version before the last change of `path`.
    pub fn undo(path: &str) -> Result<String, ToolError> {
        w::undo_edit(path)
    }
    /// Lines `start..=end` (1-based) of a text file, numbered.
    pub fn inspect_lines(path: &str, start: u32, end: u32) -> Result<String, ToolError> {
        w::inspect_lines(path, start, end)
    }
}

/// Scripts, run by the host in its sandbox.
pub mod exec {
    use super::{ExecResult, ToolError, wit::exec as x};

    /// Runs a workspace script with the task's default timeout.
    pub fn run(script: &str, args: &[&str]) -> Result<ExecResult, ToolError> {
        run_with_timeout(script, args, None)
    }
    /// Runs a workspace script with a timeout in seconds (capped by the host).
    pub fn run_with_timeout(
        script: &str,
        args: &[&str],
        timeout_seconds: Option<u32>,
    ) -> Result<ExecResult, ToolError> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        x::execute_script(script, &args, timeout_seconds)
    }
}

/// The episode: task, usage, research log, intermediate scoring.
pub mod episode {
    use super::{ScoreReport, TaskInfo, ToolError, Usage, wit::episode as e};

    /// The task being worked on.
    pub fn task() -> TaskInfo {
        e::task()
    }
    /// Steps, time and tokens spent so far.
    pub fn usage() -> Usage {
        e::current_usage()
    }
    /// Appends a line to the research log (kept in the trace; not a step).
    pub fn note(text: &str) {
        e::note(text)
    }
    /// Scores the current workspace, where the task allows it.
    pub fn validate() -> Result<ScoreReport, ToolError> {
        e::validate()
    }
}

/// A language model, through the host: the host picks the provider for a
/// model alias, enforces the episode's token and cost budget, and records
/// the exchange. A call is not a step. Since `mlrb:agent@0.3.0` a request
/// may offer tools ([`crate::toolbox`] has the MLAgentBench ones) and ask
/// for JSON of a schema; the host checks the answer against both.
pub mod llm {
    use super::{Completion, LlmError, LlmRequest, Message, Role, ToolChoice, wit::llm as l};

    /// Sends a full request.
    pub fn complete(request: &LlmRequest) -> Result<Completion, LlmError> {
        l::complete(request)
    }

    /// A plain request to the model `alias`: no limits, tools or schema
    /// (set the rest with `LlmRequest { tools, ..request(alias, messages) }`).
    pub fn request(alias: &str, messages: Vec<Message>) -> LlmRequest {
        LlmRequest {
            model: alias.to_string(),
            messages,
            max_tokens: None,
            temperature: None,
            stop: Vec::new(),
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            response_schema: None,
        }
    }

    fn text(role: Role, content: &str) -> Message {
        Message {
            role,
            content: content.to_string(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A system message.
    pub fn system(content: &str) -> Message {
        text(Role::System, content)
    }

    /// A user message.
    pub fn user(content: &str) -> Message {
        text(Role::User, content)
    }

    /// An assistant message of plain text.
    pub fn assistant(content: &str) -> Message {
        text(Role::Assistant, content)
    }

    /// The assistant's turn of a completion, its tool calls included: what
    /// goes into the conversation before the calls' results.
    pub fn assistant_calls(completion: &Completion) -> Message {
        Message {
            tool_calls: completion.tool_calls.clone(),
            ..text(Role::Assistant, &completion.text)
        }
    }

    /// The result of the tool call `call_id`.
    pub fn tool_result(call_id: &str, content: &str) -> Message {
        Message {
            tool_call_id: Some(call_id.to_string()),
            ..text(Role::Tool, content)
        }
    }

    /// One question with an optional system prompt; the answer's text.
    pub fn ask(model: &str, system_prompt: Option<&str>, prompt: &str, max_tokens: u32) -> Result<String, LlmError> {
        let mut messages: Vec<Message> = system_prompt.map(system).into_iter().collect();
        messages.push(user(prompt));
        let request = LlmRequest {
            max_tokens: Some(max_tokens),
            ..request(model, messages)
        };
        complete(&request).map(|c| c.text)
    }

    /// The kind of an error, e.g. `budget-exhausted`, and its message.
    pub fn describe(error: &LlmError) -> (&'static str, &str) {
        match error {
            LlmError::BudgetExhausted(m) => ("budget-exhausted", m),
            LlmError::Refused(m) => ("refused", m),
            LlmError::Provider(m) => ("provider", m),
            LlmError::Timeout(m) => ("timeout", m),
            LlmError::InvalidRequest(m) => ("invalid-request", m),
            LlmError::Unavailable(m) => ("unavailable", m),
            LlmError::MalformedAnswer(m) => ("malformed-answer", m),
        }
    }
}
