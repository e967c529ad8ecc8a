//! The WIT `llm` interface: a completion from the episode's model source
//! (a provider, the local model, or a recording), checked against the
//! token and cost budgets, paid for and recorded with both sides. A call is
//! not a step.

use std::time::Instant;

use serde_json::{Value, json};

use super::mlrb::agent::llm as wit;
use super::recorder::{Call, Stop, end};
use super::replay::Matched;
use crate::limits::Limits;
use crate::llm::replay::Replayed;
use crate::llm::{CallStats, Completion, LlmError, LlmRequest, LlmSource, LlmUsage, Tool, ToolCall, tools};
use crate::record::trace::raw;

/// The text one LLM request may carry (every provider's context is smaller).
const MAX_LLM_REQUEST_BYTES: usize = 8 << 20;

/// The llm interface's own state: where completions come from, what they
/// cost so far, and how far a replay has got.
pub struct LlmState {
    /// Where completions come from: a provider, the local model, or a recording.
    pub source: LlmSource,
    /// Tokens, cost and calls spent so far.
    pub usage: LlmUsage,
    /// The episode's token and cost budget (`llm_tokens`, `llm_cost_usd`; 0: no limit).
    limits: Limits,
    /// Requests answered so far from a replayed recording.
    replayed: usize,
}

impl LlmState {
    /// A state answering from `source` under the LLM budget of `limits`, with nothing spent.
    pub fn new(source: LlmSource, limits: &Limits) -> Self {
        Self {
            source,
            usage: LlmUsage::default(),
            limits: limits.clone(),
            replayed: 0,
        }
    }
}

link_view! {
    /// What the llm interface's host code sees of the agent's state.
    LlmCapability => LlmView<'a>, |state| {
        llm: &'a mut LlmState = &mut state.llm,
    }
}

impl From<wit::Request> for LlmRequest {
    fn from(request: wit::Request) -> Self {
        use crate::llm::{Role, ToolChoice};
        Self {
            model: request.model,
            messages: request
                .messages
                .into_iter()
                .map(|m| crate::llm::Message {
                    role: match m.role {
                        wit::Role::System => Role::System,
                        wit::Role::User => Role::User,
                        wit::Role::Assistant => Role::Assistant,
                        wit::Role::Tool => Role::Tool,
                    },
                    content: m.content,
                    tool_calls: m.tool_calls.into_iter().map(Into::into).collect(),
                    tool_call_id: m.tool_call_id,
                })
                .collect(),
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            stop: request.stop,
            tools: request
                .tools
                .into_iter()
                .map(|t| Tool {
                    name: t.name,
                    description: t.description,
                    parameters: t.parameters,
                })
                .collect(),
            tool_choice: match request.tool_choice {
                wit::ToolChoice::Auto => ToolChoice::Auto,
                wit::ToolChoice::Required => ToolChoice::Required,
                wit::ToolChoice::Named(name) => ToolChoice::Named(name),
                wit::ToolChoice::None => ToolChoice::None,
            },
            response_schema: request.response_schema,
        }
    }
}

