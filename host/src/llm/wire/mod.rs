//! The wire formats: OpenAI-compatible chat completions and Anthropic
//! messages, each with tool calling and either answered whole or streamed
//! (server-sent events). Requests are built from, and answers read into,
//! one neutral shape; [`grammar`] emulates tools on servers that only
//! offer grammar-constrained JSON (llama.cpp).

mod anthropic;
pub mod grammar;
mod openai;
mod stream;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::config::{Api, ProviderConfig, ToolCalls};

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The one asking.
    User,
    /// The model.
    Assistant,
    /// The result of a tool call.
    Tool,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        })
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: String,
    /// The calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message of plain text.
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Its name, unique within a request.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments, as text.
    pub parameters: String,
}

/// Whether the model must call a tool.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "name")]
pub enum ToolChoice {
    /// As it sees fit.
    #[default]
    Auto,
    /// At least one.
    Required,
    /// This one.
    Named(String),
    /// None at all.
    None,
}

/// A call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id of the call.
    pub id: String,
    /// The tool called.
    pub name: String,
    /// Its arguments, JSON text as the model wrote it.
    pub arguments: String,
}

/// What an agent asks for, with the alias not yet resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    /// The model alias from `mlrb.toml`.
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The most output tokens wanted; capped by the alias's `max_tokens`.
    pub max_tokens: Option<u32>,
    /// Sampling temperature; the provider's default when `None`.
    pub temperature: Option<f32>,
    /// Sequences that end the output.
    pub stop: Vec<String>,
    /// The tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// Whether it must (ignored without tools).
    #[serde(default, skip_serializing_if = "is_auto")]
    pub tool_choice: ToolChoice,
    /// The JSON Schema the answer's text must match, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<String>,
}

fn is_auto(choice: &ToolChoice) -> bool {
    *choice == ToolChoice::Auto
}

impl LlmRequest {
    /// A plain request: `messages` to the model `alias`, nothing else set.
    pub fn plain(alias: &str, messages: Vec<Message>) -> Self {
        Self {
            model: alias.into(),
            messages,
            max_tokens: None,
            temperature: None,
            stop: Vec::new(),
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            response_schema: None,
        }
    }

    /// Whether tools are offered and may be called.
    pub fn calls_tools(&self) -> bool {
        !self.tools.is_empty() && self.tool_choice != ToolChoice::None
    }

    /// The bytes of text the request carries, for the host's cap.
    pub fn text_bytes(&self) -> usize {
        let messages: usize = self
            .messages
            .iter()
            .map(|m| {
                m.content.len()
                    + m.tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.len())
                        .sum::<usize>()
            })
            .sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.len())
            .sum();
        messages
            + tools
            + self.stop.iter().map(String::len).sum::<usize>()
            + self.response_schema.as_ref().map_or(0, String::len)
    }
}

/// A provider's answer, in the neutral shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The generated text.
    pub text: String,
    /// The model name the provider reported.
    pub model: String,
    /// Tokens of the prompt, as the provider counted them.
    pub input_tokens: u32,
    /// Tokens generated.
    pub output_tokens: u32,
    /// "stop", "length", "stop-sequence" or "tool-calls".
    pub finish_reason: String,
    /// The tools the model called.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

/// What a provider's answer turned out to be.
#[derive(Debug)]
pub enum Decoded {
    /// The model answered.
    Completion(Completion),
    /// The model declined (a content filter or an explicit refusal).
    Refused(String),
}

/// The request path under the provider's base URL.
pub fn path(api: Api) -> &'static str {
    match api {
        Api::Openai => "/chat/completions",
        Api::Anthropic => "/v1/messages",
    }
}

/// The JSON body for `model` (the provider's name) with `max_tokens` already capped.
pub fn encode(provider: &ProviderConfig, model: &str, request: &LlmRequest, max_tokens: u32) -> Value {
    let (emulated, schema) = match provider.tool_calls {
        ToolCalls::Grammar => {
            let emulated = grammar::rewrite(request);
            (Some(emulated.request), emulated.schema)
        }
        ToolCalls::Native => (None, None),
    };
    let request = emulated.as_ref().unwrap_or(request);
    let mut body = match provider.api {
        Api::Openai => openai::encode(model, request, max_tokens),
        Api::Anthropic => anthropic::encode(model, request, max_tokens),
    };
    if let Some(schema) = schema {
        // llama-cpp-python turns this into a grammar: the model can only
        // write JSON of the schema.
        body["response_format"] = json!({"type": "json_object", "schema": schema});
    }
    if provider.stream {
        body["stream"] = json!(true);
        if provider.api == Api::Openai {
            body["stream_options"] = json!({"include_usage": true});
        }
    }
    body
}

