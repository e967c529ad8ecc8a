//! `mlrb.toml`: which providers the host may call, the model aliases agents
//! ask for, their prices, and where each key comes from.
//!
//! ```toml
//! [llm]
//! timeout_seconds = 120        # one request, retries apart
//! max_retries = 4              # on 429, 5xx, timeouts and dropped connections
//!
//! [llm.providers.anthropic]
//! api = "anthropic"            # or "openai": the chat completions API (also vLLM, llama.cpp, Ollama)
//! base_url = "https://api.anthropic.com"
//! api_key_env = "ANTHROPIC_API_KEY"   # read from the environment or a .env file
//! max_concurrency = 4          # requests in flight, shared by every episode of one host
//!
//! [llm.models.main]
//! provider = "anthropic"
//! model = "claude-sonnet-4-5"
//! input_usd_per_mtok = 3.0
//! output_usd_per_mtok = 15.0
//! max_tokens = 4096            # the cap on any request's output
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `POST {base_url}/chat/completions`.
    Openai,
    /// `POST {base_url}/v1/messages`.
    Anthropic,
}

/// One `[llm.providers.<name>]` table: an endpoint and where its key comes from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// The wire protocol it speaks.
    pub api: Api,
    /// The URL requests go under, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    /// The environment variable (or `.env` entry) holding the key; none for
    /// a local server that needs no key.
    pub api_key_env: Option<String>,
    /// Requests in flight at once, shared by every episode of the host (default 4).
    #[serde(default = "default_concurrency")]
    pub max_concurrency: usize,
    /// How tools reach the model: `native` (the API's own tool calling, the
    /// default) or `grammar` (a llama.cpp server: described in the prompt,
    /// the answer constrained to a JSON Schema of the calls).
    #[serde(default)]
    pub tool_calls: ToolCalls,
    /// Ask for the answer as a stream of events (default false). The host
    /// still hands the agent the whole answer; a stream keeps a slow
    /// provider's connection busy, so idle timeouts on the way do not cut it.
    #[serde(default)]
    pub stream: bool,
}

/// How a provider is given tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCalls {
    /// The API's own `tools` (OpenAI functions, Anthropic tool use).
    #[default]
    Native,
    /// Grammar-constrained JSON (`response_format` with a schema), for llama.cpp servers.
    Grammar,
}

fn default_concurrency() -> usize {
    4
}

/// One `[llm.models.<alias>]` table: what an alias agents ask for resolves to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The provider (a key of `[llm.providers]`) that serves it.
    pub provider: String,
    /// The provider's model name.
    pub model: String,
    /// USD per million input tokens (default 0).
    #[serde(default)]
    pub input_usd_per_mtok: f64,
    /// USD per million output tokens (default 0).
    #[serde(default)]
    pub output_usd_per_mtok: f64,
    /// The cap on any request's output tokens (default 4096).
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
}

fn default_max_tokens() -> u32 {
    4096
}

/// The `[llm]` table of `mlrb.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    /// The timeout of one request in seconds, retries apart (default 120).
    #[serde(default = "default_timeout")]
    pub timeout_seconds: u64,
    /// Retries after the first attempt, on 429, 5xx, timeouts and dropped connections (default 4).
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// The longest single wait between retries, whatever Retry-After says.
    #[serde(default = "default_max_backoff")]
    pub max_backoff_seconds: u64,
    /// Providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Model aliases agents may ask for, by alias.
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
}

fn default_timeout() -> u64 {
    120
}
fn default_retries() -> u32 {
    4
}
fn default_max_backoff() -> u64 {
    60
}

impl LlmConfig {
    /// The timeout of one request.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    llm: Option<LlmConfig>,
}

/// The configuration file: `explicit` (`--config`), else `$MLRB_CONFIG`,
/// else `./mlrb.toml`, else `$XDG_CONFIG_HOME/mlrb/mlrb.toml` (or
/// `~/.config/mlrb/mlrb.toml`); `None` when there is none.
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return Some(path.to_path_buf());
    }
    if let Some(path) = std::env::var_os("MLRB_CONFIG") {
        return Some(PathBuf::from(path));
    }
    let local = PathBuf::from("mlrb.toml");
    if local.is_file() {
        return Some(local);
    }
    let config_home = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    let user = config_home.join("mlrb/mlrb.toml");
    user.is_file().then_some(user)
}

/// Reads and checks `[llm]` of a configuration file.
pub fn load(path: &Path) -> Result<Option<LlmConfig>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let file: ConfigFile = toml::from_str(&text).map_err(|e| {
        let at = e
            .span()
            .map(|span| {
                let line = text[..span.start].matches('\n').count() + 1;
                format!(" (line {line})")
            })
            .unwrap_or_default();
        anyhow::anyhow!("{}{at}: {}", path.display(), e.message().trim())
    })?;
    let Some(config) = file.llm else { return Ok(None) };
    for (alias, model) in &config.models {
        if !config.providers.contains_key(&model.provider) {
            bail!(
                "{}: llm.models.{alias}.provider = {:?}, but there is no [llm.providers.{}]",
                path.display(),
                model.provider,
                model.provider
            );
        }
    }
    for (name, provider) in &config.providers {
        if !(provider.base_url.starts_with("http://") || provider.base_url.starts_with("https://")) {
            bail!(
                "{}: llm.providers.{name}.base_url = {:?}: use an http:// or https:// URL",
                path.display(),
                provider.base_url
            );
        }
        if provider.max_concurrency == 0 {
            bail!(
                "{}: llm.providers.{name}.max_concurrency must be at least 1",
                path.display()
            );
        }
    }
    Ok(Some(config))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_documented_example_is_a_valid_configuration() {
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../mlrb.example.toml");
        let config = super::load(&example).unwrap().expect("the example has [llm]");
        assert_eq!(config.models["main"].provider, "anthropic");
        assert!(
            config
                .models
                .values()
                .all(|m| config.providers.contains_key(&m.provider))
        );
    }
}