impl From<Completion> for wit::Completion {
    fn from(c: Completion) -> Self {
        Self {
            text: c.text,
            model: c.model,
            input_tokens: c.input_tokens,
            output_tokens: c.output_tokens,
            finish_reason: c.finish_reason,
            tool_calls: c.tool_calls.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<wit::ToolCall> for ToolCall {
    fn from(c: wit::ToolCall) -> Self {
        Self {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        }
    }
}

impl From<ToolCall> for wit::ToolCall {
    fn from(c: ToolCall) -> Self {
        Self {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        }
    }
}

impl From<LlmError> for wit::LlmError {
    fn from(error: LlmError) -> Self {
        use LlmError as E;
        match error {
            E::BudgetExhausted(m) => Self::BudgetExhausted(m),
            E::Refused(m) => Self::Refused(m),
            E::Provider(m) => Self::Provider(m),
            E::Timeout(m) => Self::Timeout(m),
            E::InvalidRequest(m) => Self::InvalidRequest(m),
            E::Unavailable(m) => Self::Unavailable(m),
            E::MalformedAnswer(m) => Self::MalformedAnswer(m),
        }
    }
}

impl wit::Host for LlmView<'_> {
    async fn complete(&mut self, request: wit::Request) -> wasmtime::Result<Result<wit::Completion, wit::LlmError>> {
        let result = self.complete_recorded(request.into()).await?;
        Ok(result.map(Into::into).map_err(Into::into))
    }
}

impl LlmView<'_> {
    /// One `llm.complete`: checked against the budget, answered by the
    /// episode's source, paid for, and recorded with both sides and how the
    /// call went. Not a step.
    pub(super) async fn complete_recorded(
        &mut self,
        request: LlmRequest,
    ) -> wasmtime::Result<Result<Completion, LlmError>> {
        let args = serde_json::to_value(&request).unwrap_or_default();
        if let Some(matched) = self.recorder.replayed(("llm", "complete"), &args)? {
            return self.replayed_completion(matched);
        }
        let started = Instant::now();
        let (result, stats) = self.llm_answer(&request).await?;
        let (input_price, output_price) = self.llm.source.prices(&request.model);
        let mut cost = 0.0;
        if let Ok(completion) = &result {
            cost =
                (completion.input_tokens as f64 * input_price + completion.output_tokens as f64 * output_price) / 1e6;
            self.llm.usage.input_tokens += completion.input_tokens as u64;
            self.llm.usage.output_tokens += completion.output_tokens as u64;
            self.llm.usage.cost_usd += cost;
        }
        self.llm.usage.calls += 1;
        if let Some(stats) = &stats {
            self.llm.usage.waiting_ms += stats.queued_ms + stats.backoff_ms;
            self.llm.usage.provider_ms += stats.provider_ms;
        }
        // An answer that does not fit the request is paid for and kept in
        // the trace beside the error the agent gets.
        let (result, refused_answer) = match result {
            Ok(completion) => match tools::check_answer(&request, &completion) {
                Ok(()) => (Ok(completion), None),
                Err(why) => (Err(LlmError::MalformedAnswer(why)), Some(completion)),
            },
            Err(error) => (Err(error), None),
        };
        let recorded = match (&result, &refused_answer) {
            (Ok(completion), _) => json!({ "ok": completion }),
            (Err(error), Some(answer)) => json!({ "error": error, "answer": answer }),
            (Err(error), None) => json!({ "error": error }),
        };
        let call = json!({ "source": self.llm_source_kind(), "stats": stats, "cost_usd": cost });
        self.recorder.write(Call {
            interface: "llm",
            function: "complete",
            step: None,
            args: &raw(&request),
            result: &raw(&recorded),
            started,
            snapshot: None,
            llm: Some(&raw(&call)),
        })?;
        Ok(result)
    }

    /// A recorded completion, counted as it was when it was made.
    fn replayed_completion(&mut self, matched: Matched) -> wasmtime::Result<Result<Completion, LlmError>> {
        let unparsed = |e: serde_json::Error| {
            end(
                Stop::ReplayDiverged,
                format!("a recorded completion does not parse: {e}"),
            )
        };
        let refused_answer: Option<Completion> = serde_json::from_value(matched.result["answer"].clone()).ok();
        let result: Result<Completion, LlmError> = match matched.result {
            Value::Object(mut map) if map.contains_key("ok") => {
                Ok(serde_json::from_value(map.remove("ok").unwrap_or_default()).map_err(unparsed)?)
            }
            Value::Object(mut map) => {
                Err(serde_json::from_value(map.remove("error").unwrap_or_default()).map_err(unparsed)?)
            }
            other => return Err(end(Stop::ReplayDiverged, format!("a recorded completion is {other}"))),
        };
        let usage = &mut self.llm.usage;
        usage.calls += 1;
        if let Some(completion) = result.as_ref().ok().or(refused_answer.as_ref()) {
            usage.input_tokens += completion.input_tokens as u64;
            usage.output_tokens += completion.output_tokens as u64;
        }
        let call = &matched.event["llm"];
        usage.cost_usd += call["cost_usd"].as_f64().unwrap_or(0.0);
        let stat = |key: &str| call["stats"][key].as_f64().unwrap_or(0.0);
        usage.waiting_ms += stat("queued_ms") + stat("backoff_ms");
        usage.provider_ms += stat("provider_ms");
        Ok(result)
    }

    fn llm_source_kind(&self) -> &'static str {
        match self.llm.source {
            LlmSource::None => "none",
            LlmSource::Live(_) => "live",
            LlmSource::Local(_) => "local",
            LlmSource::Replay(_) => "replay",
        }
    }

    async fn llm_answer(
        &mut self,
        request: &LlmRequest,
    ) -> wasmtime::Result<(Result<Completion, LlmError>, Option<CallStats>)> {
        if let LlmSource::Replay(recording) = &self.llm.source {
            // A replay answers everything, refusals included, as recorded.
            return match recording.answer(self.llm.replayed, request) {
                Replayed::Answer(result) => {
                    self.llm.replayed += 1;
                    Ok((result, None))
                }
                Replayed::Diverged(why) => Err(end(Stop::ReplayDiverged, why)),
            };
        }
        if request.messages.is_empty() {
            return Ok((
                Err(LlmError::InvalidRequest("a request needs at least one message".into())),
                None,
            ));
        }
        if let Err(why) = tools::check_request(request) {
            return Ok((Err(LlmError::InvalidRequest(why)), None));
        }
        let bytes = request.text_bytes();
        if bytes > MAX_LLM_REQUEST_BYTES {
            return Ok((
                Err(LlmError::InvalidRequest(format!(
                    "a request of {} KiB; at most {} KiB of messages per request",
                    bytes >> 10,
                    MAX_LLM_REQUEST_BYTES >> 10
                ))),
                None,
            ));
        }
        let used = self.llm.usage.input_tokens + self.llm.usage.output_tokens;
        let (tokens, cost_usd) = (self.llm.limits.llm_tokens, self.llm.limits.llm_cost_usd);
        if tokens > 0 && used >= tokens {
            return Ok((
                Err(LlmError::BudgetExhausted(format!(
                    "all {} LLM tokens of this episode are spent ({used} used)",
                    tokens
                ))),
                None,
            ));
        }
        if cost_usd > 0.0 && self.llm.usage.cost_usd >= cost_usd {
            return Ok((
                Err(LlmError::BudgetExhausted(format!(
                    "the LLM budget of ${:.4} is spent (${:.4} used)",
                    cost_usd, self.llm.usage.cost_usd
                ))),
                None,
            ));
        }
        match &self.llm.source {
            LlmSource::Live(client) => {
                let client = client.clone();
                let (result, stats) = client.complete(request, self.recorder.deadline).await;
                Ok((result, Some(stats)))
            }
            LlmSource::Local(on_demand) => match on_demand.clone().client().await {
                Ok(client) => {
                    let (result, stats) = client.complete(request, self.recorder.deadline).await;
                    Ok((result, Some(stats)))
                }
                Err(why) => Ok((Err(LlmError::Unavailable(format!("the local model: {why}"))), None)),
            },
            _ => Ok((
                Err(LlmError::Unavailable(
                    "this host has no model configured: add [llm] to mlrb.toml (see mlrb.example.toml), install the local model (scripts/setup.sh --with llm), or run with --llm replay:<episode-dir>"
                        .into(),
                )),
                None,
            )),
        }
    }
}
