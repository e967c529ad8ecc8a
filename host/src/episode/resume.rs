//! An episode whose host died (killed, its node lost, its Slurm job
//! preempted or requeued, its lease lost) goes on from its last recorded
//! call instead of from scratch. What it left is read back here: its trace
//! cut to the last call recorded whole (the call in flight is run again),
//! the snapshot after that call, and the time its agent had used. The
//! records stay one episode: `episode.json` lists each resume, the trace
//! continues its hash chain and marks where it went on live.

use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::EpisodeRecord;
use super::end::EndReason;
use crate::record::recording::{Recording, is_call};
use crate::record::snapshot;
use crate::record::trace::{GENESIS, line_hash};

/// One resume of an episode, as `episode.json` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResumeRecord {
    /// When it was resumed, as an RFC 3339 UTC time.
    pub at: String,
    /// Why its host stopped: "host killed" or "interrupted".
    pub why: String,
    /// The last step recorded whole: the replay answered every call up
    /// to it, and the episode went on live after it.
    pub after_step: u32,
    /// The recorded events kept (the trace's lines before the resume mark).
    pub kept_events: u64,
    /// Events recorded after the last whole call and dropped with it (the
    /// clock reads and records of the call in flight).
    pub dropped_events: u64,
    /// Wall-clock time the agent had used, charged to its budget.
    pub charged_ms: u64,
    /// From the last recorded event to the resume: the dead host's time,
    /// not charged to the agent.
    pub uncharged_ms: u64,
    /// Set when the replay of the recorded calls diverged (an agent that is
    /// not deterministic given its inputs): the episode started again from
    /// scratch, never mixing two runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted: Option<String>,
}

impl ResumeRecord {
    /// An episode whose records could not be resumed from, started again.
    pub fn restarted(why: String) -> Self {
        Self {
            at: crate::format::now_rfc3339(),
            why: "host killed".into(),
            after_step: 0,
            kept_events: 0,
            dropped_events: 0,
            charged_ms: 0,
            uncharged_ms: 0,
            restarted: Some(why),
        }
    }
}

/// Removes an episode's folder (or part of it). Scripts of a dead host die
/// with it, but not instantly: a file one of them writes while the folder
/// is being removed makes that fail with "not empty", so it is tried
/// again, briefly.
pub fn remove_records(dir: &Path) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match crate::record::walk::remove_tree(dir) {
            Err(error) if error.kind() == std::io::ErrorKind::DirectoryNotEmpty && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            other => return other,
        }
    }
}

/// What a dead episode's folder allows.
pub enum Resumable {
    /// Nothing recorded there: run it fresh.
    Nothing,
    /// Its agent's part ended and its records are whole (the host died
    /// before or while scoring it): nothing to resume, only to score.
    Ended(Box<EpisodeRecord>),
    /// It goes on from here.
    Resume(Box<ResumePoint>),
    /// Its records cannot be resumed from; it starts again, for this reason.
    Restart(String),
}

/// Where a dead episode goes on from.
pub struct ResumePoint {
    /// Its `episode.json` as the dead host left it.
    pub record: EpisodeRecord,
    /// Its trace up to the last call recorded whole (what the replay answers).
    pub recording: Recording,
    /// The snapshot after that call: the workspace it goes on with.
    pub snapshot: u64,
    /// This resume, for `episode.json` and the trace's mark.
    pub resume: ResumeRecord,
}

impl Resumable {
    /// Reads what the episode in `dir` left.
    pub fn read(dir: &Path) -> Resumable {
        if !dir.join("episode.json").exists() {
            return Resumable::Nothing;
        }
        let record = match EpisodeRecord::read(dir) {
            Ok(record) => record,
            Err(error) => return Resumable::Restart(format!("{error:#}")),
        };
        let why = match &record.end {
            None => "host killed",
            Some(end) if end.reason == EndReason::Interrupted => "interrupted",
            Some(_) => return Resumable::Ended(Box::new(record)),
        };
        match ResumePoint::read(dir, record, why) {
            Ok(point) => Resumable::Resume(Box::new(point)),
            Err(why) => Resumable::Restart(format!("{why:#}")),
        }
    }
}

/// The step the dead host's episode in `dir` would go on after, if it can.
pub fn resumable_after(dir: &Path) -> Option<u32> {
    match Resumable::read(dir) {
        Resumable::Resume(point) => Some(point.resume.after_step),
        _ => None,
    }
}

