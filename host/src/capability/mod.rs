//! The interfaces the host implements for agents, one file per WIT
//! interface, and the per-episode state they share: step budget, trace and
//! snapshots.

pub mod agent_log;
pub mod exec;
pub mod limiter;
pub mod tool_error;
pub mod workspace;

pub mod session;

pub use session::{EndEpisode, Session, TaskInfoRecord, UsageRecord, ValidationPolicy, ValidationRecord, Validator};
pub use tool_error::{ToolError, ToolResult};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "agent",
    imports: { default: async | trappable },
    exports: { default: async },
});

/// The version of the WIT package this host implements.
pub const WIT_PACKAGE: &str = "mlrb:agent@0.2.0";

/// What a wasmtime store holds for one agent.
pub struct AgentState {
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub memory: limiter::MemoryLimiter,
    pub session: Session,
}

impl WasiView for AgentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A linker with WASI (no preopens, no sockets, no environment) and the
/// mlrb interfaces.
pub fn linker(engine: &wasmtime::Engine) -> anyhow::Result<wasmtime::component::Linker<AgentState>> {
    let mut linker = wasmtime::component::Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    Agent::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |state: &mut AgentState| state)?;
    Ok(linker)
}

use mlrb::agent::{
    episode as wit_episode, exec as wit_exec, llm as wit_llm, types as wit_types, workspace as wit_workspace,
};

impl From<ToolError> for wit_types::ToolError {
    fn from(error: ToolError) -> Self {
        use wit_types::ToolError as W;
        match error {
            ToolError::NotFound(m) => W::NotFound(m),
            ToolError::PermissionDenied(m) => W::PermissionDenied(m),
            ToolError::InvalidArgument(m) => W::InvalidArgument(m),
            ToolError::TooLarge(m) => W::TooLarge(m),
            ToolError::Timeout(m) => W::Timeout(m),
            ToolError::BudgetExhausted(m) => W::BudgetExhausted(m),
            ToolError::Unavailable(m) => W::Unavailable(m),
            ToolError::Io(m) => W::Io(m),
        }
    }
}

type HostResult<T> = wasmtime::Result<Result<T, wit_types::ToolError>>;

fn to_wit<T, U: From<T>>(result: ToolResult<T>) -> Result<U, wit_types::ToolError> {
    result.map(U::from).map_err(Into::into)
}

impl wit_types::Host for AgentState {}

impl From<workspace::DirEntry> for wit_workspace::DirEntry {
    fn from(entry: workspace::DirEntry) -> Self {
        use wit_workspace::EntryKind as K;
        Self {
            path: entry.path,
            kind: match entry.kind {
                workspace::EntryKind::File => K::File,
                workspace::EntryKind::Directory => K::Directory,
                workspace::EntryKind::Symlink => K::Symlink,
                workspace::EntryKind::Other => K::Other,
            },
            size: entry.size,
            read_only: entry.read_only,
        }
    }
}

/// A `Vec` wrapper so `to_wit` can convert lists element-wise.
struct Entries(Vec<wit_workspace::DirEntry>);
impl From<Vec<workspace::DirEntry>> for Entries {
    fn from(entries: Vec<workspace::DirEntry>) -> Self {
        Self(entries.into_iter().map(Into::into).collect())
    }
}

impl wit_workspace::Host for AgentState {
    async fn list_files(&mut self, dir: String) -> HostResult<Vec<wit_workspace::DirEntry>> {
        let result =
            self.session
                .tool_call("workspace", "list-files", serde_json::json!({"dir": dir}), false, |s| {
                    s.workspace.list_files(&dir)
                })?;
        Ok(to_wit::<_, Entries>(result).map(|e| e.0))
    }

    async fn read_file(&mut self, path: String) -> HostResult<String> {
        let result = self.session.tool_call(
            "workspace",
            "read-file",
            serde_json::json!({"path": path}),
            false,
            |s| s.workspace.read_file(&path),
        )?;
        Ok(to_wit(result))
    }

    async fn write_file(&mut self, path: String, content: String) -> HostResult<()> {
        let result = self.session.tool_call(
            "workspace",
            "write-file",
            serde_json::json!({"path": path, "content": content}),
            true,
            |s| s.workspace.write_file(&path, &content),
        )?;
        Ok(to_wit(result))
    }

    async fn append_file(&mut self, path: String, content: String) -> HostResult<()> {
        let result = self.session.tool_call(
            "workspace",
            "append-file",
            serde_json::json!({"path": path, "content": content}),
            true,
            |s| s.workspace.append_file(&path, &content),
        )?;
        Ok(to_wit(result))
    }

    async fn copy_file(&mut self, source: String, destination: String) -> HostResult<()> {
        let result = self.session.tool_call(
            "workspace",
            "copy-file",
            serde_json::json!({"source": source, "destination": destination}),
            true,
            |s| {
                let used = s.snapshots.last().map_or(0, |m| m.stats.bytes);
                s.workspace.copy_file(&source, &destination, used)
            },
        )?;
        Ok(to_wit(result))
    }

