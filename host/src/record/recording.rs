//! A recorded episode read back: its events (each line kept as written, so
//! a replay can copy it and continue the hash chain), checked to chain from
//! the first line to the last.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::trace::{GENESIS, line_hash};

/// The events of a recorded episode, chained.
pub struct Recording {
    /// The episode's folder.
    pub dir: PathBuf,
    /// Each line of `events.jsonl`, as written.
    pub lines: Vec<String>,
    /// Each line, parsed.
    pub events: Vec<Value>,
    /// The blake3 of the last line: the chain's head.
    pub head: String,
}

impl Recording {
    /// Reads `<dir>/events.jsonl` and checks its hash chain; an error names
    /// the first line that does not chain (a changed, removed or inserted line).
    pub fn open(dir: &Path) -> Result<Self> {
        let path = dir.join("events.jsonl");
        let text = super::read_record_file(&path, super::MAX_EVENTS)?;
        let mut head = GENESIS.to_string();
        let (mut lines, mut events) = (Vec::new(), Vec::new());
        for (number, line) in text.lines().enumerate() {
            let event: Value = serde_json::from_str(line)
                .with_context(|| format!("{}: line {} is not JSON", path.display(), number + 1))?;
            match event["prev"].as_str() {
                None => bail!(
                    "{}: line {} has no `prev`: recorded by an mlrb without hash chains, it cannot be checked or replayed",
                    path.display(),
                    number + 1
                ),
                Some(prev) if prev != head => bail!(
                    "{}: line {} does not chain to the line before it: the trace was changed",
                    path.display(),
                    number + 1
                ),
                Some(_) => {}
            }
            head = line_hash(line.as_bytes());
            lines.push(line.to_string());
            events.push(event);
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            lines,
            events,
            head,
        })
    }

    /// The snapshot store's objects (where long strings are kept whole).
    pub fn objects(&self) -> PathBuf {
        self.dir.join("snapshots/objects")
    }

    /// Whether event `index` is a call of the agent's (not a `wasi` or
    /// `host` record).
    pub fn is_call(&self, index: usize) -> bool {
        is_call(&self.events[index])
    }
}

/// Whether an event is a call of the agent's to an mlrb interface (or a
/// person's command line, `shell`, in an agent's place).
pub fn is_call(event: &Value) -> bool {
    matches!(
        event["interface"].as_str(),
        Some("workspace" | "exec" | "episode" | "llm" | "shell")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::trace::{Event, Trace, raw};

    #[test]
    fn a_changed_removed_or_inserted_line_breaks_the_chain() {
        let tmp = tempfile::tempdir().unwrap();
        let mut trace = Trace::create(&tmp.path().join("events.jsonl"), std::time::Instant::now(), 1 << 20).unwrap();
        let (args, result) = (raw(&Value::Null), raw(&serde_json::json!({"ok": 1})));
        for seq in 1..=3 {
            let event = Event {
                prev: "",
                seq,
                t_ms: 0.0,
                interface: "workspace",
                function: "read-file",
                step: Some(seq as u32),
                args: &args,
                result: &result,
                duration_us: 0,
                snapshot: None,
                llm: None,
            };
            trace.write(&event).unwrap();
        }
        let recording = Recording::open(tmp.path()).unwrap();
        assert_eq!(recording.events.len(), 3);
        assert_eq!(recording.head, trace.head());
        let original = std::fs::read_to_string(tmp.path().join("events.jsonl")).unwrap();
        let lines: Vec<&str> = original.lines().collect();
        for altered in [
            original.replacen("{\"ok\":1}", "{\"ok\":2}", 1),
            format!("{}\n{}\n", lines[0], lines[2]),
            format!("{}\n{}\n{}\n{}\n", lines[0], lines[1], lines[1], lines[2]),
        ] {
            std::fs::write(tmp.path().join("events.jsonl"), altered).unwrap();
            let error = Recording::open(tmp.path()).err().unwrap().to_string();
            assert!(error.contains("does not chain"), "{error}");
        }
    }
}
