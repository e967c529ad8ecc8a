//! Streamed answers (server-sent events), assembled into the shape of the
//! same answer sent whole, so one decoder reads both. Tool-call arguments
//! arrive in pieces (OpenAI `delta.tool_calls[].function.arguments`,
//! Anthropic `input_json_delta`); they are joined here and only then read.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The `data:` payloads of an event stream, or `None` when `body` is not one.
pub fn events(body: &[u8]) -> Option<Vec<String>> {
    let text = std::str::from_utf8(body).ok()?;
    let start = text.trim_start();
    if !(start.starts_with("data:") || start.starts_with("event:") || start.starts_with(':')) {
        return None;
    }
    let mut events = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in text.lines().chain([""]) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !data.is_empty() {
                events.push(data.join("\n"));
                data.clear();
            }
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    Some(events.into_iter().filter(|e| e.trim() != "[DONE]").collect())
}

fn parse(event: &str) -> Result<Value, String> {
    let value: Value = serde_json::from_str(event).map_err(|e| {
        let shown: String = event.chars().take(120).collect();
        format!("a streamed event is not JSON ({e}): {shown}")
    })?;
    if value["type"] == "error" || !value["error"].is_null() {
        let said = value["error"]["message"].as_str().unwrap_or("no message");
        return Err(format!("the stream ended with an error: {said}"));
    }
    Ok(value)
}

#[derive(Default)]
struct OpenaiCall {
    id: String,
    name: String,
    arguments: String,
}

/// An OpenAI chat completion from its chunks.
pub fn openai(events: &[String]) -> Result<Value, String> {
    let (mut model, mut usage, mut finish) = (Value::Null, Value::Null, Value::Null);
    let (mut content, mut refusal, mut choices) = (String::new(), None::<String>, 0);
    let mut calls: BTreeMap<u64, OpenaiCall> = BTreeMap::new();
    for event in events {
        let chunk = parse(event)?;
        if chunk["model"].is_string() {
            model = chunk["model"].clone();
        }
        if chunk["usage"].is_object() {
            usage = chunk["usage"].clone();
        }
        let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) else {
            continue;
        };
        choices += 1;
        let delta = &choice["delta"];
        content.push_str(delta["content"].as_str().unwrap_or_default());
        if let Some(text) = delta["refusal"].as_str() {
            refusal.get_or_insert_default().push_str(text);
        }
        for (position, piece) in delta["tool_calls"].as_array().into_iter().flatten().enumerate() {
            let call = calls
                .entry(piece["index"].as_u64().unwrap_or(position as u64))
                .or_default();
            if let Some(id) = piece["id"].as_str() {
                call.id = id.to_string();
            }
            call.name
                .push_str(piece["function"]["name"].as_str().unwrap_or_default());
            call.arguments
                .push_str(piece["function"]["arguments"].as_str().unwrap_or_default());
        }
        if choice["finish_reason"].is_string() {
            finish = choice["finish_reason"].clone();
        }
    }
    if choices == 0 {
        return Err("the stream held no choices".into());
    }
    let calls: Vec<Value> = calls
        .into_values()
        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
        .collect();
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = json!(calls);
    }
    if let Some(refusal) = refusal {
        message["refusal"] = json!(refusal);
    }
    Ok(json!({"model": model, "choices": [{"message": message, "finish_reason": finish}], "usage": usage}))
}

/// An Anthropic message from its events.
pub fn anthropic(events: &[String]) -> Result<Value, String> {
    let mut message = Value::Null;
    let mut blocks: BTreeMap<u64, (Value, String)> = BTreeMap::new();
    let (mut stop, mut output_tokens) = (Value::Null, Value::Null);
    for event in events {
        let event = parse(event)?;
        let index = event["index"].as_u64().unwrap_or(0);
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => message = event["message"].clone(),
            "content_block_start" => {
                blocks.insert(index, (event["content_block"].clone(), String::new()));
            }
            "content_block_delta" => {
                let Some((block, json)) = blocks.get_mut(&index) else {
                    return Err(format!("a delta for content block {index}, which never started"));
                };
                let delta = &event["delta"];
                match delta["type"].as_str().unwrap_or_default() {
                    "text_delta" => {
                        let text = format!(
                            "{}{}",
                            block["text"].as_str().unwrap_or_default(),
                            delta["text"].as_str().unwrap_or_default()
                        );
                        block["text"] = json!(text);
                    }
                    "input_json_delta" => json.push_str(delta["partial_json"].as_str().unwrap_or_default()),
                    _ => {}
                }
            }
            "message_delta" => {
                stop = event["delta"]["stop_reason"].clone();
                output_tokens = event["usage"]["output_tokens"].clone();
            }
            _ => {}
        }
    }
    if message.is_null() {
        return Err("the stream never started a message".into());
    }
    let content: Vec<Value> = blocks
        .into_values()
        .map(|(mut block, json)| {
            if block["type"] == "tool_use" && !json.trim().is_empty() {
                match serde_json::from_str::<Value>(&json) {
                    Ok(input) => block["input"] = input,
                    // Kept as written, so the check can quote it.
                    Err(_) => block["input"] = json!(json),
                }
            }
            block
        })
        .collect();
    message["content"] = json!(content);
    if !stop.is_null() {
        message["stop_reason"] = stop;
    }
    if !output_tokens.is_null() {
        message["usage"]["output_tokens"] = output_tokens;
    }
    Ok(message)
}
