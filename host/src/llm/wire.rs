//! The two wire formats: OpenAI-compatible chat completions and Anthropic
//! messages. Requests are built from, and answers read into, one neutral
//! shape.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::config::Api;

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
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
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
    /// "stop", "length" or "stop-sequence".
    pub finish_reason: String,
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
pub fn encode(api: Api, model: &str, request: &LlmRequest, max_tokens: u32) -> Value {
    match api {
        Api::Openai => {
            let messages: Vec<Value> = request
                .messages
                .iter()
                .map(|m| json!({"role": m.role, "content": m.content}))
                .collect();
            let mut body = json!({"model": model, "messages": messages, "max_tokens": max_tokens});
            if let Some(t) = request.temperature {
                body["temperature"] = json!(t);
            }
            if !request.stop.is_empty() {
                body["stop"] = json!(request.stop);
            }
            body
        }
        Api::Anthropic => {
            // System text goes apart; the rest must alternate, starting with
            // the user, so consecutive messages of one role are joined.
            let system: Vec<&str> = request
                .messages
                .iter()
                .filter(|m| m.role == Role::System)
                .map(|m| m.content.as_str())
                .collect();
            let mut turns: Vec<(Role, String)> = Vec::new();
            for m in request.messages.iter().filter(|m| m.role != Role::System) {
                match turns.last_mut() {
                    Some((role, text)) if *role == m.role => {
                        text.push_str("\n\n");
                        text.push_str(&m.content);
                    }
                    _ => turns.push((m.role, m.content.clone())),
                }
            }
            if turns.first().is_none_or(|(role, _)| *role != Role::User) {
                turns.insert(0, (Role::User, "(continue)".to_string()));
            }
            let messages: Vec<Value> = turns
                .into_iter()
                .map(|(role, content)| json!({"role": role, "content": content}))
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
            body
        }
    }
}

/// Reads a 200 answer; `Err` says what was malformed.
pub fn decode(api: Api, body: &[u8]) -> Result<Decoded, String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let tokens = |v: &Value| v.as_u64().map(|n| n.min(u32::MAX as u64) as u32);
    match api {
        Api::Openai => {
            let choice = value["choices"]
                .get(0)
                .ok_or_else(|| "the answer has no choices".to_string())?;
            let finish = choice["finish_reason"].as_str().unwrap_or("stop");
            if finish == "content_filter" {
                return Ok(Decoded::Refused(
                    "the provider's content filter stopped the answer".into(),
                ));
            }
            if let Some(refusal) = choice["message"]["refusal"].as_str() {
                return Ok(Decoded::Refused(refusal.to_string()));
            }
            let text = choice["message"]["content"]
                .as_str()
                .ok_or_else(|| "the answer's message has no text content".to_string())?;
            Ok(Decoded::Completion(Completion {
                text: text.to_string(),
                model: value["model"].as_str().unwrap_or_default().to_string(),
                input_tokens: tokens(&value["usage"]["prompt_tokens"]).unwrap_or(0),
                output_tokens: tokens(&value["usage"]["completion_tokens"]).unwrap_or(0),
                finish_reason: match finish {
                    "length" => "length".into(),
                    _ => "stop".into(),
                },
            }))
        }
        Api::Anthropic => {
            let stop = value["stop_reason"].as_str().unwrap_or("end_turn");
            let content = value["content"]
                .as_array()
                .ok_or_else(|| "the answer has no content list".to_string())?;
            let text: String = content
                .iter()
                .filter(|block| block["type"] == "text")
                .filter_map(|block| block["text"].as_str())
                .collect();
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
                input_tokens: tokens(&value["usage"]["input_tokens"]).unwrap_or(0),
                output_tokens: tokens(&value["usage"]["output_tokens"]).unwrap_or(0),
                finish_reason: match stop {
                    "max_tokens" => "length".into(),
                    "stop_sequence" => "stop-sequence".into(),
                    _ => "stop".into(),
                },
            }))
        }
    }
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

    fn request() -> LlmRequest {
        LlmRequest {
            model: "main".into(),
            messages: vec![
                Message {
                    role: Role::System,
                    content: "be brief".into(),
                },
                Message {
                    role: Role::User,
                    content: "a".into(),
                },
                Message {
                    role: Role::User,
                    content: "b".into(),
                },
                Message {
                    role: Role::Assistant,
                    content: "c".into(),
                },
            ],
            max_tokens: Some(10),
            temperature: Some(0.5),
            stop: vec!["STOP".into()],
        }
    }

    #[test]
    fn anthropic_bodies_put_system_apart_and_alternate_roles() {
        let body = encode(Api::Anthropic, "m", &request(), 10);
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["messages"][0], json!({"role": "user", "content": "a\n\nb"}));
        assert_eq!(body["messages"][1]["role"], "assistant");
        assert_eq!(body["stop_sequences"], json!(["STOP"]));
        assert_eq!(body["max_tokens"], 10);
    }

    #[test]
    fn openai_bodies_keep_every_message() {
        let body = encode(Api::Openai, "m", &request(), 10);
        assert_eq!(body["messages"].as_array().unwrap().len(), 4);
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["stop"], json!(["STOP"]));
    }

    #[test]
    fn answers_decode_and_refusals_are_told_apart() {
        let openai = br#"{"model":"x","choices":[{"message":{"content":"hi"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#;
        let Decoded::Completion(c) = decode(Api::Openai, openai).unwrap() else {
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
        assert!(matches!(decode(Api::Openai, filtered).unwrap(), Decoded::Refused(_)));
        let anthropic = br#"{"model":"y","content":[{"type":"text","text":"ok"}],"stop_reason":"stop_sequence","usage":{"input_tokens":5,"output_tokens":2}}"#;
        let Decoded::Completion(c) = decode(Api::Anthropic, anthropic).unwrap() else {
            panic!()
        };
        assert_eq!((c.text.as_str(), c.finish_reason.as_str()), ("ok", "stop-sequence"));
        let refused = br#"{"content":[],"stop_reason":"refusal"}"#;
        assert!(matches!(decode(Api::Anthropic, refused).unwrap(), Decoded::Refused(_)));
        assert!(decode(Api::Anthropic, b"{not json").unwrap_err().contains("not JSON"));
        assert!(decode(Api::Openai, b"{}").unwrap_err().contains("no choices"));
    }
}
