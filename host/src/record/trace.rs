//! `events.jsonl`: one JSON line per import call, in call order.
//!
//! Each line is written and flushed as the call returns, so an episode that
//! is killed keeps every completed call.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Strings longer than this are cut in the trace (with their full length
/// and blake3 recorded), so a 1 MiB read does not make a 1 MiB event.
pub const MAX_TRACE_STRING: usize = 64 << 10;

/// An event larger than this (many strings, each under the cap) has every
/// string cut to [`CLIPPED_EVENT_STRING`] instead.
pub const MAX_EVENT_BYTES: usize = 4 << 20;
const CLIPPED_EVENT_STRING: usize = 4 << 10;

/// One line of `events.jsonl`: one import call and what it returned.
#[derive(Debug, Serialize)]
pub struct Event<'a> {
    /// The call's number in the episode, from 1.
    pub seq: u64,
    /// Milliseconds since the episode started.
    pub t_ms: f64,
    /// The WIT interface called, e.g. `exec`.
    pub interface: &'a str,
    /// The function called.
    pub function: &'a str,
    /// The step this call counted as, if it was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// The call's arguments, as JSON.
    pub args: &'a RawValue,
    /// What the call returned, as JSON.
    pub result: &'a RawValue,
    /// How long the call took, in microseconds.
    pub duration_us: u64,
    /// The snapshot taken after this call, when it changed the workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<u64>,
    /// For `llm` calls: the provider, attempts, waiting and working time, cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<&'a RawValue>,
}

/// The open `events.jsonl` of one episode, with its size and budget.
pub struct Trace {
    out: BufWriter<File>,
    seq: u64,
    started: Instant,
    bytes: u64,
    budget: u64,
}

impl Trace {
    /// A trace that may grow to `budget` bytes before [`Trace::spent`] says so.
    pub fn create(path: &Path, started: Instant, budget: u64) -> std::io::Result<Self> {
        Ok(Self {
            out: BufWriter::new(File::create(path)?),
            seq: 0,
            started,
            bytes: 0,
            budget,
        })
    }

    /// Events written so far.
    pub fn events(&self) -> u64 {
        self.seq
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes the trace may hold before it counts as spent.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// True once the trace holds more than its budget.
    pub fn spent(&self) -> bool {
        self.bytes > self.budget
    }

    /// The number of the next event (from 1).
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Milliseconds since the episode started.
    pub fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    /// Appends one event and flushes it; an oversized event has its strings cut.
    pub fn write(&mut self, event: &Event<'_>) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event)?;
        if line.len() > MAX_EVENT_BYTES {
            let value: Value = serde_json::from_slice(&line)?;
            let mut value = clip_to(value, CLIPPED_EVENT_STRING);
            value["clipped_event_bytes"] = Value::from(line.len());
            line = serde_json::to_vec(&value)?;
        }
        line.push(b'\n');
        self.out.write_all(&line)?;
        self.bytes += line.len() as u64;
        self.out.flush()
    }

    /// Flushes and syncs at the end of the episode.
    pub fn finish(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }
}

/// `value` as trace JSON: serialised once on the fast path; only output that
/// may hold an over-long string goes through [`clip`].
pub fn raw<T: Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    let text = if text.len() > MAX_TRACE_STRING {
        let clipped = clip(serde_json::from_str(&text).unwrap_or(Value::Null));
        serde_json::to_string(&clipped).unwrap_or_else(|_| "null".into())
    } else {
        text
    };
    RawValue::from_string(text).unwrap_or_else(|_| RawValue::from_string("null".into()).unwrap())
}

/// An argument's text as the trace keeps it: itself, or when over-long its
/// head with its length and blake3 (never a full copy of a huge argument).
pub fn text(s: &str) -> Value {
    if s.len() <= MAX_TRACE_STRING {
        return Value::String(s.to_string());
    }
    clipped(s, MAX_TRACE_STRING)
}

/// The head of `s` (at most `max` bytes, on a character boundary) with its
/// full length and blake3.
fn clipped(s: &str, max: usize) -> Value {
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    serde_json::json!({
        "clipped": &s[..end],
        "bytes": s.len(),
        "blake3": blake3::hash(s.as_bytes()).to_hex().to_string(),
    })
}

/// Replaces over-long strings anywhere in `value` by their head plus a note.
pub fn clip(value: Value) -> Value {
    clip_to(value, MAX_TRACE_STRING)
}

fn clip_to(value: Value, max: usize) -> Value {
    match value {
        Value::String(s) if s.len() > max => clipped(&s, max),
        Value::Array(items) => Value::Array(items.into_iter().map(|v| clip_to(v, max)).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, clip_to(v, max))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_clips_only_what_is_too_long() {
        assert_eq!(raw(&serde_json::json!({"a": [1, "x"]})).get(), r#"{"a":[1,"x"]}"#);
        let long = "x".repeat(MAX_TRACE_STRING + 10);
        let clipped: Value = serde_json::from_str(raw(&serde_json::json!({"ok": long})).get()).unwrap();
        assert_eq!(clipped["ok"]["bytes"], MAX_TRACE_STRING + 10);
    }

    #[test]
    fn a_huge_event_is_clipped_and_the_budget_is_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("events.jsonl");
        let mut trace = Trace::create(&path, Instant::now(), 1 << 20).unwrap();
        let many: Vec<String> = (0..200).map(|i| format!("{i}").repeat(60_000)).collect();
        let args = raw(&serde_json::json!({ "messages": many }));
        let result = raw(&Value::Null);
        let event = Event {
            seq: 1,
            t_ms: 0.0,
            interface: "llm",
            function: "complete",
            step: None,
            args: &args,
            result: &result,
            duration_us: 0,
            snapshot: None,
            llm: None,
        };
        trace.write(&event).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.len() < MAX_EVENT_BYTES, "{}", written.len());
        let line: Value = serde_json::from_str(written.trim()).unwrap();
        assert!(line["clipped_event_bytes"].as_u64().unwrap() > MAX_EVENT_BYTES as u64);
        assert_eq!(trace.bytes(), written.len() as u64);
        assert!(!trace.spent());
        for _ in 0..4 {
            trace.write(&event).unwrap();
        }
        assert!(trace.spent());
    }

    #[test]
    fn long_strings_are_clipped_with_hash() {
        let long = "é".repeat(MAX_TRACE_STRING);
        let clipped = clip(serde_json::json!({"content": long}));
        let inner = &clipped["content"];
        assert_eq!(inner["bytes"], long.len());
        assert!(inner["clipped"].as_str().unwrap().len() <= MAX_TRACE_STRING);
        assert_eq!(clip(serde_json::json!("short")), serde_json::json!("short"));
    }
}
