//! What the records keep of the runs of one evaluation: their stdout and
//! stderr share one budget for the whole evaluation (the task's log cap of
//! one script), however many runs it makes, and each run leaves a line of
//! how it ended in `<prefix>-runs.jsonl` (which `mlrb scan` reads).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::Reply;

/// The logs and the record of one evaluation's runs.
pub struct Logs {
    prefix: Option<PathBuf>,
    left: u64,
}

impl Logs {
    /// Logs beside `prefix` (none: nothing is kept), `budget` bytes in all.
    pub fn new(prefix: Option<PathBuf>, budget: u64) -> Self {
        Self { prefix, left: budget }
    }

    /// What each stream of the next run may log: a quarter of what is left,
    /// so that no run takes more than half of it and later runs still log.
    pub fn next_cap(&self) -> u64 {
        self.left / 4
    }

    /// Records how run `number` ended and charges what it logged.
    pub fn ran(&mut self, number: u32, reply: &Reply) {
        let Some(prefix) = &self.prefix else { return };
        let run = run_prefix(prefix, number);
        for stream in ["stdout", "stderr"] {
            let logged = std::fs::metadata(run.with_extension(stream)).map_or(0, |m| m.len());
            self.left = self.left.saturating_sub(logged);
        }
        let mut line = serde_json::to_value(reply).unwrap_or_default();
        if let Some(fields) = line.as_object_mut() {
            // Its end is in its own log; the record says how it ended.
            fields.remove("stderr");
            fields.insert("run".into(), number.into());
        }
        let path = PathBuf::from(format!("{}-runs.jsonl", prefix.display()));
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| writeln!(file, "{line}"));
        if let Err(error) = written {
            tracing::warn!("cannot record a run of submitted code in {}: {error}", path.display());
        }
    }
}

/// Where run `number` of an evaluation logging beside `prefix` logs
/// (`<prefix>-run-<number>.stdout` and `.stderr`).
pub fn run_prefix(prefix: &Path, number: u32) -> PathBuf {
    PathBuf::from(format!("{}-run-{number}", prefix.display()))
}
