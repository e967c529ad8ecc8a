//! An episode's trace as a transcript a person reads top to bottom: the
//! task it was told, the agent's notes and its model's conversation as
//! messages, each tool call as one line that opens to its arguments and
//! result, a script's output under its call, each validation with what
//! the agent was told, and after every step that changed the workspace the
//! diff it made. Everything from the trace is clipped and escaped.

use std::collections::HashSet;
use std::fmt::Write;
use std::ops::Range;
use std::path::Path;

use serde_json::Value;

use super::text::{brief, clip, json, shown};
use crate::format::esc;

/// Characters of a message, argument or result shown in full before the
/// rest is left to the raw JSON.
const BODY_CHARS: usize = 20_000;
/// Characters of a message shown before it is folded.
const FOLD_CHARS: usize = 1_500;
/// Characters of a tool call's one line.
const LINE_CHARS: usize = 160;
/// Characters of a script's output shown under its call.
const OUTPUT_CHARS: usize = 8_000;
/// Inline diffs on one page (past them, the snapshot's link is enough).
const INLINE_DIFFS: usize = 40;

/// The records a transcript is made of.
pub struct Episode<'a> {
    /// The path of the episode's pages (escaped; empty where the viewer
    /// shows only this episode).
    pub link: &'a str,
    /// Its snapshot store.
    pub snapshots: &'a Path,
    /// Every event of its trace.
    pub events: &'a [Value],
}

/// The messages the model has seen and the answers it gave, so each call
/// shows only what is new in its conversation (an agent that rebuilds its
/// context each step sends most of it again).
#[derive(Default)]
struct Conversation {
    seen: HashSet<String>,
}

/// Model calls before a page whose messages count as seen on it.
const REMEMBERED_CALLS: usize = 8;

impl Conversation {
    /// The conversation as it stood after `events`.
    fn after(events: &[Value]) -> Self {
        let mut conversation = Self::default();
        let calls: Vec<&Value> = events
            .iter()
            .rev()
            .filter(|e| e["interface"] == "llm" && e["function"] == "complete")
            .take(REMEMBERED_CALLS)
            .collect();
        for event in calls.into_iter().rev() {
            conversation.learn(event);
        }
        conversation
    }

    fn learn(&mut self, event: &Value) {
        for message in event["args"]["messages"].as_array().into_iter().flatten() {
            self.seen.insert(message.to_string());
        }
        let answer = answer_of(&event["result"]);
        self.seen.insert(answer_key(&answer["text"], &answer["tool_calls"]));
    }

    fn is_new(&self, message: &Value) -> bool {
        let answered = message["role"] == "assistant"
            && self
                .seen
                .contains(&answer_key(&message["content"], &message["tool_calls"]));
        !answered && !self.seen.contains(&message.to_string())
    }
}

/// An answer of the model, as the message that quotes it back would have it.
fn answer_key(text: &Value, calls: &Value) -> String {
    let calls = match calls.as_array() {
        Some(calls) if !calls.is_empty() => Value::Array(calls.clone()).to_string(),
        _ => String::new(),
    };
    format!("assistant\u{0}{text}\u{0}{calls}")
}

/// The transcript of the events in `range`.
pub fn render(episode: &Episode, range: Range<usize>) -> String {
    let before = &episode.events[..range.start];
    let mut conversation = Conversation::after(before);
    let mut snapshot = before.iter().rev().find_map(|e| e["snapshot"].as_u64()).unwrap_or(0);
    let (mut hidden, mut diffs) = (0usize, 0usize);
    let mut html = String::from("<div id=\"transcript\">");
    for event in &episode.events[range] {
        let interface = event["interface"].as_str().unwrap_or("");
        let function = event["function"].as_str().unwrap_or("");
        match (interface, function) {
            ("llm", "complete") => html.push_str(&model_turn(event, &mut conversation)),
            ("episode", "note") => {
                let _ = write!(
                    html,
                    "<div class=\"msg note\"{}><div class=\"role\">note</div>{}</div>",
                    anchor(event),
                    message_text(&event["args"]["text"])
                );
            }
            ("episode", "validate") => html.push_str(&validation(event)),
            ("host", "run") => html.push_str(&task(event)),
            ("host", "snapshot") => {}
            _ if interface.starts_with("wasi") => hidden += 1,
            _ => html.push_str(&call(event, interface, function)),
        }
        if let Some(id) = event["snapshot"].as_u64().filter(|id| *id > snapshot) {
            if diffs < INLINE_DIFFS {
                html.push_str(&super::diff::inline(episode.snapshots, episode.link, snapshot, id));
            }
            diffs += 1;
            snapshot = id;
        }
    }
    if hidden > 0 {
        let _ = write!(
            html,
            "<p class=\"hidden\">{hidden} calls to clocks and randomness not shown (see the raw steps)</p>"
        );
    }
    html.push_str("</div>");
    html
}