/// Reads a 200 answer (whole or streamed) to `request`; `Err` says what was malformed.
pub fn decode(provider: &ProviderConfig, request: &LlmRequest, body: &[u8]) -> Result<Decoded, String> {
    let value = match stream::events(body) {
        Some(events) => match provider.api {
            Api::Openai => stream::openai(&events)?,
            Api::Anthropic => stream::anthropic(&events)?,
        },
        None => serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?,
    };
    let decoded = match provider.api {
        Api::Openai => openai::decode(&value)?,
        Api::Anthropic => anthropic::decode(&value)?,
    };
    let Decoded::Completion(mut completion) = decoded else {
        return Ok(decoded);
    };
    if provider.tool_calls == ToolCalls::Grammar && request.calls_tools() {
        completion = grammar::calls(request, completion);
    }
    // A call the provider gave no id still needs one for its result.
    let earlier = request.messages.iter().map(|m| m.tool_calls.len()).sum::<usize>();
    for (n, call) in completion.tool_calls.iter_mut().enumerate() {
        if call.id.is_empty() {
            call.id = format!("call_{}", earlier + n + 1);
        }
    }
    Ok(Decoded::Completion(completion))
}

/// A token count from a JSON number.
fn tokens(v: &Value) -> u32 {
    v.as_u64().map_or(0, |n| n.min(u32::MAX as u64) as u32)
}

