//! What a scan reads of one episode: its record, every line of its events
//! (read even where the hash chain is broken, which another check reports),
//! the step each line belongs to, and its snapshots and kept strings on demand.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::Result;
use serde_json::Value;

use super::flag::{Flag, Kind, Severity};
use crate::episode::EpisodeRecord;
use crate::record::recording::is_call;
use crate::record::snapshot::{self, Manifest, ManifestEntry};

/// The most of a file or kept string a check reads (scripts, submissions).
const MAX_TEXT: u64 = 4 << 20;

/// Snapshots kept read at once (each holds every path of its workspace).
const KEPT_MANIFESTS: usize = 8;

/// One episode's records, as the checks read them.
pub struct Evidence {
    /// The episode's folder.
    pub dir: PathBuf,
    /// How flags name the episode.
    pub id: String,
    /// `episode.json`.
    pub record: EpisodeRecord,
    /// Each line of `events.jsonl`, parsed (`null` where a line is not JSON).
    pub events: Vec<Value>,
    steps: Vec<Option<u32>>,
    manifests: RefCell<BTreeMap<u64, Option<Rc<Manifest>>>>,
}

impl Evidence {
    /// Reads the episode in `dir`; an error (naming the file) when its
    /// `episode.json` or `events.jsonl` cannot be read at all.
    pub fn read(dir: &Path, id: &str) -> Result<Self> {
        let record = EpisodeRecord::read(dir)?;
        let text = crate::record::read_record_file(&dir.join("events.jsonl"), crate::record::MAX_EVENTS)?;
        let events = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or(Value::Null))
            .collect();
        Ok(Self::of(dir, id, record, events))
    }

    /// The evidence of `record` and `events`, with the snapshots in `dir`.
    pub fn of(dir: &Path, id: &str, record: EpisodeRecord, events: Vec<Value>) -> Self {
        let steps = steps_of(&events);
        Self {
            dir: dir.to_path_buf(),
            id: id.to_string(),
            record,
            events,
            steps,
            manifests: RefCell::new(BTreeMap::new()),
        }
    }

    /// A flag of this episode at event `index` (from 0), or of the episode
    /// as a whole.
    pub fn flag(&self, kind: Kind, severity: Severity, index: Option<usize>, detail: String) -> Flag {
        Flag {
            kind,
            severity,
            episode: self.id.clone(),
            step: index.and_then(|i| self.steps.get(i).copied().flatten()),
            line: index.map(|i| i + 1),
            detail,
        }
    }

    /// The agent's calls, with their indexes.
    pub fn calls(&self) -> impl Iterator<Item = (usize, &Value)> {
        self.events.iter().enumerate().filter(|(_, e)| is_call(e))
    }

    /// The host's records of `function` (`snapshot`, `egress`, ...), with their indexes.
    pub fn host_records<'a>(&'a self, function: &'a str) -> impl Iterator<Item = (usize, &'a Value)> + 'a {
        self.events
            .iter()
            .enumerate()
            .filter(move |(_, e)| e["interface"] == "host" && e["function"] == function)
    }

    /// The task the agent was told of (its `host run` record), if recorded.
    pub fn task_told(&self) -> Option<&Value> {
        self.host_records("run").next().map(|(_, e)| &e["args"]["task"])
    }

    /// The snapshot the workspace started from: the first one recorded (a
    /// fork's, the one it started on).
    pub fn first_snapshot(&self) -> Option<u64> {
        let fork = self
            .host_records("fork")
            .next()
            .and_then(|(_, e)| e["args"]["snapshot"].as_u64());
        fork.or_else(|| {
            self.host_records("snapshot")
                .next()
                .and_then(|(_, e)| e["args"]["id"].as_u64())
        })
    }

    /// Snapshot `id` with its entries; `None` where it cannot be read (the
    /// integrity check says why).
    pub fn manifest(&self, id: u64) -> Option<Rc<Manifest>> {
        let mut cache = self.manifests.borrow_mut();
        if let Some(kept) = cache.get(&id) {
            return kept.clone();
        }
        // Checks walk the snapshots forwards, often back to the first one.
        let first = self.first_snapshot();
        if cache.len() >= KEPT_MANIFESTS
            && let Some(oldest) = cache.keys().copied().find(|k| Some(*k) != first)
        {
            cache.remove(&oldest);
        }
        let read = snapshot::read_manifest(&self.dir.join("snapshots"), id)
            .ok()
            .map(Rc::new);
        cache.insert(id, read.clone());
        read
    }

    /// The entry at `path` in snapshot `id`.
    pub fn entry(&self, id: u64, path: &str) -> Option<ManifestEntry> {
        self.manifest(id)?.entries.get(path).cloned()
    }

    /// The text of a file of snapshot `id`, when it is a file (of at most a few MiB) of UTF-8.
    pub fn file_text(&self, id: u64, path: &str) -> Option<String> {
        match self.entry(id, path)? {
            ManifestEntry::File { hash, size, .. } if size <= MAX_TEXT => self.object_text(&hash),
            _ => None,
        }
    }

    /// A string as the trace recorded it: itself, or when it was too long
    /// for a line, the whole of it kept among the snapshot objects.
    pub fn full_text(&self, value: &Value) -> Option<String> {
        match value {
            Value::String(text) => Some(text.clone()),
            Value::Object(cut) => match cut.get("blake3").and_then(Value::as_str) {
                Some(hash) if snapshot::is_hash(hash) => self.object_text(hash),
                _ => cut.get("clipped").and_then(Value::as_str).map(String::from),
            },
            _ => None,
        }
    }

    fn object_text(&self, hash: &str) -> Option<String> {
        let path = self.dir.join("snapshots/objects").join(hash);
        crate::record::read_record_file(&path, MAX_TEXT).ok()
    }

    /// The snapshot in effect before each event: the workspace as the call
    /// at that index found it.
    pub fn snapshots_before(&self) -> Vec<Option<u64>> {
        let mut current = self.first_snapshot();
        let mut before = Vec::with_capacity(self.events.len());
        for event in &self.events {
            before.push(current);
            if is_call(event)
                && let Some(id) = event["snapshot"].as_u64()
            {
                current = Some(id);
            }
        }
        before
    }
}

