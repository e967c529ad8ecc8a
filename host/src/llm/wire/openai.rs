//! OpenAI-compatible chat completions (`POST /chat/completions`), with
//! `tools`, `tool_choice` and `response_format`.

use serde_json::{Value, json};

use super::{Completion, Decoded, LlmRequest, Role, ToolCall, ToolChoice, tokens};

/// The request body.
pub fn encode(model: &str, request: &LlmRequest, max_tokens: u32) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message).collect();
    let mut body = json!({"model": model, "messages": messages, "max_tokens": max_tokens});
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if !request.stop.is_empty() {
        body["stop"] = json!(request.stop);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": super::grammar::parsed(&t.parameters),
                }})
            })
            .collect();
        body["tools"] = json!(tools);
        body["tool_choice"] = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Required => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Named(name) => json!({"type": "function", "function": {"name": name}}),
        };
    }
    if let Some(schema) = &request.response_schema {
        body["response_format"] = json!({"type": "json_schema", "json_schema": {
            "name": "answer",
            "schema": super::grammar::parsed(schema),
        }});
    }
    body
}

fn message(m: &super::Message) -> Value {
    let mut value = json!({"role": m.role, "content": m.content});
    if m.role == Role::Assistant && !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        value["tool_calls"] = json!(calls);
        if m.content.is_empty() {
            value["content"] = Value::Null;
        }
    }
    if let Some(id) = &m.tool_call_id {
        value["tool_call_id"] = json!(id);
    }
    value
}

/// Reads an answer (a streamed one already assembled into this shape).
pub fn decode(value: &Value) -> Result<Decoded, String> {
    let choice = value["choices"]
        .get(0)
        .ok_or_else(|| "the answer has no choices".to_string())?;
    let finish = choice["finish_reason"].as_str().unwrap_or("stop");
    if finish == "content_filter" {
        return Ok(Decoded::Refused(
            "the provider's content filter stopped the answer".into(),
        ));
    }
    let message = &choice["message"];
    if let Some(refusal) = message["refusal"].as_str() {
        return Ok(Decoded::Refused(refusal.to_string()));
    }
    let tool_calls = match &message["tool_calls"] {
        Value::Null => Vec::new(),
        Value::Array(calls) => calls.iter().map(tool_call).collect::<Result<_, _>>()?,
        other => return Err(format!("the answer's tool_calls is not a list: {}", short(other))),
    };
    let text = match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Null if !tool_calls.is_empty() => String::new(),
        _ => return Err("the answer's message has no text content".to_string()),
    };
    Ok(Decoded::Completion(Completion {
        text,
        model: value["model"].as_str().unwrap_or_default().to_string(),
        input_tokens: tokens(&value["usage"]["prompt_tokens"]),
        output_tokens: tokens(&value["usage"]["completion_tokens"]),
        finish_reason: match finish {
            "length" => "length".into(),
            "tool_calls" | "function_call" => "tool-calls".into(),
            _ if !tool_calls.is_empty() => "tool-calls".into(),
            _ => "stop".into(),
        },
        tool_calls,
    }))
}

fn tool_call(call: &Value) -> Result<ToolCall, String> {
    let function = &call["function"];
    let name = function["name"]
        .as_str()
        .ok_or_else(|| format!("a tool call without a function name: {}", short(call)))?;
    // Arguments are JSON text; a provider that sends an object is read as its text.
    let arguments = match &function["arguments"] {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    Ok(ToolCall {
        id: call["id"].as_str().unwrap_or_default().to_string(),
        name: name.to_string(),
        arguments,
    })
}

/// A JSON value, shortened for a message.
pub(super) fn short(value: &Value) -> String {
    value.to_string().chars().take(200).collect()
}
