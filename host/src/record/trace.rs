//! `events.jsonl`: one JSON line per import call, in call order.
//!
//! Each line is written and flushed as the call returns, so an episode that
//! is killed keeps every completed call. Each line carries the blake3 of
//! the line before it (`prev`): the trace is a hash chain, and its head
//! (the hash of the last line) binds the whole of it. A string too long to
//! keep in a line is cut there, and kept whole in the snapshot store's
//! objects (by its blake3), so that a replay can answer with it.

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

/// The `prev` of an episode's first line.
pub const GENESIS: &str = "genesis";

/// One line of `events.jsonl`: one import call and what it returned.
#[derive(Debug, Serialize)]
pub struct Event<'a> {
    /// The blake3 of the previous line (without its newline), or [`GENESIS`].
    pub prev: &'a str,
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
    /// The blake3 of the last line written, in hex.
    head: String,
    /// Where strings cut from lines are kept whole (by blake3).
    objects: Option<std::path::PathBuf>,
    /// Lines already in the file (a resumed episode's records): a replay
    /// copying them checks their chain and moves past them.
    present: u64,
}

/// The blake3 of one trace line (without its newline), in hex.
pub fn line_hash(line: &[u8]) -> String {
    blake3::hash(line).to_hex().to_string()
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
            head: GENESIS.into(),
            objects: None,
            present: 0,
        })
    }

    /// The trace of a resumed episode: `path` holds `lines` (its records
    /// up to the last call recorded whole, chained); a replay copies them
    /// through [`Trace::write_recorded`], and new lines follow them.
    pub fn continuing(path: &Path, lines: u64, started: Instant, budget: u64) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Self {
            bytes: file.metadata()?.len(),
            out: BufWriter::new(file),
            seq: 0,
            started,
            budget,
            head: GENESIS.into(),
            objects: None,
            present: lines,
        })
    }

    /// Keeps every string cut from a line whole in `objects`, named by its
    /// blake3 (the snapshot store's objects, which files share).
    pub fn keeping_objects(mut self, objects: &Path) -> Self {
        self.objects = Some(objects.to_path_buf());
        self
    }

    /// The blake3 of the last line: the head of the hash chain.
    pub fn head(&self) -> &str {
        &self.head
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

    /// Counts time from `started` on (a resumed episode going live: its
    /// clock goes on from the time it had used).
    pub fn rebase(&mut self, started: Instant) {
        self.started = started;
    }

    /// Makes every line written so far durable (a step boundary: at most
    /// the step in flight is lost with the machine).
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_data()
    }

    /// Milliseconds since the episode started.
    pub fn elapsed_ms(&self) -> f64 {
        self.started.elapsed().as_secs_f64() * 1000.0
    }

    /// Appends one event (chained to the line before) and flushes it;
    /// strings over [`MAX_TRACE_STRING`] are cut (kept whole as objects),
    /// and an oversized event has every string cut.
    pub fn write(&mut self, event: &Event<'_>) -> std::io::Result<()> {
        let head = self.head.clone();
        let event = Event { prev: &head, ..*event };
        let mut line = serde_json::to_vec(&event)?;
        if line.len() > MAX_TRACE_STRING {
            let value: Value = serde_json::from_slice(&line)?;
            let mut keep = |s: &str| self.keep(s);
            let mut value = clip_to(value, MAX_TRACE_STRING, &mut keep);
            let clipped = serde_json::to_vec(&value)?;
            if clipped.len() > MAX_EVENT_BYTES {
                value = clip_to(value, CLIPPED_EVENT_STRING, &mut keep);
                value["clipped_event_bytes"] = Value::from(line.len());
                line = serde_json::to_vec(&value)?;
            } else {
                line = clipped;
            }
        }
        self.append(line)
    }

    /// Appends a line as it was recorded (a replay copying the recording's
    /// prefix): it must chain to the last line written.
    pub fn write_recorded(&mut self, line: &str, seq: u64) -> std::io::Result<()> {
        let prev = serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| v["prev"].as_str().map(String::from));
        if prev.as_deref() != Some(self.head.as_str()) {
            return Err(std::io::Error::other(format!(
                "recorded event {seq} does not chain to the one before it"
            )));
        }
        self.seq = seq;
        if seq <= self.present {
            self.head = line_hash(line.as_bytes());
            return Ok(());
        }
        self.append(line.as_bytes().to_vec())
    }

    fn append(&mut self, mut line: Vec<u8>) -> std::io::Result<()> {
        self.head = line_hash(&line);
        line.push(b'\n');
        self.out.write_all(&line)?;
        self.bytes += line.len() as u64;
        self.out.flush()
    }

    /// Keeps `s` whole among the objects; a failure only loses what a
    /// replay would need of it, with a warning.
    fn keep(&self, s: &str) {
        let Some(dir) = &self.objects else { return };
        let path = dir.join(blake3::hash(s.as_bytes()).to_hex().as_str());
        if path.exists() {
            return;
        }
        let kept = std::fs::create_dir_all(dir).and_then(|()| {
            let tmp = tempfile::NamedTempFile::new_in(dir)?;
            std::fs::write(tmp.path(), s.as_bytes())?;
            tmp.persist(&path).map(|_| ()).map_err(|e| e.error)
        });
        if let Err(error) = kept {
            tracing::warn!(%error, "keeping a long string of the trace");
        }
    }

    /// Flushes and syncs at the end of the episode.
    pub fn finish(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }
}

