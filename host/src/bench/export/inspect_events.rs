//! An episode's events as Inspect's transcript events (what the Transcript
//! tab of `inspect view` shows): each host call a `ToolEvent`, each LLM call
//! a `ModelEvent` with its request and answer, each note an `InfoEvent`,
//! how the episode ended an `InfoEvent`, and each score a `ScoreEvent`.

use serde_json::{Value, json};

use super::transcript::{Call, Transcript, error_kind, result_text};

/// The events of an episode, in the order they happened, then its scores.
pub fn events(t: &Transcript, scores: &Value, target: &str) -> Vec<Value> {
    let started = chrono::DateTime::parse_from_rfc3339(&t.record.started_at)
        .map(|d| d.with_timezone(&chrono::Utc))
        .unwrap_or_default();
    let at = |ms: f64| (started + chrono::Duration::microseconds((ms * 1000.0) as i64)).to_rfc3339();
    let mut out = Vec::new();
    for call in &t.calls {
        let base = json!({"timestamp": at(call.t_ms), "working_start": call.t_ms / 1000.0});
        let end = call.t_ms + call.duration_us as f64 / 1000.0;
        let event = match call.function.as_str() {
            "episode.note" => json!({"event": "info", "source": "note",
                                     "data": call.arguments.get("text").cloned().unwrap_or(Value::Null)}),
            "llm.complete" => model_event(call, &at(end)),
            _ => tool_event(call, &at(end)),
        };
        out.push(merge(base, event));
    }
    let last = t.calls.last().map_or(0.0, |c| c.t_ms + c.duration_us as f64 / 1000.0);
    let base = json!({"timestamp": at(last), "working_start": last / 1000.0});
    if let Some(end) = &t.record.end {
        let detail = match end.detail.is_empty() {
            true => String::new(),
            false => format!(": {}", end.detail),
        };
        let ending =
            json!({"event": "info", "source": "mlrb", "data": format!("ended: {}{detail}", end.reason.name())});
        out.push(merge(base.clone(), ending));
    }
    if let Value::Object(scores) = scores {
        for (scorer, score) in scores {
            let event =
                json!({"event": "score", "scorer": scorer, "score": score, "target": target, "intermediate": false});
            out.push(merge(base.clone(), event));
        }
    }
    out
}

fn merge(mut base: Value, event: Value) -> Value {
    if let (Value::Object(b), Value::Object(e)) = (&mut base, event) {
        b.extend(e);
    }
    base
}

/// A host call as a tool call, with its result or error.
fn tool_event(call: &Call, completed: &str) -> Value {
    let mut event = json!({"event": "tool", "type": "function", "id": call.id, "function": call.function,
                           "arguments": call.arguments, "result": result_text(call), "completed": completed,
                           "working_time": call.duration_us as f64 / 1e6});
    if let Some(error) = &call.error {
        event["error"] = json!({"type": error_type(call), "message": error});
    }
    event
}

/// An `llm.complete` as a model call: the request's messages and the
/// completion (or the error the agent got).
fn model_event(call: &Call, completed: &str) -> Value {
    let request = &call.arguments;
    let model = request.get("model").and_then(Value::as_str).unwrap_or("unknown");
    let input: Vec<Value> = request
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(chat_message)
        .collect();
    let tools: Vec<Value> = request
        .get("tools")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|t| {
            json!({"name": t["name"], "description": t["description"].as_str().unwrap_or(""),
                        "parameters": {"type": "object", "properties": {}}})
        })
        .collect();
    let mut config = serde_json::Map::new();
    for (from, to) in [
        ("max_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("stop", "stop_seqs"),
    ] {
        if let Some(v) = request.get(from).filter(|v| !v.is_null()) {
            config.insert(to.into(), v.clone());
        }
    }
    let c = &call.result;
    let (input_tokens, output_tokens) = (
        c["input_tokens"].as_u64().unwrap_or(0),
        c["output_tokens"].as_u64().unwrap_or(0),
    );
    let answer = chat_message(&json!({"role": "assistant", "content": c["text"], "tool_calls": c["tool_calls"]}));
    let output = match call.error {
        Some(_) => json!({"model": model, "choices": []}),
        None => json!({"model": c["model"].as_str().unwrap_or(model),
                       "choices": [{"message": answer, "stop_reason": stop_reason(c["finish_reason"].as_str())}],
                       "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                                 "total_tokens": input_tokens + output_tokens}}),
    };
    json!({"event": "model", "model": model, "input": input, "tools": tools, "tool_choice": "auto",
           "config": config, "output": output, "error": call.error, "completed": completed,
           "working_time": call.duration_us as f64 / 1e6})
}

/// An mlrb wire message as Inspect's `ChatMessage`.
fn chat_message(m: &Value) -> Value {
    let role = m["role"].as_str().unwrap_or("user");
    let content = m["content"].as_str().unwrap_or("");
    match role {
        "assistant" => {
            let calls: Vec<Value> = m["tool_calls"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .map(|c| {
                    let text = c["arguments"].as_str().unwrap_or("{}");
                    let arguments = match serde_json::from_str::<Value>(text) {
                        Ok(Value::Object(map)) => Value::Object(map),
                        _ => json!({"value": text}),
                    };
                    json!({"id": c["id"], "function": c["name"], "arguments": arguments, "type": "function"})
                })
                .collect();
            json!({"role": "assistant", "content": content, "tool_calls": (!calls.is_empty()).then_some(calls)})
        }
        "tool" => json!({"role": "tool", "content": content, "tool_call_id": m["tool_call_id"]}),
        "system" => json!({"role": "system", "content": content}),
        _ => json!({"role": "user", "content": content}),
    }
}

/// An mlrb finish reason in Inspect's words.
fn stop_reason(finish: Option<&str>) -> &'static str {
    match finish {
        Some("stop" | "stop-sequence") => "stop",
        Some("length") => "max_tokens",
        Some("tool-calls") => "tool_calls",
        _ => "unknown",
    }
}

/// Inspect's tool-error type for a host error kind.
pub(super) fn error_type(call: &Call) -> &'static str {
    match error_kind(call) {
        Some("not-found") => "file_not_found",
        Some("permission-denied") => "permission",
        Some("timeout") => "timeout",
        Some("too-large" | "budget-exhausted" | "limit") => "limit",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_llm_call_becomes_a_model_event_with_its_messages_and_answer() {
        let call = Call {
            id: "7".into(),
            function: "llm.complete".into(),
            arguments: json!({"model": "m", "messages": [{"role": "system", "content": "s"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "name": "read", "arguments": "{\"path\":\"x\"}"}]},
                {"role": "tool", "content": "r", "tool_call_id": "a"}], "max_tokens": 9, "stop": []})
            .as_object()
            .unwrap()
            .clone(),
            result: json!({"text": "done", "model": "m-1", "input_tokens": 5, "output_tokens": 2, "finish_reason": "length"}),
            error: None,
            t_ms: 10.0,
            duration_us: 2000,
        };
        let e = model_event(&call, "t");
        assert_eq!(e["input"][1]["tool_calls"][0]["arguments"]["path"], "x");
        assert_eq!(e["input"][2]["tool_call_id"], "a");
        let choice = &e["output"]["choices"][0];
        assert_eq!(
            (choice["message"]["content"].as_str(), choice["stop_reason"].as_str()),
            (Some("done"), Some("max_tokens"))
        );
        assert_eq!(e["output"]["usage"]["total_tokens"], 7);
        assert_eq!(e["config"]["max_tokens"], 9);
    }
}
