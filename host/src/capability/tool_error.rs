//! The host's side of the WIT `tool-error`: what a tool call tells the agent
//! when it cannot do what was asked.

use serde::{Deserialize, Serialize};

/// Why a tool call failed, with a message for the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", content = "message", rename_all = "kebab-case")]
pub enum ToolError {
    /// The file or thing named does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The call is not allowed: a read-only file, or a path leaving the workspace.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// An argument is malformed or names the wrong kind of thing.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The input or the answer is past a host cap.
    #[error("too large: {0}")]
    TooLarge(String),
    /// The call ran out of time.
    #[error("timeout: {0}")]
    Timeout(String),
    /// A budget of the episode (steps, tokens, cost, validations) is spent.
    #[error("budget exhausted: {0}")]
    BudgetExhausted(String),
    /// The host cannot offer this call now, or for this task.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Any other I/O failure.
    #[error("i/o error: {0}")]
    Io(String),
}

impl ToolError {
    /// Maps an I/O error on `path` to the variant an agent can act on.
    pub fn from_io(path: &str, error: &std::io::Error) -> Self {
        use std::io::ErrorKind::*;
        let shown = if path.is_empty() { "." } else { path };
        match error.kind() {
            NotFound => Self::NotFound(format!("{shown}: no such file or directory")),
            PermissionDenied | ReadOnlyFilesystem => Self::PermissionDenied(format!("{shown}: {error}")),
            NotADirectory => Self::InvalidArgument(format!("{shown}: a path component is not a directory")),
            IsADirectory => Self::InvalidArgument(format!("{shown}: is a directory")),
            FileTooLarge | StorageFull | QuotaExceeded => Self::TooLarge(format!("{shown}: {error}")),
            _ => {
                // cap-std reports an escape attempt (`..`, absolute path or a
                // symlink leading out) as a generic error with this wording.
                let text = error.to_string();
                if text.contains("outside of the filesystem") || text.contains("escape") {
                    Self::PermissionDenied(format!("{shown}: leads outside of the workspace"))
                } else {
                    Self::Io(format!("{shown}: {error}"))
                }
            }
        }
    }
}

/// What a tool call returns: its result, or why it failed.
pub type ToolResult<T> = Result<T, ToolError>;
