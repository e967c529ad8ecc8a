//! Anthropic messages (`POST /v1/messages`), with `tools`, `tool_use` and
//! `tool_result` blocks. A response schema has no native form here: it
//! becomes one more tool, [`RESPOND`], that the model must call, whose
//! input is the answer.

use serde_json::{Value, json};

use super::openai::short;
use super::{Completion, Decoded, LlmRequest, Role, ToolCall, ToolChoice, tokens};

/// The tool that carries an answer of a response schema.
const RESPOND: &str = "mlrb_respond";

/// The request body.
pub fn encode(model: &str, request: &LlmRequest, max_tokens: u32) -> Value {
    // System text goes apart; the rest must alternate, starting with the
    // user, so consecutive turns of one role are joined (tool results are
    // the user's turn).
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    let mut turns: Vec<(Role, Vec<Value>)> = Vec::new();
    for m in request.messages.iter().filter(|m| m.role != Role::System) {
        let role = if m.role == Role::Tool { Role::User } else { m.role };
        let blocks = blocks(m);
        match turns.last_mut() {
            Some((last, content)) if *last == role => content.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    if turns.first().is_none_or(|(role, _)| *role != Role::User) {
        turns.insert(0, (Role::User, vec![text("(continue)")]));
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, blocks)| json!({"role": role, "content": content(blocks)}))
        .collect();
    let mut body = json!({"model": model, "messages": messages, "max_tokens": max_tokens});
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    if let Some(t) = request.temperature {
        body["temperature"] = json!(t);
    }
    if !request.stop.is_empty() {
        body["stop_sequences"] = json!(request.stop);
    }
    tools(request, &mut body);
    body
}

fn tools(request: &LlmRequest, body: &mut Value) {
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": super::grammar::parsed(&t.parameters)}))
        .collect();
    let mut choice = match &request.tool_choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Named(name) => json!({"type": "tool", "name": name}),
    };
    if let Some(schema) = &request.response_schema {
        tools.push(json!({
            "name": RESPOND,
            "description": "Give your answer: its input is the answer, of the schema asked for.",
            "input_schema": super::grammar::parsed(schema),
        }));
        if request.tools.is_empty() || request.tool_choice == ToolChoice::None {
            choice = json!({"type": "tool", "name": RESPOND});
        }
    }
    if !tools.is_empty() {
        body["tools"] = json!(tools);
        body["tool_choice"] = choice;
    }
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn blocks(m: &super::Message) -> Vec<Value> {
    if m.role == Role::Tool {
        let id = m.tool_call_id.clone().unwrap_or_default();
        return vec![json!({"type": "tool_result", "tool_use_id": id, "content": m.content})];
    }
    let mut blocks = Vec::new();
    if !m.content.is_empty() || m.tool_calls.is_empty() {
        blocks.push(text(&m.content));
    }
    for call in &m.tool_calls {
        let input = serde_json::from_str::<Value>(&call.arguments).unwrap_or_else(|_| json!({}));
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
}

/// Text-only content is sent as one string, as plain clients do.
fn content(blocks: Vec<Value>) -> Value {
    if blocks.iter().all(|b| b["type"] == "text") {
        let texts: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
        json!(texts.join("\n\n"))
    } else {
        json!(blocks)
    }
}

/// Reads an answer (a streamed one already assembled into this shape).
pub fn decode(value: &Value) -> Result<Decoded, String> {
    let stop = value["stop_reason"].as_str().unwrap_or("end_turn");
    let content = value["content"]
        .as_array()
        .ok_or_else(|| "the answer has no content list".to_string())?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => {
                let name = block["name"]
                    .as_str()
                    .ok_or_else(|| format!("a tool_use block without a name: {}", short(block)))?;
                let input = &block["input"];
                if name == RESPOND {
                    text = input.to_string();
                    continue;
                }
                tool_calls.push(ToolCall {
                    id: block["id"].as_str().unwrap_or_default().to_string(),
                    name: name.to_string(),
                    arguments: match input {
                        // An input sent as text (a streamed one that was not
                        // JSON, or a proxy's stringified input) is kept as
                        // written, so the check quotes what the model wrote.
                        Value::String(raw) => raw.clone(),
                        input => input.to_string(),
                    },
                });
            }
            _ => {}
        }
    }
    if stop == "refusal" {
        return Ok(Decoded::Refused(if text.is_empty() {
            "the model declined to answer".into()
        } else {
            text
        }));
    }
    Ok(Decoded::Completion(Completion {
        text,
        model: value["model"].as_str().unwrap_or_default().to_string(),
        input_tokens: tokens(&value["usage"]["input_tokens"]),
        output_tokens: tokens(&value["usage"]["output_tokens"]),
        finish_reason: match stop {
            "max_tokens" => "length".into(),
            "stop_sequence" => "stop-sequence".into(),
            "tool_use" if !tool_calls.is_empty() => "tool-calls".into(),
            _ => "stop".into(),
        },
        tool_calls,
    }))
}
