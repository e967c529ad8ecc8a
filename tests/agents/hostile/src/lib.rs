//! Shared pieces of the hostile agents. Each agent reports what it tried as
//! lines of its final answer, `<attempt>: <outcome>`, which the tests read
//! next to the trace.

use mlrb_sdk::{ExecResult, ToolError, ToolErrorExt, exec, workspace};

/// Writes `source` as a workspace script and runs it.
pub fn run_python(name: &str, source: &str, timeout_seconds: Option<u32>) -> Result<ExecResult, ToolError> {
    workspace::write(name, source)?;
    exec::run_with_timeout(name, &[], timeout_seconds)
}

/// One line of the report for an attempt that should have been refused.
pub fn outcome<T: std::fmt::Debug>(attempt: &str, result: &Result<T, ToolError>) -> String {
    match result {
        Ok(value) => {
            let shown = format!("{value:?}");
            format!("{attempt}: ESCAPED {}", &shown[..shown.len().min(200)])
        }
        Err(ToolError::PermissionDenied(_)) => format!("{attempt}: denied"),
        Err(ToolError::NotFound(_)) => format!("{attempt}: not-found"),
        Err(other) => format!("{attempt}: refused ({}: {})", other.kind(), other.message()),
    }
}

/// The script's output, for the report.
pub fn script_report(attempt: &str, result: &Result<ExecResult, ToolError>) -> String {
    match result {
        Ok(r) => format!(
            "{attempt}: termination={:?} exit={:?} stdout_truncated={} stdout={}",
            r.termination,
            r.exit_code,
            r.stdout_truncated,
            r.stdout
                .trim()
                .replace('\n', " | ")
                .chars()
                .take(2000)
                .collect::<String>()
        ),
        Err(e) => format!("{attempt}: error {}: {}", e.kind(), e.message()),
    }
}

/// A Python script that sleeps `seconds`, with a `sleep` child of its own:
/// what must be gone, tree and all, once its timeout passes.
pub fn sleeper(seconds: u32) -> String {
    format!("import subprocess, time\nsubprocess.Popen([\"sleep\", \"{seconds}\"])\ntime.sleep({seconds})\n")
}

/// A script's stdout as report lines, each prefixed with `attempt`; or how
/// the call failed.
pub fn script_lines(attempt: &str, result: &Result<ExecResult, ToolError>) -> String {
    match result {
        Ok(r) => {
            let mut lines: Vec<String> = r.stdout.lines().map(|l| format!("{attempt}> {l}")).collect();
            lines.push(format!(
                "{attempt}: termination={:?} exit={:?}",
                r.termination, r.exit_code
            ));
            lines.join("\n")
        }
        Err(e) => format!("{attempt}: error {}: {}", e.kind(), e.message()),
    }
}
