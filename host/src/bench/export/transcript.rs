//! An episode as a transcript: the task the agent was told, each call it
//! made to the host (a tool call with its arguments and result), its
//! answer, and what its model calls used, read from its records.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use crate::episode::EpisodeRecord;
use crate::record::recording::Recording;

/// One call of the agent's to the host.
#[derive(Debug, Clone)]
pub struct Call {
    /// Its number in the episode (`seq` of events.jsonl).
    pub id: String,
    /// `<interface>.<function>`, e.g. `exec.execute-script`.
    pub function: String,
    /// Its arguments: an object (other values are wrapped as `value`).
    pub arguments: serde_json::Map<String, Value>,
    /// What it returned (the `ok` side of a fallible call).
    pub result: Value,
    /// The error it returned, in words.
    pub error: Option<String>,
    /// When it was made, in milliseconds since the episode started.
    pub t_ms: f64,
    /// How long it took, in microseconds.
    pub duration_us: u64,
}

/// What one model's calls used.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

/// An episode, told as a conversation.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// The problem statement the agent was given.
    pub prompt: String,
    /// Its calls, in order.
    pub calls: Vec<Call>,
    /// Its answer, when it returned one.
    pub answer: Option<String>,
    /// The model calls' use, per model.
    pub usage: BTreeMap<String, Usage>,
    /// The episode's record.
    pub record: EpisodeRecord,
}

/// The transcript of the episode in `dir`.
pub fn read(dir: &Path) -> Result<Transcript> {
    let record = EpisodeRecord::read(dir)?;
    let recording = Recording::open(dir)?;
    let mut transcript = Transcript {
        prompt: String::new(),
        calls: Vec::new(),
        answer: record.end.as_ref().and_then(|e| e.answer.clone()),
        usage: BTreeMap::new(),
        record,
    };
    for event in &recording.events {
        let (interface, function) = (text(&event["interface"]), text(&event["function"]));
        match interface {
            "host" if function == "run" => transcript.prompt = text(&event["args"]["task"]["research_problem"]).into(),
            // The host's own records and the agent's clocks and randomness are no calls.
            "host" | "wasi" => {}
            _ if interface.starts_with("wasi") => {}
            _ => {
                if interface == "llm" {
                    count_usage(&mut transcript.usage, &event["result"]);
                }
                transcript.calls.push(call(event, interface, function));
            }
        }
    }
    Ok(transcript)
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

fn call(event: &Value, interface: &str, function: &str) -> Call {
    let arguments = match &event["args"] {
        Value::Object(map) => map.clone(),
        Value::Null => serde_json::Map::new(),
        other => serde_json::Map::from_iter([("value".to_string(), other.clone())]),
    };
    let result = &event["result"];
    let (result, error) = match (result.get("ok"), result.get("error")) {
        (Some(ok), _) => (ok.clone(), None),
        (None, Some(err)) => (Value::Null, Some(error_text(err))),
        (None, None) => (result.clone(), None),
    };
    Call {
        id: event["seq"].to_string(),
        function: format!("{interface}.{function}"),
        arguments,
        result,
        error,
        t_ms: event["t_ms"].as_f64().unwrap_or(0.0),
        duration_us: event["duration_us"].as_u64().unwrap_or(0),
    }
}

/// A typed error (`{"kind": …, "message": …}`) in words.
fn error_text(err: &Value) -> String {
    match (err["kind"].as_str(), &err["message"]) {
        (Some(kind), Value::String(message)) => format!("{kind}: {message}"),
        (Some(kind), Value::Null) => kind.to_string(),
        (Some(kind), other) => format!("{kind}: {other}"),
        (None, _) => err.to_string(),
    }
}

/// The kind of a call's error (`not-found`, `permission-denied`, …).
pub fn error_kind(call: &Call) -> Option<&str> {
    call.error.as_deref().map(|e| e.split(':').next().unwrap_or(e))
}

fn count_usage(usage: &mut BTreeMap<String, Usage>, result: &Value) {
    let Some(ok) = result.get("ok") else { return };
    let model = ok["model"].as_str().filter(|m| !m.is_empty()).unwrap_or("unknown");
    let entry = usage.entry(model.to_string()).or_default();
    entry.input_tokens += ok["input_tokens"].as_u64().unwrap_or(0);
    entry.output_tokens += ok["output_tokens"].as_u64().unwrap_or(0);
}

/// A call's result as text for a tool message: a string as it is, any
/// other value as JSON.
pub fn result_text(call: &Call) -> String {
    match (&call.error, &call.result) {
        (Some(error), _) => error.clone(),
        (None, Value::String(s)) => s.clone(),
        (None, Value::Null) => String::new(),
        (None, other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_keep_arguments_results_and_errors() {
        let event = serde_json::json!({"seq": 3, "interface": "workspace", "function": "read-file",
            "args": {"path": "train.py"}, "result": {"error": {"kind": "not-found", "message": "train.py"}}});
        let c = call(&event, "workspace", "read-file");
        assert_eq!((c.id.as_str(), c.function.as_str()), ("3", "workspace.read-file"));
        assert_eq!(c.arguments["path"], "train.py");
        assert_eq!(c.error.as_deref(), Some("not-found: train.py"));
        assert_eq!(error_kind(&c), Some("not-found"));
        let ok = serde_json::json!({"seq": 4, "interface": "exec", "function": "x", "args": "a", "result": {"ok": {"exit": 0}}});
        let c = call(&ok, "exec", "x");
        assert_eq!(
            (c.arguments["value"].as_str(), result_text(&c).as_str()),
            (Some("a"), "{\"exit\":0}")
        );
        let mut usage = BTreeMap::new();
        count_usage(
            &mut usage,
            &serde_json::json!({"ok": {"model": "m", "input_tokens": 5, "output_tokens": 2}}),
        );
        count_usage(
            &mut usage,
            &serde_json::json!({"ok": {"model": "m", "input_tokens": 1, "output_tokens": 1}}),
        );
        assert_eq!((usage["m"].input_tokens, usage["m"].output_tokens), (6, 3));
    }
}