/// `id="e<seq>"`, so a step can be linked to.
fn anchor(event: &Value) -> String {
    event["seq"]
        .as_u64()
        .map_or(String::new(), |seq| format!(" id=\"e{seq}\""))
}

/// The research problem the agent was given, at the top.
fn task(event: &Value) -> String {
    let task = &event["args"]["task"];
    format!(
        "<div class=\"msg task\"><div class=\"role\">task {} · seed {}</div>{}</div>",
        esc(&brief(&task["name"], 80)),
        esc(&brief(&event["args"]["seed"], 40)),
        message_text(&task["research_problem"])
    )
}

/// A text of a message, folded under its first line when long.
fn message_text(value: &Value) -> String {
    let text = shown(value, BODY_CHARS);
    if text.chars().count() <= FOLD_CHARS {
        return format!("<div class=\"text\">{}</div>", esc(&text));
    }
    format!(
        "<details class=\"long\"><summary>{} <small>({} characters)</small></summary><div class=\"text\">{}</div></details>",
        esc(&clip(text.lines().next().unwrap_or(""), 200)),
        text.chars().count(),
        esc(&text)
    )
}

/// What a model call returned, whether or not the agent got it.
fn answer_of(result: &Value) -> &Value {
    match result.get("ok") {
        Some(ok) => ok,
        None => &result["answer"],
    }
}

/// One model call: the messages new to the conversation, and the answer.
fn model_turn(event: &Value, conversation: &mut Conversation) -> String {
    let messages: &[Value] = match event["args"]["messages"].as_array() {
        Some(messages) => messages,
        None => &[],
    };
    let mut html = String::new();
    let mut again = 0;
    for message in messages {
        if conversation.is_new(message) {
            html.push_str(&message_html(message));
        } else {
            again += 1;
        }
    }
    if again > 0 {
        let _ = write!(
            html,
            "<p class=\"hidden\">(and {again} earlier message{} sent again)</p>",
            if again == 1 { "" } else { "s" }
        );
    }
    html.push_str(&answer_html(event));
    conversation.learn(event);
    html
}

/// A message the agent sent its model.
fn message_html(message: &Value) -> String {
    let role = message["role"].as_str().unwrap_or("?");
    let class = match role {
        "system" | "user" | "assistant" | "tool" => role,
        _ => "other",
    };
    let answers = match message["tool_call_id"].as_str() {
        Some(id) => format!(" · result of call {}", esc(&clip(id, 60))),
        None => String::new(),
    };
    format!(
        "<div class=\"msg {class}\"><div class=\"role\">{}{answers}</div>{}{}</div>",
        esc(&clip(role, 30)),
        message_text(&message["content"]),
        tool_calls(&message["tool_calls"])
    )
}

/// The tools a model's message called, each a line opening to its arguments.
fn tool_calls(calls: &Value) -> String {
    let mut html = String::new();
    for call in calls.as_array().into_iter().flatten() {
        // The arguments are JSON text: shown as JSON where they parse.
        let arguments = match call["arguments"].as_str().map(serde_json::from_str::<Value>) {
            Some(Ok(parsed)) => parsed,
            _ => call["arguments"].clone(),
        };
        let _ = write!(
            html,
            "<details class=\"toolcall\"><summary>calls <b>{}</b>({})</summary><pre>{}</pre></details>",
            esc(&brief(&call["name"], 80)),
            esc(&brief(&arguments, LINE_CHARS)),
            esc(&fields(&arguments))
        );
    }
    html
}

