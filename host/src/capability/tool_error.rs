//! The host's side of the WIT `tool-error`: what a tool call tells the agent
//! when it cannot do what was asked.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", content = "message", rename_all = "kebab-case")]
pub enum ToolError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("too large: {0}")]
    TooLarge(String),
    #[error("timeout: {0}")]
    Timeout(String),
    #[error("budget exhausted: {0}")]
    BudgetExhausted(String),
    #[error("unavailable: {0}")]
    Unavailable(String),
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

pub type ToolResult<T> = Result<T, ToolError>;
