//! The `llm` capability: agents ask the host, the host asks a provider.
//!
//! * [`config`]: `mlrb.toml`, the providers, model aliases and prices;
//! * [`keys`]: keys from the environment or `.env`, never printed;
//! * [`wire`]: the OpenAI-compatible and Anthropic wire formats, streamed
//!   or whole, and tools by grammar for llama.cpp servers;
//! * [`tools`]: the checks on tools, tool calls and response schemas;
//! * [`client`]: concurrency limits, timeouts and retries;
//! * [`replay`]: answering an episode's requests from a recorded one;
//! * [`local`]: the offline default, a small real model on loopback.

pub mod client;
pub mod config;
pub mod keys;
pub mod local;
pub mod replay;
pub mod tools;
pub mod wire;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};
use serde::Serialize;

pub use client::{CallStats, LlmClient, LlmError};
pub use wire::{Completion, LlmRequest, Message, Role, Tool, ToolCall, ToolChoice};

/// Where an episode's completions come from.
#[derive(Clone)]
pub enum LlmSource {
    /// No model configured: every call is `unavailable`.
    None,
    /// Providers, as `mlrb.toml` configures them (one client per host process).
    Live(Arc<LlmClient>),
    /// The local model, started at the first request.
    Local(Arc<local::OnDemand>),
    /// The answers of a recorded episode, in order.
    Replay(Arc<replay::Recording>),
}

impl LlmSource {
    /// From `--llm`: `replay:<episode-dir>` replays, `local` uses the local
    /// model, `none` answers `unavailable`. Without it: the providers of the
    /// configuration file (`config`, or the default places) if it has
    /// `[llm]`, else the local model if it is installed, else none.
    pub fn open(spec: Option<&str>, config: Option<&Path>) -> Result<LlmSource> {
        match spec {
            Some("none") => return Ok(LlmSource::None),
            Some("local") => {
                local::model_file()?;
                return Ok(LlmSource::Local(Arc::default()));
            }
            Some(spec) => {
                let Some(dir) = spec.strip_prefix("replay:") else {
                    bail!("--llm `{spec}`: use replay:<episode-dir>, local or none (providers come from mlrb.toml)");
                };
                return Ok(LlmSource::Replay(Arc::new(replay::Recording::open(Path::new(dir))?)));
            }
            None => {}
        }
        if let Some(path) = config::locate(config)
            && let Some(llm) = config::load(&path)?
        {
            let client = LlmClient::new(llm, &keys::dotenv_files(Some(&path)))?;
            return Ok(LlmSource::Live(Arc::new(client)));
        }
        if local::installed() {
            return Ok(LlmSource::Local(Arc::default()));
        }
        Ok(LlmSource::None)
    }

    /// What the episode record says about it.
    pub fn describe(&self) -> String {
        match self {
            LlmSource::None => "none".into(),
            LlmSource::Live(client) => format!("live ({})", client.aliases().join(", ")),
            LlmSource::Local(_) => format!("local ({})", local::MODEL),
            LlmSource::Replay(recording) => format!("replay of {}", recording.dir.display()),
        }
    }

    /// The price of an alias's tokens, USD per million (input, output).
    pub fn prices(&self, alias: &str) -> (f64, f64) {
        match self {
            LlmSource::Live(client) => client
                .model(alias)
                .map(|m| (m.input_usd_per_mtok, m.output_usd_per_mtok))
                .unwrap_or_default(),
            _ => (0.0, 0.0),
        }
    }
}

/// An episode's LLM spending so far.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct LlmUsage {
    /// `llm.complete` calls made, failed ones included.
    pub calls: u32,
    /// Prompt tokens of the completions received.
    pub input_tokens: u64,
    /// Tokens the completions generated.
    pub output_tokens: u64,
    /// Their cost in USD at the configured prices.
    pub cost_usd: f64,
    /// Waiting for a request slot or out a rate limit: not working time.
    pub waiting_ms: f64,
    /// The providers' time.
    pub provider_ms: f64,
}