    async fn undo_edit(&mut self, path: String) -> HostResult<String> {
        let result =
            self.session
                .tool_call("workspace", "undo-edit", serde_json::json!({"path": path}), true, |s| {
                    s.workspace.undo_edit(&path)
                })?;
        Ok(to_wit(result))
    }

    async fn inspect_lines(&mut self, path: String, start: u32, end: u32) -> HostResult<String> {
        let result = self.session.tool_call(
            "workspace",
            "inspect-lines",
            serde_json::json!({"path": path, "start": start, "end": end}),
            false,
            |s| s.workspace.inspect_lines(&path, start, end),
        )?;
        Ok(to_wit(result))
    }
}

impl From<exec::ExecOutcome> for wit_exec::ExecResult {
    fn from(o: exec::ExecOutcome) -> Self {
        use crate::sandbox::Termination as T;
        Self {
            exit_code: o.exit_code,
            stdout: o.stdout,
            stderr: o.stderr,
            stdout_truncated: o.stdout_truncated,
            stderr_truncated: o.stderr_truncated,
            duration_ms: o.duration_ms,
            termination: match o.termination {
                T::Exited => wit_exec::Termination::Exited,
                T::TimedOut => wit_exec::Termination::TimedOut,
                T::OutOfMemory => wit_exec::Termination::OutOfMemory,
                T::Killed => wit_exec::Termination::Killed,
            },
        }
    }
}

impl wit_exec::Host for AgentState {
    async fn execute_script(
        &mut self,
        script: String,
        args: Vec<String>,
        timeout_seconds: Option<u32>,
    ) -> HostResult<wit_exec::ExecResult> {
        let result = self.session.execute_script(script, args, timeout_seconds).await?;
        Ok(to_wit(result))
    }
}

impl From<TaskInfoRecord> for wit_types::TaskInfo {
    fn from(t: TaskInfoRecord) -> Self {
        Self {
            name: t.name,
            version: t.version,
            research_problem: t.research_problem,
            metric: t.metric,
            higher_is_better: t.higher_is_better,
            baseline: t.baseline,
            budget: wit_types::Budget {
                max_steps: t.max_steps,
                wall_seconds: t.wall_seconds,
                llm_tokens: t.llm_tokens,
                llm_cost_usd: t.llm_cost_usd,
            },
        }
    }
}

impl wit_episode::Host for AgentState {
    async fn task(&mut self) -> wasmtime::Result<wit_types::TaskInfo> {
        let info = self.session.task_info.clone();
        self.session.record_plain(
            "episode",
            "task",
            serde_json::Value::Null,
            serde_json::json!({"name": info.name}),
        )?;
        Ok(info.into())
    }

    async fn current_usage(&mut self) -> wasmtime::Result<wit_types::Usage> {
        let usage = self.session.usage();
        self.session.record_plain(
            "episode",
            "current-usage",
            serde_json::Value::Null,
            serde_json::to_value(&usage).unwrap_or_default(),
        )?;
        Ok(wit_types::Usage {
            steps: usage.steps,
            elapsed_ms: usage.elapsed_ms,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            llm_cost_usd: usage.llm_cost_usd,
        })
    }

    async fn note(&mut self, text: String) -> wasmtime::Result<()> {
        self.session.note(text)
    }

    async fn validate(&mut self) -> HostResult<wit_episode::ScoreReport> {
        Ok(self
            .session
            .validate()
            .await?
            .map(|report| wit_episode::ScoreReport {
                score: report.score,
                valid: report.valid,
                message: report.message,
            })
            .map_err(Into::into))
    }
}

impl From<wit_llm::Request> for crate::llm::LlmRequest {
    fn from(request: wit_llm::Request) -> Self {
        use crate::llm::Role;
        Self {
            model: request.model,
            messages: request
                .messages
                .into_iter()
                .map(|m| crate::llm::Message {
                    role: match m.role {
                        wit_llm::Role::System => Role::System,
                        wit_llm::Role::User => Role::User,
                        wit_llm::Role::Assistant => Role::Assistant,
                    },
                    content: m.content,
                })
                .collect(),
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            stop: request.stop,
        }
    }
}

impl From<crate::llm::LlmError> for wit_llm::LlmError {
    fn from(error: crate::llm::LlmError) -> Self {
        use crate::llm::LlmError as E;
        match error {
            E::BudgetExhausted(m) => Self::BudgetExhausted(m),
            E::Refused(m) => Self::Refused(m),
            E::Provider(m) => Self::Provider(m),
            E::Timeout(m) => Self::Timeout(m),
            E::InvalidRequest(m) => Self::InvalidRequest(m),
            E::Unavailable(m) => Self::Unavailable(m),
        }
    }
}

impl wit_llm::Host for AgentState {
    async fn complete(
        &mut self,
        request: wit_llm::Request,
    ) -> wasmtime::Result<Result<wit_llm::Completion, wit_llm::LlmError>> {
        let result = self.session.llm_complete(request.into()).await?;
        Ok(result
            .map(|c| wit_llm::Completion {
                text: c.text,
                model: c.model,
                input_tokens: c.input_tokens,
                output_tokens: c.output_tokens,
                finish_reason: c.finish_reason,
            })
            .map_err(Into::into))
    }
}
