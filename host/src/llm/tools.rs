//! What tool calling promises an agent, checked on both sides of a call:
//! a request's tools, tool choice, response schema and tool history are
//! well formed (else `invalid-request`, nothing is sent), and an answer's
//! calls name offered tools with arguments of their schemas and its text
//! is of the response schema (else `malformed-answer`, whatever the
//! provider claimed). Schemas are compiled without any reference
//! resolution (an agent's `$ref` can reach no file and no URL) and with a
//! linear-time regex engine (an agent's `pattern` cannot stall the host).

use serde_json::Value;

use super::wire::{Completion, LlmRequest, Role, ToolChoice};

/// How much of an answer an error quotes.
const QUOTED_CHARS: usize = 400;

fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(schema)
        .map_err(|e| e.to_string())
}

fn schema(text: &str, what: &str) -> Result<Value, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("{what} is not JSON: {e}"))?;
    if !value.is_object() {
        return Err(format!("{what} is not a JSON Schema object"));
    }
    compile(&value).map_err(|e| format!("{what} is not a usable JSON Schema: {e}"))?;
    Ok(value)
}

/// Whether `request` may be sent; the error says what to fix.
pub fn check_request(request: &LlmRequest) -> Result<(), String> {
    let mut names = std::collections::HashSet::new();
    for tool in &request.tools {
        let name = &tool.name;
        let well_named =
            (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !well_named {
            return Err(format!("tool name {name:?}: use 1 to 64 of a-z A-Z 0-9 _ -"));
        }
        if !names.insert(name.as_str()) {
            return Err(format!("tool {name:?} is offered twice"));
        }
        let parameters = schema(&tool.parameters, &format!("tool {name:?}'s parameters"))?;
        if parameters.get("type").is_some_and(|t| t != "object") {
            return Err(format!("tool {name:?}'s parameters must describe an object"));
        }
    }
    match &request.tool_choice {
        ToolChoice::Named(name) if !names.contains(name.as_str()) => {
            return Err(format!(
                "tool choice names {name:?}, which is not among the request's tools"
            ));
        }
        ToolChoice::Required if request.tools.is_empty() => {
            return Err("tool choice `required` without any tools".into());
        }
        _ => {}
    }
    if let Some(text) = &request.response_schema {
        schema(text, "the response schema")?;
    }
    for (i, m) in request.messages.iter().enumerate() {
        if !m.tool_calls.is_empty() && m.role != Role::Assistant {
            return Err(format!("message {}: only assistant messages carry tool calls", i + 1));
        }
        if m.role == Role::Tool && m.tool_call_id.as_deref().is_none_or(str::is_empty) {
            return Err(format!(
                "message {}: a tool message needs the tool-call-id of the call it answers",
                i + 1
            ));
        }
    }
    Ok(())
}

/// Whether `answer` is what `request` asked for; the error quotes what came back.
pub fn check_answer(request: &LlmRequest, answer: &Completion) -> Result<(), String> {
    let cut = if answer.finish_reason == "length" {
        " (the answer was cut at max-tokens)"
    } else {
        ""
    };
    if !answer.tool_calls.is_empty() && !request.calls_tools() {
        let names: Vec<&str> = answer.tool_calls.iter().map(|c| c.name.as_str()).collect();
        return Err(format!(
            "the model called {} though no tool could be called",
            names.join(", ")
        ));
    }
    for call in &answer.tool_calls {
        let offered = match &request.tool_choice {
            ToolChoice::Named(name) => call.name == *name,
            _ => true,
        };
        let Some(tool) = request.tools.iter().find(|t| t.name == call.name).filter(|_| offered) else {
            return Err(format!(
                "the model called {:?}, which is not an offered tool",
                call.name
            ));
        };
        let arguments: Value = serde_json::from_str(&call.arguments).map_err(|e| {
            format!(
                "the arguments of the call to {} are not JSON ({e}){cut}: {}",
                call.name,
                quote(&call.arguments)
            )
        })?;
        if !arguments.is_object() {
            return Err(format!(
                "the arguments of the call to {} are not an object: {}",
                call.name,
                quote(&call.arguments)
            ));
        }
        fits(&tool.parameters, &arguments).map_err(|why| {
            format!(
                "the arguments of the call to {} do not match {why}: {}",
                call.name,
                quote(&call.arguments)
            )
        })?;
    }
    let must_call = request.calls_tools() && matches!(request.tool_choice, ToolChoice::Required | ToolChoice::Named(_));
    if must_call && answer.tool_calls.is_empty() {
        return Err(format!(
            "a tool call was required, the model answered with text{cut}: {}",
            quote(&answer.text)
        ));
    }
    if let Some(schema) = &request.response_schema
        && answer.tool_calls.is_empty()
    {
        let value: Value = serde_json::from_str(answer.text.trim())
            .map_err(|e| format!("the answer is not JSON ({e}){cut}: {}", quote(&answer.text)))?;
        fits(schema, &value).map_err(|why| format!("the answer does not match {why}: {}", quote(&answer.text)))?;
    }
    Ok(())
}

/// Whether `value` is of the schema `text` (checked when the request was).
fn fits(text: &str, value: &Value) -> Result<(), String> {
    let schema: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let validator = compile(&schema)?;
    match validator.iter_errors(value).next() {
        None => Ok(()),
        Some(error) => {
            let at = error.instance_path().to_string();
            let at = if at.is_empty() {
                String::new()
            } else {
                format!(" at {at}")
            };
            Err(format!("the schema{at}: {error}"))
        }
    }
}

fn quote(text: &str) -> String {
    let shown: String = text.chars().take(QUOTED_CHARS).collect();
    if shown.len() < text.len() {
        format!("{shown:?}…")
    } else {
        format!("{shown:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::wire::{Message, Tool, ToolCall};

    fn request(choice: ToolChoice) -> LlmRequest {
        LlmRequest {
            tools: vec![Tool {
                name: "run".into(),
                description: String::new(),
                parameters: r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}"#.into(),
            }],
            tool_choice: choice,
            ..LlmRequest::plain("main", vec![Message::text(Role::User, "go")])
        }
    }

    fn answer(calls: &[(&str, &str)], text: &str) -> Completion {
        Completion {
            text: text.into(),
            model: "m".into(),
            input_tokens: 1,
            output_tokens: 1,
            finish_reason: "stop".into(),
            tool_calls: calls
                .iter()
                .map(|(name, arguments)| ToolCall {
                    id: "c".into(),
                    name: (*name).into(),
                    arguments: (*arguments).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn bad_requests_are_refused_before_they_are_sent() {
        let mut bad = request(ToolChoice::Auto);
        bad.tools[0].name = "run script".into();
        assert!(check_request(&bad).unwrap_err().contains("1 to 64"));
        let mut bad = request(ToolChoice::Auto);
        bad.tools[0].parameters = "{".into();
        assert!(check_request(&bad).unwrap_err().contains("not JSON"));
        let mut bad = request(ToolChoice::Auto);
        bad.tools[0].parameters = r#"{"type":"string"}"#.into();
        assert!(check_request(&bad).unwrap_err().contains("object"));
        assert!(
            check_request(&request(ToolChoice::Named("other".into())))
                .unwrap_err()
                .contains("not among")
        );
        let mut bad = request(ToolChoice::Auto);
        bad.messages.push(Message::text(Role::Tool, "x"));
        assert!(check_request(&bad).unwrap_err().contains("tool-call-id"));
        // An agent's schema can reach no file and no URL.
        let mut bad = request(ToolChoice::Auto);
        bad.tools[0].parameters = r#"{"$ref":"file:///etc/passwd"}"#.into();
        assert!(check_request(&bad).is_err());
        let mut bad = request(ToolChoice::Auto);
        bad.tools[0].parameters = r#"{"$ref":"http://127.0.0.1:9/schema.json"}"#.into();
        assert!(check_request(&bad).is_err());
        assert_eq!(check_request(&request(ToolChoice::Required)), Ok(()));
    }

    #[test]
    fn answers_that_do_not_fit_are_malformed() {
        let required = request(ToolChoice::Required);
        assert_eq!(check_answer(&required, &answer(&[("run", r#"{"n": 3}"#)], "")), Ok(()));
        let why = check_answer(&required, &answer(&[("run", r#"{"n": "three"}"#)], "")).unwrap_err();
        assert!(why.contains("do not match the schema at /n"), "{why}");
        let why = check_answer(&required, &answer(&[("run", r#"{"n": 3"#)], "")).unwrap_err();
        assert!(why.contains("not JSON"), "{why}");
        let why = check_answer(&required, &answer(&[("rm", r#"{}"#)], "")).unwrap_err();
        assert!(why.contains("not an offered tool"), "{why}");
        let why = check_answer(&required, &answer(&[], "I would rather talk")).unwrap_err();
        assert!(
            why.contains("a tool call was required") && why.contains("rather talk"),
            "{why}"
        );
        let none = request(ToolChoice::None);
        assert!(check_answer(&none, &answer(&[("run", r#"{"n": 3}"#)], "")).is_err());
        let schema = LlmRequest {
            response_schema: Some(r#"{"type":"object","required":["score"]}"#.into()),
            ..LlmRequest::plain("main", vec![Message::text(Role::User, "go")])
        };
        assert_eq!(check_answer(&schema, &answer(&[], r#"{"score": 1}"#)), Ok(()));
        assert!(
            check_answer(&schema, &answer(&[], r#"{"mark": 1}"#))
                .unwrap_err()
                .contains("does not match")
        );
        assert!(
            check_answer(&schema, &answer(&[], "score: 1"))
                .unwrap_err()
                .contains("not JSON")
        );
    }

    #[test]
    fn a_pattern_cannot_stall_the_host() {
        let mut catastrophic = request(ToolChoice::Required);
        catastrophic.tools[0].parameters =
            r#"{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}}}"#.into();
        assert_eq!(check_request(&catastrophic), Ok(()));
        let long = format!(r#"{{"s": "{}b"}}"#, "a".repeat(5000));
        // Linear-time matching answers at once; a backtracking engine would
        // not return from this within the test's lifetime.
        assert!(check_answer(&catastrophic, &answer(&[("run", &long)], "")).is_err());
    }
}
