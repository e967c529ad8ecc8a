//! One finding of a task's checks (`tasks check`, `tasks test`): what was
//! checked, how it went, in words.

use serde::Serialize;

/// How one check of a task went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The check passed.
    Ok,
    /// Runs, but something is assumed or will happen on the first run.
    Warn,
    /// A run would fail or be refused.
    Fail,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Ok => "ok",
            Self::Warn => "warning",
            Self::Fail => "FAIL",
        })
    }
}

/// One check of a task and how it went.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    /// What was checked, e.g. "research problem".
    pub check: &'static str,
    /// How the check went.
    pub status: Status,
    /// What was found, in words.
    pub detail: String,
}

/// An item of `check`, found `status`, in words.
pub fn item(check: &'static str, status: Status, detail: impl Into<String>) -> Item {
    Item {
        check,
        status,
        detail: detail.into(),
    }
}