impl ResumePoint {
    fn read(dir: &Path, record: EpisodeRecord, why: &str) -> Result<Self> {
        let path = dir.join("events.jsonl");
        let text = crate::record::read_record_file(&path, crate::record::MAX_EVENTS)?;
        let (lines, events) = chained_lines(&text).with_context(|| path.display().to_string())?;
        let total = lines.len();
        let Some(last_call) = events.iter().rposition(is_call) else {
            anyhow::bail!("no call of the agent's was recorded: nothing to resume from");
        };
        let (lines, events) = (lines[..=last_call].to_vec(), events[..=last_call].to_vec());
        let snapshot = events.iter().rev().find_map(snapshot_of).unwrap_or(0);
        snapshot::read_manifest_header(&dir.join("snapshots"), snapshot)
            .with_context(|| format!("the snapshot {snapshot} the trace names"))?;
        let after_step = events.iter().filter_map(|e| e["step"].as_u64()).max().unwrap_or(0) as u32;
        let charged_ms = events.last().and_then(|e| e["t_ms"].as_f64()).unwrap_or(0.0) as u64;
        let uncharged_ms = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .map_or(0, |d| d.as_millis() as u64);
        let head = lines.last().map_or(GENESIS.to_string(), |l| line_hash(l.as_bytes()));
        let resume = ResumeRecord {
            at: crate::format::now_rfc3339(),
            why: why.to_string(),
            after_step,
            kept_events: lines.len() as u64,
            dropped_events: (total - lines.len()) as u64,
            charged_ms,
            uncharged_ms,
            restarted: None,
        };
        let recording = Recording {
            dir: dir.to_path_buf(),
            lines,
            events,
            head,
        };
        Ok(Self {
            record,
            recording,
            snapshot,
            resume,
        })
    }

    /// Cuts `events.jsonl` to the kept lines (atomically: a host that dies
    /// now leaves it whole, before or after) and lists this resume in
    /// `episode.json`; the record to go on with.
    pub fn commit(&self, dir: &Path) -> Result<EpisodeRecord> {
        let path = dir.join("events.jsonl");
        let tmp = dir.join("events.jsonl.resume");
        let mut text = self.recording.lines.join("\n");
        text.push('\n');
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, &path).with_context(|| format!("replacing {}", path.display()))?;
        let _ = std::fs::remove_file(dir.join("score.json"));
        let mut record = self.record.clone();
        record.end = None;
        record.ended_at = None;
        record.host.process = crate::process::HostProcess::current();
        record.resumes.push(self.resume.clone());
        record.write(dir)?;
        Ok(record)
    }

    /// The `host resume` event's arguments.
    pub fn mark(&self) -> Value {
        let r = &self.resume;
        json!({
            "why": r.why,
            "after_step": r.after_step,
            "dropped_events": r.dropped_events,
            "charged_ms": r.charged_ms,
            "uncharged_ms": r.uncharged_ms,
            "note": "the agent was replayed from the records up to here (no script or model run again) and went on live; the dead host's time is not charged",
        })
    }
}

/// The snapshot an event says the workspace was in after it, if any.
pub(super) fn snapshot_of(event: &Value) -> Option<u64> {
    if event["interface"] == "host" && event["function"] == "snapshot" {
        return event["args"]["id"].as_u64();
    }
    event["snapshot"].as_u64()
}

/// The lines of a trace that chain from its first, and each parsed. A
/// last line cut short (the host died writing it) is dropped; a break
/// anywhere before it means the records were changed, and is an error.
pub(super) fn chained_lines(text: &str) -> Result<(Vec<String>, Vec<Value>)> {
    let mut all: Vec<&str> = text.split('\n').collect();
    // Text after the last newline is a line the host never finished.
    all.pop();
    let mut head = GENESIS.to_string();
    let (mut lines, mut events) = (Vec::new(), Vec::new());
    for (number, line) in all.iter().enumerate() {
        let parsed = serde_json::from_str::<Value>(line)
            .ok()
            .filter(|e| e["prev"].as_str() == Some(head.as_str()));
        let Some(event) = parsed else {
            if number + 1 == all.len() {
                break;
            }
            anyhow::bail!(
                "line {} does not chain to the one before it: the records were changed",
                number + 1
            );
        };
        head = line_hash(line.as_bytes());
        lines.push(line.to_string());
        events.push(event);
    }
    Ok((lines, events))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(events: &[Value]) -> String {
        let mut head = GENESIS.to_string();
        let mut out = String::new();
        for event in events {
            let mut event = event.clone();
            event["prev"] = json!(head);
            let line = event.to_string();
            head = line_hash(line.as_bytes());
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_a_break_before_it_is_refused() {
        let events: Vec<Value> = (1..=3).map(|i| json!({"seq": i, "interface": "workspace"})).collect();
        let text = chain(&events);
        assert_eq!(chained_lines(&text).unwrap().0.len(), 3);
        // Killed while writing a fourth line: half of it, no newline.
        let torn = format!("{text}{{\"prev\":\"abc\",\"se");
        assert_eq!(chained_lines(&torn).unwrap().0.len(), 3);
        // A whole last line that does not chain was cut short and completed by nothing else.
        let bad_last = format!("{text}{{\"prev\":\"abc\"}}\n");
        assert_eq!(chained_lines(&bad_last).unwrap().0.len(), 3);
        // A changed line with lines after it is not a crash: refused where
        // the chain breaks.
        let lines: Vec<&str> = text.lines().collect();
        let changed = format!(
            "{}\n{}\n{}\n",
            lines[0].replace("workspace", "exec"),
            lines[1],
            lines[2]
        );
        let error = chained_lines(&changed).unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
    }

    #[test]
    fn the_snapshot_after_an_event_is_its_own_or_the_hosts_record() {
        assert_eq!(snapshot_of(&json!({"interface": "exec", "snapshot": 4})), Some(4));
        let host = json!({"interface": "host", "function": "snapshot", "args": {"id": 2}});
        assert_eq!(snapshot_of(&host), Some(2));
        assert_eq!(snapshot_of(&json!({"interface": "workspace"})), None);
    }
}
