//! Tool calling on a server that has no tool calling of its own but can
//! constrain decoding to a JSON Schema (llama.cpp's grammars, through
//! llama-cpp-python's `response_format: {"type": "json_object", "schema"}`).
//! The tools are described in a system message; the answer's schema
//! allows exactly one envelope per tool, `{"tool": NAME, "arguments":
//! ARGS}` with ARGS of that tool's schema (and `{"answer": TEXT}` when the
//! model may also answer without a tool). Even a tiny model then writes
//! only well-formed calls; [`calls`] reads the envelope back into a call.
//! Earlier calls and their results are replayed to the model as text.

use serde_json::{Value, json};

use super::{Completion, LlmRequest, Message, Role, ToolCall, ToolChoice};

/// A schema's JSON text, parsed (the request check has refused bad ones).
pub fn parsed(schema: &str) -> Value {
    serde_json::from_str(schema).unwrap_or_else(|_| json!({}))
}

/// A request the server can take, and the schema its answer must follow.
pub struct Emulated {
    /// The request without tools, their use written out as text.
    pub request: LlmRequest,
    /// The answer's JSON Schema, if it is constrained.
    pub schema: Option<Value>,
}

/// Rewrites `request` for a server with grammars but no tools.
pub fn rewrite(request: &LlmRequest) -> Emulated {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    let leading_system = request.messages.iter().take_while(|m| m.role == Role::System).count();
    messages.extend(request.messages[..leading_system].iter().cloned());
    if request.calls_tools() {
        messages.push(Message::text(Role::System, instructions(request)));
    }
    for m in &request.messages[leading_system..] {
        messages.push(as_text(m, &request.messages));
    }
    let schema = if request.calls_tools() {
        Some(envelopes(request))
    } else {
        request.response_schema.as_deref().map(parsed)
    };
    let schema = schema.map(without_patterns);
    Emulated {
        request: LlmRequest {
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            response_schema: None,
            ..request.clone()
        },
        schema,
    }
}

/// `schema` without its `pattern`s: llama-cpp-python's server dies on
/// some (the schema of MLAgentBench's tools with a path pattern on each
/// file argument killed it), which would take the local model away from
/// every episode of the host. Without them `maxLength` bounds the strings
/// again; the host's check of the answer still applies the whole schema,
/// patterns included.
fn without_patterns(mut schema: Value) -> Value {
    match &mut schema {
        Value::Object(map) => {
            if map.get("pattern").is_some_and(Value::is_string) {
                map.remove("pattern");
            }
            for value in map.values_mut() {
                *value = without_patterns(value.take());
            }
        }
        Value::Array(items) => {
            for value in items.iter_mut() {
                *value = without_patterns(value.take());
            }
        }
        _ => {}
    }
    schema
}

/// The tools that may be called, as `tool_choice` narrows them.
fn offered(request: &LlmRequest) -> impl Iterator<Item = &super::Tool> {
    request.tools.iter().filter(|t| match &request.tool_choice {
        ToolChoice::Named(name) => &t.name == name,
        _ => true,
    })
}

fn instructions(request: &LlmRequest) -> String {
    let mut text = String::from("You act by calling tools. Answer with one JSON object ");
    text.push_str(r#"{"tool": <tool name>, "arguments": {...}}"#);
    if request.tool_choice == ToolChoice::Auto {
        text.push_str(r#", or {"answer": <your answer>} to answer without a tool"#);
    }
    text.push_str(".\nTools:\n");
    for tool in offered(request) {
        let schema = parsed(&tool.parameters).to_string();
        text.push_str(&format!(
            "- {}: {}\n  arguments: {schema}\n",
            tool.name,
            tool.description.trim()
        ));
    }
    text
}

/// Earlier calls and results as the model would have written and read them.
fn as_text(m: &Message, all: &[Message]) -> Message {
    match m.role {
        Role::Assistant if !m.tool_calls.is_empty() => {
            let mut text = m.content.clone();
            for call in &m.tool_calls {
                let envelope = json!({"tool": call.name, "arguments": parsed(&call.arguments)});
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&envelope.to_string());
            }
            Message::text(Role::Assistant, text)
        }
        Role::Tool => {
            let id = m.tool_call_id.as_deref().unwrap_or_default();
            let name = all
                .iter()
                .flat_map(|m| &m.tool_calls)
                .find(|c| c.id == id)
                .map_or("the tool", |c| c.name.as_str());
            Message::text(Role::User, format!("Result of {name}:\n{}", m.content))
        }
        _ => Message::text(m.role, m.content.clone()),
    }
}

fn envelopes(request: &LlmRequest) -> Value {
    let mut choices: Vec<Value> = offered(request)
        .map(|t| {
            json!({
                "type": "object",
                "properties": {"tool": {"const": t.name}, "arguments": parsed(&t.parameters)},
                "required": ["tool", "arguments"],
            })
        })
        .collect();
    if request.tool_choice == ToolChoice::Auto {
        let answer = request
            .response_schema
            .as_deref()
            .map_or(json!({"type": "string"}), parsed);
        choices.push(json!({"type": "object", "properties": {"answer": answer}, "required": ["answer"]}));
    }
    match choices.len() {
        1 => choices.remove(0),
        _ => json!({"oneOf": choices}),
    }
}

/// Reads the envelope the model wrote back into a call or an answer. Text
/// that is not an envelope is left as it is, for the check to judge.
pub fn calls(request: &LlmRequest, mut completion: Completion) -> Completion {
    let Ok(Value::Object(envelope)) = serde_json::from_str::<Value>(completion.text.trim()) else {
        return completion;
    };
    if let (Some(Value::String(name)), Some(arguments)) = (envelope.get("tool"), envelope.get("arguments")) {
        let earlier = request.messages.iter().map(|m| m.tool_calls.len()).sum::<usize>();
        completion.tool_calls.push(ToolCall {
            id: format!("call_{}", earlier + 1),
            name: name.clone(),
            arguments: arguments.to_string(),
        });
        completion.text.clear();
        completion.finish_reason = "tool-calls".into();
    } else if let Some(answer) = envelope.get("answer")
        && envelope.len() == 1
    {
        completion.text = match answer {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
    }
    completion
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// Patterns go (a property named `pattern` stays); bounds stay.
    #[test]
    fn the_grammar_schema_has_no_patterns() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 200, "pattern": "^[a-z]{0,199}$"},
                "pattern": {"type": "string"},
                "both": {"oneOf": [{"type": "string", "pattern": "x+"}, {"type": "integer"}]}
            }
        });
        let cleared = super::without_patterns(schema);
        assert_eq!(
            cleared["properties"]["path"],
            json!({"type": "string", "maxLength": 200})
        );
        assert_eq!(cleared["properties"]["pattern"], json!({"type": "string"}));
        assert_eq!(cleared["properties"]["both"]["oneOf"][0], json!({"type": "string"}));
    }
}
