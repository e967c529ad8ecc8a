//! What a person's session shows: the task as an agent is told it, the
//! commands, what is left, how a command ended, and a running command's
//! output read from its logs as they grow.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::console::Console;
use crate::capability::episode::{TaskInfoRecord, UsageRecord};
use crate::capability::exec::CommandOutcome;
use crate::sandbox::Termination;

/// The session's own commands.
pub const HELP: &str = "\
Each line you type runs in the task's sandbox (the workspace is /workspace), as one step,
like an agent's script: the same limits, no network unless the task grants it, nothing
of this machine outside the workspace. Programs that need a terminal (editors) do not
work: edit files with sed, python3 or a here-document (cat > f.py <<'EOF' ... EOF).
  task status     time, steps and validations left
  task validate   score the workspace as an agent's validate() does (counts as a step)
  task submit     end the session; the workspace is scored on the hidden answers
  task pause      stop for now (so does Ctrl-D); `mlrb human --resume DIR` goes on,
                  and the time paused is not charged
  task info       the task's description again
Ctrl-C stops the command running.";

/// What `exit` answers.
pub const EXIT_HINT: &str =
    "mlrb: `task submit` ends the session and scores the workspace; `task pause` (or Ctrl-D) stops for now";

/// What Ctrl-C at the prompt answers.
pub const INTERRUPT_HINT: &str = "^C (nothing running: `task submit` ends the session, `task pause` stops for now)";

/// A duration as `1h 02m`, `12m 05s` or `42s`.
pub fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s:02}s"),
        (h, m, _) => format!("{h}h {m:02}m"),
    }
}

/// The task as an agent is told it (`episode.task()`).
pub fn task_info(info: &TaskInfoRecord) -> String {
    let direction = if info.higher_is_better { "higher" } else { "lower" };
    let baseline = info
        .baseline
        .map_or(String::new(), |b| format!(", the starter scores {b}"));
    format!(
        "task {} {}\n\n{}\n\nmetric: {} ({direction} is better{baseline})\nbudget: {} steps, {} of wall-clock time\n",
        info.name,
        info.version,
        info.research_problem.trim(),
        info.metric,
        info.max_steps,
        duration(Duration::from_secs(info.wall_seconds)),
    )
}

/// What `task status` shows.
pub fn status(usage: &UsageRecord, left: Duration, (used, allowed): (usize, Option<u32>)) -> String {
    let validations = match allowed {
        Some(allowed) => format!("{used} of {allowed} used"),
        None => "not offered by this task".into(),
    };
    format!(
        "steps: {} of {} used\ntime: {} used, {} left\nvalidations: {validations}",
        usage.steps,
        usage.max_steps,
        duration(Duration::from_millis(usage.elapsed_ms)),
        duration(left),
    )
}

/// How a command ended, when that is worth a line: a failure, a timeout,
/// the host stopping it.
pub fn ending(outcome: &CommandOutcome) -> String {
    let mut said = String::new();
    if let Some(note) = &outcome.note {
        said.push_str(&format!("[mlrb: {note}]\n"));
    }
    match (outcome.termination, outcome.exit_code) {
        (Termination::Exited, Some(0)) => {}
        (Termination::Exited, Some(code)) => said.push_str(&format!("[exit {code}]\n")),
        (other, _) => said.push_str(&format!("[{}]\n", termination(other))),
    }
    said
}

fn termination(t: Termination) -> &'static str {
    match t {
        Termination::Exited => "exited",
        Termination::TimedOut => "stopped: out of time",
        Termination::OutOfMemory => "stopped: out of memory",
        Termination::Killed => "killed",
    }
}

/// A running command's stdout and stderr logs, shown as they grow.
pub struct Tail {
    streams: [(PathBuf, u64); 2],
    /// Whether what was shown last ended a line (or nothing was shown).
    at_line_start: bool,
}

impl Tail {
    /// The logs at `prefix` (`.stdout`, `.stderr`), from their start.
    pub fn new(prefix: &Path) -> Self {
        Self {
            streams: ["stdout", "stderr"].map(|s| (prefix.with_extension(s), 0)),
            at_line_start: true,
        }
    }

    /// Whether the output shown so far ended its last line.
    pub fn at_line_start(&self) -> bool {
        self.at_line_start
    }

    /// Shows what the logs gained since last time.
    pub fn more(&mut self, console: &mut Console) {
        for (path, offset) in &mut self.streams {
            let Ok(mut file) = std::fs::File::open(&*path) else {
                continue;
            };
            let mut bytes = Vec::new();
            if file.seek(SeekFrom::Start(*offset)).is_ok() && file.read_to_end(&mut bytes).is_ok() && !bytes.is_empty()
            {
                *offset += bytes.len() as u64;
                self.at_line_start = bytes.ends_with(b"\n");
                console.show(&String::from_utf8_lossy(&bytes));
            }
        }
    }
}