/// The model's answer to a call, or why the agent got none.
fn answer_html(event: &Value) -> String {
    let result = &event["result"];
    let answer = answer_of(result);
    let stats = &event["llm"]["stats"];
    let mut head = format!(
        "model {} · {} → {} tokens · {}",
        brief(&answer["model"], 60),
        brief(&answer["input_tokens"], 20),
        brief(&answer["output_tokens"], 20),
        brief(&answer["finish_reason"], 30)
    );
    if let Some(attempts) = stats["attempts"].as_u64().filter(|a| *a > 1) {
        let _ = write!(head, " · {attempts} attempts");
    }
    let mut html = format!("<div class=\"msg assistant answer\"{}>", anchor(event));
    if let Some(error) = result.get("error") {
        let _ = write!(
            html,
            "<div class=\"refused\">the agent got no answer: {}</div>",
            esc(&error_text(error))
        );
        if answer.is_null() {
            html.push_str("</div>");
            return html;
        }
    }
    let _ = write!(html, "<div class=\"role\">{}</div>", esc(&head));
    let text = &answer["text"];
    if text.as_str().is_some_and(|t| !t.is_empty()) || text.is_object() {
        html.push_str(&message_text(text));
    }
    html.push_str(&tool_calls(&answer["tool_calls"]));
    html.push_str("</div>");
    html
}

/// A typed error (`{"kind", "message"}`) in words.
fn error_text(error: &Value) -> String {
    match error["kind"].as_str() {
        Some(kind) => format!("{}: {}", clip(kind, 60), shown(&error["message"], BODY_CHARS)),
        None => json(error, BODY_CHARS, false),
    }
}

/// A value's fields, each as text (strings as they are, not JSON-quoted).
fn fields(value: &Value) -> String {
    match value {
        Value::Object(map) if !map.contains_key("clipped") => {
            let mut text = String::new();
            for (key, field) in map {
                let shown = shown(field, BODY_CHARS);
                if shown.contains('\n') {
                    let _ = write!(text, "{key}:\n{shown}\n");
                } else {
                    let _ = writeln!(text, "{key}: {shown}");
                }
                if text.len() > BODY_CHARS {
                    text.push_str("… (the raw JSON has the rest)");
                    break;
                }
            }
            text
        }
        other => shown(other, BODY_CHARS),
    }
}

/// A tool call: one line that opens to its arguments and result; a
/// script's output below it.
fn call(event: &Value, interface: &str, function: &str) -> String {
    let result = &event["result"];
    let (outcome, failed) = match (result.get("ok"), result.get("error")) {
        (_, Some(error)) => (format!("error {}", clip(&error_text(error), LINE_CHARS)), true),
        (Some(ok), _) => (outcome_line(ok), false),
        (None, None) => (brief(result, LINE_CHARS), false),
    };
    let step = event["step"].as_u64().map_or(String::new(), |s| format!("step {s} · "));
    let class = if interface == "host" { "call host" } else { "call" };
    let mut html = format!(
        "<details class=\"{class}{}\"{}><summary><span class=\"where\">{step}#{}</span> <b>{}.{}</b>({}) → {} <small>{:.1} ms</small></summary><div class=\"body\"><div class=\"label\">arguments</div><pre>{}</pre><div class=\"label\">result</div><pre>{}</pre></div></details>",
        if failed { " failed" } else { "" },
        anchor(event),
        event["seq"].as_u64().unwrap_or(0),
        esc(&clip(interface, 40)),
        esc(&clip(function, 60)),
        esc(&brief(&event["args"], LINE_CHARS)),
        esc(&outcome),
        event["duration_us"].as_f64().unwrap_or(0.0) / 1000.0,
        esc(&fields(&event["args"])),
        esc(&fields(result.get("ok").unwrap_or(result)))
    );
    if function == "execute-script"
        && let Some(ok) = result.get("ok")
    {
        html.push_str(&script_output(&event["args"], ok));
    }
    html
}