/// The step each line belongs to: a call's own; for the host's records of
/// a call's snapshot (written before the call's line), the call's that
/// follows; for anything else (egress after a script, clock reads, refused
/// calls), the last step taken before it.
fn steps_of(events: &[Value]) -> Vec<Option<u32>> {
    let step = |e: &Value| e["step"].as_u64().map(|s| s as u32);
    let mut last = None;
    let mut steps: Vec<Option<u32>> = events
        .iter()
        .map(|e| {
            last = step(e).or(last);
            last
        })
        .collect();
    let mut next_call = None;
    for (index, event) in events.iter().enumerate().rev() {
        if is_call(event) {
            next_call = step(event).or(steps[index]);
        }
        let before_its_call = matches!(
            event["function"].as_str(),
            Some("snapshot" | "snapshot-refused" | "restore-read-only")
        );
        if event["interface"] == "host" && before_its_call && next_call.is_some() {
            steps[index] = next_call;
        }
    }
    steps
}

/// A call's main path or script, for a flag's detail.
pub fn call_subject(event: &Value) -> String {
    let args = &event["args"];
    let named = ["path", "script", "dir", "source"]
        .iter()
        .find_map(|key| args[*key].as_str().map(String::from));
    let subject = match (named, args["destination"].as_str()) {
        (Some(source), Some(destination)) => format!("{source} → {destination}"),
        (Some(named), None) => named,
        (None, _) => String::new(),
    };
    let function = format!(
        "{} {}",
        event["interface"].as_str().unwrap_or(""),
        event["function"].as_str().unwrap_or("")
    );
    match subject.is_empty() {
        true => function,
        false => format!("{function} {}", super::flag::one_line(&format!("{subject:?}"), 120)),
    }
}

/// A call's error, when it returned one: its kind and message.
pub fn call_error(event: &Value) -> Option<(&str, &str)> {
    let error = &event["result"]["error"];
    Some((error["kind"].as_str()?, error["message"].as_str().unwrap_or("")))
}
