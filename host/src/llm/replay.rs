//! `--llm replay:<episode-dir>`: an episode's LLM requests answered from
//! the exchanges a recorded episode's `events.jsonl` holds, in order, with
//! no provider and no key. The first request that differs from the
//! recording ends the episode, saying where.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::client::LlmError;
use super::wire::{Completion, LlmRequest};

/// The LLM exchanges of a recorded episode, in order.
pub struct Recording {
    /// The episode folder they were read from.
    pub dir: PathBuf,
    exchanges: Vec<(LlmRequest, Result<Completion, LlmError>)>,
}

/// The answer to the `index`th request, or why replay cannot go on.
pub enum Replayed {
    /// The recorded answer: a completion or an error.
    Answer(Result<Completion, LlmError>),
    /// The request is not the one recorded (or is past the end), saying how.
    Diverged(String),
}

impl Recording {
    /// Reads the `llm.complete` events of `dir/events.jsonl`.
    pub fn open(dir: &Path) -> Result<Recording> {
        let path = dir.join("events.jsonl");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "{}: cannot read (--llm replay: takes an episode folder)",
                path.display()
            )
        })?;
        let mut exchanges = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let Ok(event) = serde_json::from_str::<Value>(line) else {
                // A crash may leave a torn last line; anything else is damage.
                if number + 1 == text.lines().count() {
                    break;
                }
                bail!("{}:{}: not a JSON event", path.display(), number + 1);
            };
            if event["interface"] != "llm" || event["function"] != "complete" {
                continue;
            }
            let request: LlmRequest = serde_json::from_value(event["args"].clone())
                .with_context(|| format!("{}:{}: an llm event without its request", path.display(), number + 1))?;
            // A malformed answer is replayed as the answer itself: the check
            // that refused it refuses it again, and its tokens count again.
            let answer = event["result"].get("ok").or_else(|| event["result"].get("answer"));
            let result = if let Some(ok) = answer {
                Ok(serde_json::from_value(ok.clone())
                    .with_context(|| format!("{}:{}: an unreadable completion", path.display(), number + 1))?)
            } else {
                Err(serde_json::from_value(event["result"]["error"].clone())
                    .with_context(|| format!("{}:{}: an unreadable llm error", path.display(), number + 1))?)
            };
            exchanges.push((request, result));
        }
        Ok(Recording {
            dir: dir.to_path_buf(),
            exchanges,
        })
    }

    /// How many exchanges the recording holds.
    pub fn len(&self) -> usize {
        self.exchanges.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.exchanges.is_empty()
    }

    /// Answers request number `index` (0-based) if it is the one recorded.
    pub fn answer(&self, index: usize, request: &LlmRequest) -> Replayed {
        let Some((recorded, result)) = self.exchanges.get(index) else {
            return Replayed::Diverged(format!(
                "request {} has no counterpart: the recording in {} holds {} request(s)",
                index + 1,
                self.dir.display(),
                self.exchanges.len()
            ));
        };
        match first_difference(recorded, request) {
            None => Replayed::Answer(result.clone()),
            Some(difference) => Replayed::Diverged(format!(
                "request {} differs from the recording in {}: {difference}",
                index + 1,
                self.dir.display()
            )),
        }
    }
}

/// Where two requests first differ, in words.
fn first_difference(recorded: &LlmRequest, now: &LlmRequest) -> Option<String> {
    let short = |s: &str| -> String {
        let s: String = s.chars().take(80).collect();
        format!("{s:?}")
    };
    if recorded.model != now.model {
        return Some(format!("model {:?} (recorded {:?})", now.model, recorded.model));
    }
    for (i, (a, b)) in recorded.messages.iter().zip(&now.messages).enumerate() {
        if a.role != b.role {
            return Some(format!("message {} is from {} (recorded {})", i + 1, b.role, a.role));
        }
        if a.content != b.content {
            let at = a
                .content
                .chars()
                .zip(b.content.chars())
                .take_while(|(x, y)| x == y)
                .count();
            let from = |s: &str| s.chars().skip(at).collect::<String>();
            return Some(format!(
                "message {} differs at character {at}: {} (recorded {})",
                i + 1,
                short(&from(&b.content)),
                short(&from(&a.content))
            ));
        }
    }
    if recorded.messages.len() != now.messages.len() {
        return Some(format!(
            "{} message(s) (recorded {})",
            now.messages.len(),
            recorded.messages.len()
        ));
    }
    if recorded.max_tokens != now.max_tokens || recorded.temperature != now.temperature || recorded.stop != now.stop {
        let shown = |r: &LlmRequest| {
            let or_none = |v: Option<String>| v.unwrap_or_else(|| "none".into());
            format!(
                "max_tokens {}, temperature {}, stop [{}]",
                or_none(r.max_tokens.map(|t| t.to_string())),
                or_none(r.temperature.map(|t| t.to_string())),
                r.stop.join(", ")
            )
        };
        return Some(format!("{} (recorded {})", shown(now), shown(recorded)));
    }
    if recorded.tools != now.tools || recorded.tool_choice != now.tool_choice {
        return Some("the tools offered or the tool choice".into());
    }
    if recorded.response_schema != now.response_schema {
        return Some("the response schema".into());
    }
    if recorded.messages != now.messages {
        return Some("the tool calls or results of the conversation".into());
    }
    None
}