/// The one-line result of a call that succeeded.
fn outcome_line(ok: &Value) -> String {
    match ok {
        Value::Null => "ok".into(),
        Value::String(s) => format!("{} lines, {} bytes", s.lines().count(), s.len()),
        Value::Array(items) => format!("{} entries", items.len()),
        _ if ok.get("exit_code").is_some() => format!(
            "exit {} · {} ms",
            brief(&ok["exit_code"], 20),
            brief(&ok["duration_ms"], 20)
        ),
        _ => brief(ok, LINE_CHARS),
    }
}

/// What a script printed, its end kept where it is long (where the
/// result or the error is).
fn script_output(args: &Value, ok: &Value) -> String {
    let tail = |value: &Value| -> String {
        let text = shown(value, usize::MAX);
        let count = text.chars().count();
        if count <= OUTPUT_CHARS {
            return text;
        }
        let start = text.char_indices().nth(count - OUTPUT_CHARS).map_or(0, |(i, _)| i);
        format!("… ({} bytes before)\n{}", start, &text[start..])
    };
    let mut html = format!(
        "<div class=\"output\"><div class=\"role\">output of {} · exit {}</div>",
        esc(&brief(&args["script"], 80)),
        esc(&brief(&ok["exit_code"], 20))
    );
    for stream in ["stdout", "stderr"] {
        let text = tail(&ok[stream]);
        if !text.trim().is_empty() {
            let _ = write!(html, "<pre class=\"{stream}\">{}</pre>", esc(&text));
        }
    }
    html.push_str("</div>");
    html
}

/// A validation: what the agent was told, and what the record kept.
fn validation(event: &Value) -> String {
    let result = &event["result"];
    // Records since mlrb kept both sides: `told` (what the agent got) and `validation`.
    let told = result.get("told").unwrap_or(result);
    let said = match (told.get("ok"), told.get("error")) {
        (Some(ok), _) => format!(
            "score {} · {} · “{}”",
            match &ok["score"] {
                Value::Null => "not told".to_string(),
                score => brief(score, 40),
            },
            if ok["valid"] == true { "valid" } else { "not valid" },
            shown(&ok["message"], 2_000)
        ),
        (_, Some(error)) => format!("refused: {}", error_text(error)),
        _ => brief(told, LINE_CHARS),
    };
    let step = event["step"].as_u64().map_or(String::new(), |s| format!("step {s} · "));
    format!(
        "<div class=\"validation\"{}><div class=\"role\">{step}validate()</div><p>The agent was told: <span class=\"told\">{}</span></p><details><summary>the record</summary><pre>{}</pre></details></div>",
        anchor(event),
        esc(&said),
        esc(&json(result, BODY_CHARS, true))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_conversation_shows_each_message_once() {
        let first = json!({"seq": 1, "interface": "llm", "function": "complete",
            "args": {"messages": [{"role": "user", "content": "Improve the model."}]},
            "result": {"ok": {"text": "Let me look.", "model": "m", "input_tokens": 3, "output_tokens": 3, "finish_reason": "stop"}}});
        let second = json!({"seq": 2, "interface": "llm", "function": "complete",
            "args": {"messages": [{"role": "user", "content": "Improve the model."},
                {"role": "assistant", "content": "Let me look."}, {"role": "user", "content": "Go on."}]},
            "result": {"error": {"kind": "refused", "message": "<no>"}}});
        let events = [first, second];
        let html = render(
            &Episode {
                link: "/e/x",
                snapshots: Path::new("/nonexistent"),
                events: &events,
            },
            0..2,
        );
        assert_eq!(html.matches("Improve the model.").count(), 1, "{html}");
        assert_eq!(html.matches("Let me look.").count(), 1, "{html}");
        assert!(
            html.contains("Go on.") && html.contains("refused: &lt;no&gt;"),
            "{html}"
        );
        // The second page starts where the first left the conversation.
        let page_two = render(
            &Episode {
                link: "/e/x",
                snapshots: Path::new("/nonexistent"),
                events: &events,
            },
            1..2,
        );
        assert!(
            !page_two.contains("Improve the model.") && page_two.contains("Go on."),
            "{page_two}"
        );
    }
}