/// `value` as trace JSON (whole: the trace cuts what is too long as it
/// writes the line, keeping it as an object).
pub fn raw<T: Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
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

/// Replaces over-long strings anywhere in `value` by their head plus a
/// note, handing each whole to `keep` first.
fn clip_to(value: Value, max: usize, keep: &mut dyn FnMut(&str)) -> Value {
    match value {
        Value::String(s) if s.len() > max => {
            keep(&s);
            clipped(&s, max)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(|v| clip_to(v, max, keep)).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, clip_to(v, max, keep))).collect()),
        other => other,
    }
}

/// `value` with every cut string (`{"clipped", "bytes", "blake3"}`) made
/// whole again from `objects`, each checked against its hash; `None` when
/// one is missing or does not match.
pub fn unclip(value: Value, objects: &Path) -> Option<Value> {
    match value {
        Value::Object(map) if map.contains_key("clipped") && map.contains_key("blake3") && map.len() == 3 => {
            // Only a hash names a file here: a recording may come from anyone.
            let hash = map["blake3"].as_str().filter(|h| super::snapshot::is_hash(h))?;
            let text = super::read_record_file(&objects.join(hash), super::MAX_EVENTS).ok()?;
            (blake3::hash(text.as_bytes()).to_hex().as_str() == hash).then_some(Value::String(text))
        }
        Value::Array(items) => items
            .into_iter()
            .map(|v| unclip(v, objects))
            .collect::<Option<_>>()
            .map(Value::Array),
        Value::Object(map) => map
            .into_iter()
            .map(|(k, v)| unclip(v, objects).map(|v| (k, v)))
            .collect::<Option<serde_json::Map<_, _>>>()
            .map(Value::Object),
        other => Some(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event<'a>(args: &'a RawValue, result: &'a RawValue) -> Event<'a> {
        Event {
            prev: "",
            seq: 1,
            t_ms: 0.0,
            interface: "workspace",
            function: "read-file",
            step: None,
            args,
            result,
            duration_us: 0,
            snapshot: None,
            llm: None,
        }
    }

    #[test]
    fn long_strings_are_cut_kept_whole_and_made_whole_again() {
        let tmp = tempfile::tempdir().unwrap();
        let objects = tmp.path().join("objects");
        let path = tmp.path().join("events.jsonl");
        let mut trace = Trace::create(&path, Instant::now(), 1 << 30)
            .unwrap()
            .keeping_objects(&objects);
        let long = "é".repeat(MAX_TRACE_STRING);
        let (args, result) = (
            raw(&serde_json::json!({"path": "a"})),
            raw(&serde_json::json!({"ok": long})),
        );
        trace.write(&event(&args, &result)).unwrap();
        let line: Value = serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim()).unwrap();
        let cut = &line["result"]["ok"];
        assert_eq!(cut["bytes"], long.len());
        assert!(cut["clipped"].as_str().unwrap().len() <= MAX_TRACE_STRING);
        let whole = unclip(line["result"].clone(), &objects).unwrap();
        assert_eq!(whole["ok"], long.as_str());
        // A kept object that was changed is not taken for the string.
        let hash = cut["blake3"].as_str().unwrap();
        std::fs::write(objects.join(hash), "tampered").unwrap();
        assert!(unclip(line["result"].clone(), &objects).is_none());
    }

    #[test]
    fn lines_form_a_hash_chain_that_a_copy_must_continue() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("events.jsonl");
        let mut trace = Trace::create(&path, Instant::now(), 1 << 30).unwrap();
        let (args, result) = (raw(&Value::Null), raw(&Value::Null));
        trace.write(&event(&args, &result)).unwrap();
        trace.write(&event(&args, &result)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let first: Value = serde_json::from_str(lines[0]).unwrap();
        let second: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(first["prev"], GENESIS);
        assert_eq!(second["prev"], line_hash(lines[0].as_bytes()));
        assert_eq!(trace.head(), line_hash(lines[1].as_bytes()));
        // A copy takes the recorded lines in order, and no other.
        let mut copy = Trace::create(&tmp.path().join("copy.jsonl"), Instant::now(), 1 << 30).unwrap();
        assert!(copy.write_recorded(lines[1], 2).is_err());
        copy.write_recorded(lines[0], 1).unwrap();
        copy.write_recorded(lines[1], 2).unwrap();
        assert_eq!(copy.head(), trace.head());
    }

    #[test]
    fn a_huge_event_is_clipped_and_the_budget_is_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("events.jsonl");
        let mut trace = Trace::create(&path, Instant::now(), 1 << 20).unwrap();
        let many: Vec<String> = (0..200).map(|i| format!("{i}").repeat(60_000)).collect();
        let args = raw(&serde_json::json!({ "messages": many }));
        let result = raw(&Value::Null);
        let event = event(&args, &result);
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
}
