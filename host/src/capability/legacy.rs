//! Agents built against `mlrb:agent@0.2.0`. Its `workspace`, `exec` and
//! `episode` are the current interfaces under the old name: the same
//! hosts answer them, each function handing on to the current one (the
//! records are copied field by field, since wasmtime generates a Rust type
//! per version). Its
//! `llm` lacks tools, tool calls and response schemas: a request becomes a
//! current request with none, so it is checked, paid for and recorded as
//! any other.

use wasmtime::component::Linker;

use super::v0_2::mlrb::agent as old;
use super::{AgentState, HostResult, episode, exec, llm, mlrb::agent as now, workspace};
use crate::llm::{LlmError, LlmRequest, Message, Role};

/// Adds the 0.2.0 interfaces, each over the view of the current one.
pub fn add_to_linker(l: &mut Linker<AgentState>) -> anyhow::Result<()> {
    old::workspace::add_to_linker::<AgentState, workspace::WorkspaceCapability>(l, workspace::view)?;
    old::exec::add_to_linker::<AgentState, exec::ExecCapability>(l, exec::view)?;
    old::episode::add_to_linker::<AgentState, episode::EpisodeCapability>(l, episode::view)?;
    old::llm::add_to_linker::<AgentState, llm::LlmCapability>(l, llm::view)?;
    Ok(())
}

impl old::workspace::Host for workspace::WorkspaceView<'_> {
    async fn list_files(&mut self, dir: String) -> HostResult<Vec<old::workspace::DirEntry>> {
        let entries = now::workspace::Host::list_files(self, dir).await?;
        Ok(entries.map(|entries| entries.into_iter().map(dir_entry).collect()))
    }
    async fn read_file(&mut self, path: String) -> HostResult<String> {
        now::workspace::Host::read_file(self, path).await
    }
    async fn write_file(&mut self, path: String, content: String) -> HostResult<()> {
        now::workspace::Host::write_file(self, path, content).await
    }
    async fn append_file(&mut self, path: String, content: String) -> HostResult<()> {
        now::workspace::Host::append_file(self, path, content).await
    }
    async fn copy_file(&mut self, source: String, destination: String) -> HostResult<()> {
        now::workspace::Host::copy_file(self, source, destination).await
    }
    async fn undo_edit(&mut self, path: String) -> HostResult<String> {
        now::workspace::Host::undo_edit(self, path).await
    }
    async fn inspect_lines(&mut self, path: String, start: u32, end: u32) -> HostResult<String> {
        now::workspace::Host::inspect_lines(self, path, start, end).await
    }
}

impl old::exec::Host for exec::ExecView<'_> {
    async fn execute_script(
        &mut self,
        script: String,
        args: Vec<String>,
        timeout_seconds: Option<u32>,
    ) -> HostResult<old::exec::ExecResult> {
        let result = now::exec::Host::execute_script(self, script, args, timeout_seconds).await?;
        Ok(result.map(exec_result))
    }
}

impl old::episode::Host for episode::EpisodeView<'_> {
    async fn task(&mut self) -> wasmtime::Result<now::types::TaskInfo> {
        now::episode::Host::task(self).await
    }
    async fn current_usage(&mut self) -> wasmtime::Result<now::types::Usage> {
        now::episode::Host::current_usage(self).await
    }
    async fn note(&mut self, text: String) -> wasmtime::Result<()> {
        now::episode::Host::note(self, text).await
    }
    async fn validate(&mut self) -> HostResult<old::episode::ScoreReport> {
        let report = now::episode::Host::validate(self).await?;
        Ok(report.map(|r| old::episode::ScoreReport {
            score: r.score,
            valid: r.valid,
            message: r.message,
        }))
    }
}

fn dir_entry(e: now::workspace::DirEntry) -> old::workspace::DirEntry {
    use now::workspace::EntryKind as K;
    old::workspace::DirEntry {
        path: e.path,
        kind: match e.kind {
            K::File => old::workspace::EntryKind::File,
            K::Directory => old::workspace::EntryKind::Directory,
            K::Symlink => old::workspace::EntryKind::Symlink,
            K::Other => old::workspace::EntryKind::Other,
        },
        size: e.size,
        read_only: e.read_only,
    }
}

fn exec_result(r: now::exec::ExecResult) -> old::exec::ExecResult {
    use now::exec::Termination as T;
    old::exec::ExecResult {
        exit_code: r.exit_code,
        stdout: r.stdout,
        stderr: r.stderr,
        stdout_truncated: r.stdout_truncated,
        stderr_truncated: r.stderr_truncated,
        duration_ms: r.duration_ms,
        termination: match r.termination {
            T::Exited => old::exec::Termination::Exited,
            T::TimedOut => old::exec::Termination::TimedOut,
            T::OutOfMemory => old::exec::Termination::OutOfMemory,
            T::Killed => old::exec::Termination::Killed,
        },
    }
}

impl old::llm::Host for llm::LlmView<'_> {
    async fn complete(
        &mut self,
        request: old::llm::Request,
    ) -> wasmtime::Result<Result<old::llm::Completion, old::llm::LlmError>> {
        let messages = request
            .messages
            .into_iter()
            .map(|m| {
                let role = match m.role {
                    old::llm::Role::System => Role::System,
                    old::llm::Role::User => Role::User,
                    old::llm::Role::Assistant => Role::Assistant,
                };
                Message::text(role, m.content)
            })
            .collect();
        let request = LlmRequest {
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            stop: request.stop,
            ..LlmRequest::plain(&request.model, messages)
        };
        let result = self.complete_recorded(request).await?;
        Ok(result
            .map(|c| old::llm::Completion {
                text: c.text,
                model: c.model,
                input_tokens: c.input_tokens,
                output_tokens: c.output_tokens,
                finish_reason: c.finish_reason,
            })
            .map_err(|error| {
                use old::llm::LlmError as W;
                match error {
                    LlmError::BudgetExhausted(m) => W::BudgetExhausted(m),
                    LlmError::Refused(m) => W::Refused(m),
                    LlmError::Provider(m) => W::Provider(m),
                    LlmError::Timeout(m) => W::Timeout(m),
                    LlmError::InvalidRequest(m) => W::InvalidRequest(m),
                    LlmError::Unavailable(m) => W::Unavailable(m),
                    // Not reachable without tools or a schema; the nearest old case.
                    LlmError::MalformedAnswer(m) => W::Provider(m),
                }
            }))
    }
}
