//! Every limit an episode runs under, in one value: built once from the
//! task's budget and resources and the user's overrides, recorded as-is in
//! `episode.json`, and read by every layer (the agent's store, the
//! workspace, scripts, snapshots, the trace).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The limits of one episode. Field names are those `episode.json` has
/// always used; a record written by an older mlrb reads with defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Tool calls that count as steps.
    pub max_steps: u32,
    /// The episode's wall-clock budget.
    pub wall_seconds: u64,
    /// LLM tokens, input and output together (0: no limit).
    pub llm_tokens: u64,
    /// LLM spending at the configured prices (0: no limit).
    pub llm_cost_usd: f64,
    /// The agent's linear memory, all its memories together.
    pub agent_memory_bytes: usize,
    /// Bytes of the agent's stdout and stderr kept in agent.log.
    pub agent_log_bytes: u64,
    /// Bytes the agent's calls may add to the trace.
    pub trace_bytes: u64,
    /// Bytes of the final answer kept.
    pub answer_bytes: usize,
    /// The longest one script may run.
    pub script_timeout_seconds: u64,
    /// Memory one script may use, in bytes.
    pub script_memory_bytes: u64,
    /// Processes one script may have at once.
    pub script_max_processes: u32,
    /// CPUs one script may use.
    pub script_cpus: f64,
    /// Whether scripts reach the network.
    pub network: bool,
    /// Bytes of each output stream handed back to the agent.
    pub output_cap: usize,
    /// Bytes a script may print before it is stopped.
    pub output_kill_bytes: u64,
    /// Arguments of one script, and their bytes (each, and all together).
    pub max_args: usize,
    /// Bytes of one argument.
    pub max_arg_bytes: usize,
    /// Bytes of all arguments together.
    pub max_total_arg_bytes: usize,
    /// Bytes the workspace's files may hold (apparent and on disk, each);
    /// also the largest file a script may write.
    pub workspace_bytes: u64,
    /// Files, folders and links the workspace may hold.
    pub workspace_files: u64,
    /// Bytes one `read-file` returns.
    pub read_bytes: u64,
    /// Bytes one `write-file` or `append-file` carries.
    pub write_bytes: u64,
    /// Entries one `list-files` returns.
    pub list_entries: usize,
    /// Lines one `inspect-lines` returns.
    pub inspect_lines: u32,
    /// Bytes of one workspace path, and folders deep.
    pub path_bytes: usize,
    /// Folders a workspace path may go deep.
    pub path_depth: usize,
    /// Bytes of earlier versions kept for `undo-edit`.
    pub history_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_steps: 50,
            wall_seconds: 1200,
            llm_tokens: 0,
            llm_cost_usd: 0.0,
            agent_memory_bytes: 1 << 30,
            agent_log_bytes: 4 << 20,
            trace_bytes: 256 << 20,
            answer_bytes: 1 << 20,
            script_timeout_seconds: 600,
            script_memory_bytes: 2 << 30,
            script_max_processes: 256,
            script_cpus: 2.0,
            network: false,
            output_cap: 32 << 10,
            output_kill_bytes: 256 << 20,
            max_args: 256,
            max_arg_bytes: 64 << 10,
            max_total_arg_bytes: 256 << 10,
            workspace_bytes: 10 << 30,
            workspace_files: 1_000_000,
            read_bytes: 1 << 20,
            write_bytes: 16 << 20,
            list_entries: 10_000,
            inspect_lines: 2_000,
            path_bytes: 1024,
            path_depth: 64,
            history_bytes: 1 << 30,
        }
    }
}

impl Limits {
    /// The wall-clock budget.
    pub fn wall(&self) -> Duration {
        Duration::from_secs(self.wall_seconds)
    }

    /// The longest one script may run.
    pub fn script_timeout(&self) -> Duration {
        Duration::from_secs(self.script_timeout_seconds)
    }

    /// Applies what the user asked to change.
    pub fn with(mut self, overrides: &Overrides) -> Self {
        if let Some(steps) = overrides.max_steps {
            self.max_steps = steps;
        }
        if let Some(wall) = overrides.wall_seconds {
            self.wall_seconds = wall;
        }
        if let Some(tokens) = overrides.llm_tokens {
            self.llm_tokens = tokens;
        }
        if let Some(cost) = overrides.llm_cost_usd {
            self.llm_cost_usd = cost;
        }
        if let Some(memory) = overrides.agent_memory_mb {
            self.agent_memory_bytes = memory << 20;
        }
        if let Some(trace) = overrides.trace_mb {
            self.trace_bytes = trace << 20;
        }
        self
    }
}

/// What `mlrb run` options or a bench plan change of a task's limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    /// Replaces the step limit.
    pub max_steps: Option<u32>,
    /// Replaces the wall-clock budget, in seconds.
    pub wall_seconds: Option<u64>,
    /// Replaces the LLM token budget (0: no limit).
    pub llm_tokens: Option<u64>,
    /// Replaces the LLM cost budget, in USD (0: no limit).
    pub llm_cost_usd: Option<f64>,
    /// Replaces the agent's memory, in MiB.
    pub agent_memory_mb: Option<usize>,
    /// Replaces the trace budget, in MiB.
    pub trace_mb: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_change_only_what_they_name_and_old_records_read() {
        let base = Limits::default();
        let changed = base.clone().with(&Overrides {
            max_steps: Some(3),
            trace_mb: Some(8),
            ..Overrides::default()
        });
        assert_eq!(changed.max_steps, 3);
        assert_eq!(changed.trace_bytes, 8 << 20);
        assert_eq!(changed.wall_seconds, base.wall_seconds);
        // An episode.json of an older mlrb: the fields it had, no others.
        let old: Limits = serde_json::from_str(r#"{"max_steps": 7, "wall_seconds": 60, "network": true}"#).unwrap();
        assert_eq!((old.max_steps, old.wall_seconds, old.network), (7, 60, true));
        assert_eq!(old.workspace_files, Limits::default().workspace_files);
    }
}
