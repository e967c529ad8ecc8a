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

#[derive(Debug, Serialize)]
pub struct Event<'a> {
    pub seq: u64,
    /// Milliseconds since the episode started.
    pub t_ms: f64,
    pub interface: &'a str,
    pub function: &'a str,
    /// The step this call counted as, if it was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    pub args: &'a RawValue,
    pub result: &'a RawValue,
    pub duration_us: u64,
    /// The snapshot taken after this call, when it changed the workspace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<u64>,
    /// For `llm` calls: the provider, attempts, waiting and working time, cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<&'a RawValue>,
}

pub struct Trace {
    out: BufWriter<File>,
    seq: u64,
    started: Instant,
}

impl Trace {
    pub fn create(path: &Path, started: Instant) -> std::io::Result<Self> {
        Ok(Self {
            out: BufWriter::new(File::create(path)?),
            seq: 0,
            started,
        })
    }

    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    pub fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    pub fn write(&mut self, event: &Event<'_>) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, event)?;
        self.out.write_all(b"\n")?;
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

/// Replaces over-long strings anywhere in `value` by their head plus a note.
pub fn clip(value: Value) -> Value {
    match value {
        Value::String(s) if s.len() > MAX_TRACE_STRING => {
            let mut end = MAX_TRACE_STRING;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            serde_json::json!({
                "clipped": &s[..end],
                "bytes": s.len(),
                "blake3": blake3::hash(s.as_bytes()).to_hex().to_string(),
            })
        }
        Value::Array(items) => Value::Array(items.into_iter().map(clip).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, clip(v))).collect()),
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
    fn long_strings_are_clipped_with_hash() {
        let long = "é".repeat(MAX_TRACE_STRING);
        let clipped = clip(serde_json::json!({"content": long}));
        let inner = &clipped["content"];
        assert_eq!(inner["bytes"], long.len());
        assert!(inner["clipped"].as_str().unwrap().len() <= MAX_TRACE_STRING);
        assert_eq!(clip(serde_json::json!("short")), serde_json::json!("short"));
    }
}