/// The provider's own words from an error body, shortened, for messages.
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let message = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(String::from))
        .unwrap_or_else(|| text.trim().to_string());
    message.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(api: Api, tool_calls: ToolCalls) -> ProviderConfig {
        ProviderConfig {
            api,
            base_url: "http://127.0.0.1:1".into(),
            api_key_env: None,
            max_concurrency: 1,
            tool_calls,
            stream: false,
        }
    }

    fn request() -> LlmRequest {
        LlmRequest {
            max_tokens: Some(10),
            temperature: Some(0.5),
            stop: vec!["STOP".into()],
            ..LlmRequest::plain(
                "main",
                vec![
                    Message::text(Role::System, "be brief"),
                    Message::text(Role::User, "a"),
                    Message::text(Role::User, "b"),
                    Message::text(Role::Assistant, "c"),
                ],
            )
        }
    }

    fn with_tools() -> LlmRequest {
        let call = ToolCall {
            id: "call_9".into(),
            name: "run".into(),
            arguments: r#"{"script":"a.py"}"#.into(),
        };
        LlmRequest {
            tools: vec![Tool {
                name: "run".into(),
                description: "runs a script".into(),
                parameters: r#"{"type":"object","properties":{"script":{"type":"string"}},"required":["script"]}"#
                    .into(),
            }],
            tool_choice: ToolChoice::Required,
            ..LlmRequest::plain(
                "main",
                vec![
                    Message::text(Role::User, "go"),
                    Message {
                        tool_calls: vec![call],
                        ..Message::text(Role::Assistant, "")
                    },
                    Message {
                        tool_call_id: Some("call_9".into()),
                        ..Message::text(Role::Tool, "it ran")
                    },
                ],
            )
        }
    }

    #[test]
    fn anthropic_bodies_put_system_apart_and_alternate_roles() {
        let body = encode(&provider(Api::Anthropic, ToolCalls::Native), "m", &request(), 10);
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["messages"][0], json!({"role": "user", "content": "a\n\nb"}));
        assert_eq!(body["messages"][1]["role"], "assistant");
        assert_eq!(body["stop_sequences"], json!(["STOP"]));
        assert!(body.get("tools").is_none());
    }

    #[test]
    fn openai_bodies_keep_every_message() {
        let body = encode(&provider(Api::Openai, ToolCalls::Native), "m", &request(), 10);
        assert_eq!(body["messages"].as_array().unwrap().len(), 4);
        assert_eq!(body["stop"], json!(["STOP"]));
    }

    #[test]
    fn tools_calls_and_results_take_each_api_s_form() {
        let body = encode(&provider(Api::Openai, ToolCalls::Native), "m", &with_tools(), 10);
        assert_eq!(
            body["tools"][0]["function"]["parameters"]["required"],
            json!(["script"])
        );
        assert_eq!(body["tool_choice"], "required");
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            r#"{"script":"a.py"}"#
        );
        assert_eq!(
            body["messages"][2],
            json!({"role": "tool", "content": "it ran", "tool_call_id": "call_9"})
        );
        let body = encode(&provider(Api::Anthropic, ToolCalls::Native), "m", &with_tools(), 10);
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        assert_eq!(body["messages"][1]["content"][0]["input"], json!({"script": "a.py"}));
        assert_eq!(body["messages"][2]["content"][0]["type"], "tool_result");
        assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "call_9");
    }

    #[test]
    fn answers_decode_and_refusals_are_told_apart() {
        let (openai, anthropic) = (
            provider(Api::Openai, ToolCalls::Native),
            provider(Api::Anthropic, ToolCalls::Native),
        );
        let r = request();
        let body = br#"{"model":"x","choices":[{"message":{"content":"hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;
        let Decoded::Completion(c) = decode(&openai, &r, body).unwrap() else {
            panic!()
        };
        assert_eq!(
            (
                c.text.as_str(),
                c.input_tokens,
                c.output_tokens,
                c.finish_reason.as_str()
            ),
            ("hi", 3, 1, "length")
        );
        let filtered = br#"{"choices":[{"message":{"content":""},"finish_reason":"content_filter"}]}"#;
        assert!(matches!(decode(&openai, &r, filtered).unwrap(), Decoded::Refused(_)));
        let body = br#"{"model":"y","content":[{"type":"text","text":"ok"}],"stop_reason":"stop_sequence","usage":{"input_tokens":5,"output_tokens":2}}"#;
        let Decoded::Completion(c) = decode(&anthropic, &r, body).unwrap() else {
            panic!()
        };
        assert_eq!((c.text.as_str(), c.finish_reason.as_str()), ("ok", "stop-sequence"));
        let refused = br#"{"content":[],"stop_reason":"refusal"}"#;
        assert!(matches!(decode(&anthropic, &r, refused).unwrap(), Decoded::Refused(_)));
        assert!(decode(&anthropic, &r, b"{not json").unwrap_err().contains("not JSON"));
        assert!(decode(&openai, &r, b"{}").unwrap_err().contains("no choices"));
    }

    #[test]
    fn streamed_answers_are_assembled_with_split_arguments() {
        let openai = provider(Api::Openai, ToolCalls::Native);
        let body = concat!(
            "data: {\"model\":\"x\",\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"run\",\"arguments\":\"{\\\"scr\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"ipt\\\":\\\"a.py\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":6}}\n\n",
            "data: [DONE]\n\n",
        );
        let Decoded::Completion(c) = decode(&openai, &with_tools(), body.as_bytes()).unwrap() else {
            panic!()
        };
        assert_eq!(c.tool_calls[0].arguments, r#"{"script":"a.py"}"#);
        assert_eq!(
            (c.finish_reason.as_str(), c.input_tokens, c.output_tokens),
            ("tool-calls", 4, 6)
        );
        let anthropic = provider(Api::Anthropic, ToolCalls::Native);
        let body = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"y\",\"content\":[],\"usage\":{\"input_tokens\":3}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"run\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"script\\\": \\\"a\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\".py\\\"}\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n",
        );
        let Decoded::Completion(c) = decode(&anthropic, &with_tools(), body.as_bytes()).unwrap() else {
            panic!()
        };
        assert_eq!(c.tool_calls[0].arguments, r#"{"script":"a.py"}"#);
        assert_eq!(
            (c.tool_calls[0].id.as_str(), c.output_tokens, c.input_tokens),
            ("t1", 7, 3)
        );
        let broken = "event: error\ndata: {\"type\":\"error\",\"error\":{\"message\":\"overloaded\"}}\n\n";
        assert!(
            decode(&anthropic, &with_tools(), broken.as_bytes())
                .unwrap_err()
                .contains("overloaded")
        );
    }

    #[test]
    fn a_grammar_provider_gets_one_schema_of_calls_and_answers_with_calls() {
        let local = provider(Api::Openai, ToolCalls::Grammar);
        let body = encode(&local, "m", &with_tools(), 10);
        assert!(body.get("tools").is_none());
        let schema = &body["response_format"]["schema"];
        assert_eq!(body["response_format"]["type"], "json_object");
        assert_eq!(schema["properties"]["tool"]["const"], "run", "{schema}");
        let text = body["messages"].to_string();
        assert!(
            text.contains("Result of run:")
                && text.contains(r#"{\"arguments\":{\"script\":\"a.py\"},\"tool\":\"run\"}"#),
            "{text}"
        );
        let answer =
            br#"{"choices":[{"message":{"content":"{\"tool\": \"run\", \"arguments\": {\"script\": \"b.py\"}}"}}]}"#;
        let Decoded::Completion(c) = decode(&local, &with_tools(), answer).unwrap() else {
            panic!()
        };
        assert_eq!(
            (c.tool_calls[0].name.as_str(), c.tool_calls[0].id.as_str()),
            ("run", "call_2")
        );
        assert_eq!(c.tool_calls[0].arguments, r#"{"script":"b.py"}"#);
        assert_eq!((c.text.as_str(), c.finish_reason.as_str()), ("", "tool-calls"));
    }
}
