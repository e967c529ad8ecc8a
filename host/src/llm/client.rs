//! Calling providers with manners: a per-provider limit on requests in
//! flight (shared by every episode of one host), a request timeout, and
//! retries with backoff on 429, 5xx, timeouts and dropped connections that
//! honour Retry-After — all within the episode's deadline. Time spent queued
//! or waiting out a rate limit is counted apart from the provider's working
//! time.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use serde::Serialize;
use tokio::sync::Semaphore;

use super::config::{Api, LlmConfig, ModelConfig, ProviderConfig};
use super::keys::{self, Secret};
use super::wire::{self, Completion, Decoded, LlmRequest};

/// Why a call gave no completion (the WIT's `llm-error`).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "message", rename_all = "kebab-case")]
pub enum LlmError {
    /// The episode's token or cost budget is spent.
    BudgetExhausted(String),
    /// The model declined to answer.
    Refused(String),
    /// The provider failed, or answered with something unreadable.
    Provider(String),
    /// The request timed out, or retrying would pass the episode's deadline.
    Timeout(String),
    /// The request cannot be served (an unknown alias, or the provider rejected it).
    InvalidRequest(String),
    /// No answer can be had now: no key, no local model, a provider shutting down.
    Unavailable(String),
    /// The answer does not fit the request: a call to an unknown tool,
    /// arguments not of the tool's schema, a missing required call, text not
    /// of the response schema.
    MalformedAnswer(String),
}

/// How a call went, for the trace.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CallStats {
    /// The provider's name in `mlrb.toml`.
    pub provider: String,
    /// The provider's model name.
    pub model: String,
    /// Requests sent, the first included.
    pub attempts: u32,
    /// HTTP statuses of the attempts (0: no answer).
    pub statuses: Vec<u16>,
    /// Waiting for a free request slot of the provider.
    pub queued_ms: f64,
    /// Waiting out 429s, 5xx and timeouts before retrying.
    pub backoff_ms: f64,
    /// Requests in flight: the provider's time.
    pub provider_ms: f64,
}

struct Provider {
    name: String,
    config: ProviderConfig,
    key: Option<Secret>,
    slots: Arc<Semaphore>,
}

impl Provider {
    fn scrub(&self, text: &str) -> String {
        match &self.key {
            Some(key) => key.scrub(text),
            None => text.to_string(),
        }
    }
}

/// One per host process: every episode's calls share its limits.
pub struct LlmClient {
    config: LlmConfig,
    http: reqwest::Client,
    providers: HashMap<String, Arc<Provider>>,
}

/// One attempt's outcome.
enum Attempt {
    Done(Result<Completion, LlmError>),
    /// Worth retrying; the wait the provider asked for, if it did.
    Retry {
        why: String,
        timed_out: bool,
        after: Option<Duration>,
    },
}

impl LlmClient {
    /// `dotenv`: `.env` files to look keys up in after the environment.
    pub fn new(config: LlmConfig, dotenv: &[PathBuf]) -> Result<Self> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("mlrb/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        let providers = config
            .providers
            .iter()
            .map(|(name, provider)| {
                let key = provider
                    .api_key_env
                    .as_deref()
                    .and_then(|env| keys::lookup(env, dotenv));
                let provider = Provider {
                    name: name.clone(),
                    config: provider.clone(),
                    key,
                    slots: Arc::new(Semaphore::new(provider.max_concurrency)),
                };
                (name.clone(), Arc::new(provider))
            })
            .collect();
        Ok(Self {
            config,
            http,
            providers,
        })
    }

    /// The configuration of model alias `alias`, if there is one.
    pub fn model(&self, alias: &str) -> Option<&ModelConfig> {
        self.config.models.get(alias)
    }

    /// Every model alias agents may ask for.
    pub fn aliases(&self) -> Vec<&str> {
        self.config.models.keys().map(String::as_str).collect()
    }

    /// Every key this client holds, for checks that none leaked.
    pub fn keys(&self) -> Vec<&Secret> {
        self.providers.values().filter_map(|p| p.key.as_ref()).collect()
    }

    /// Sends `request` to the provider of its alias, retrying as configured,
    /// never past `deadline`.
    pub async fn complete(&self, request: &LlmRequest, deadline: Instant) -> (Result<Completion, LlmError>, CallStats) {
        let mut stats = CallStats::default();
        let Some(model) = self.config.models.get(&request.model) else {
            let known = self.aliases().join(", ");
            return (
                Err(LlmError::InvalidRequest(format!(
                    "no model alias {:?} (this host has: {known})",
                    request.model
                ))),
                stats,
            );
        };
        let provider = self.providers[&model.provider].clone();
        stats.provider = provider.name.clone();
        stats.model = model.model.clone();
        if provider.config.api_key_env.is_some() && provider.key.is_none() {
            let env = provider.config.api_key_env.as_deref().unwrap_or_default();
            return (
                Err(LlmError::Unavailable(format!(
                    "provider {}: no key (set {env} in the environment or a .env file)",
                    provider.name
                ))),
                stats,
            );
        }
        let max_tokens = request.max_tokens.unwrap_or(model.max_tokens).min(model.max_tokens);
        let body = wire::encode(&provider.config, &model.model, request, max_tokens);
        let url = format!(
            "{}{}",
            provider.config.base_url.trim_end_matches('/'),
            wire::path(provider.config.api)
        );

        loop {
            stats.attempts += 1;
            let outcome = self
                .attempt(&provider, request, &url, &body, deadline, &mut stats)
                .await;
            let (why, timed_out, after) = match outcome {
                Attempt::Done(result) => return (result, stats),
                Attempt::Retry { why, timed_out, after } => (why, timed_out, after),
            };
            let backoff = Duration::from_millis(500) * 2u32.saturating_pow(stats.attempts.saturating_sub(1).min(16));
            let wait = after
                .unwrap_or(backoff)
                .min(Duration::from_secs(self.config.max_backoff_seconds));
            let out_of_time = Instant::now() + wait >= deadline;
            if stats.attempts > self.config.max_retries || out_of_time {
                let tried = format!("{} attempt(s)", stats.attempts);
                let error = if timed_out {
                    LlmError::Timeout(format!("provider {}: {why} ({tried})", provider.name))
                } else if out_of_time && stats.attempts <= self.config.max_retries {
                    LlmError::Timeout(format!(
                        "provider {}: {why}; waiting {:.1} s to retry would pass the episode's deadline",
                        provider.name,
                        wait.as_secs_f64()
                    ))
                } else {
                    LlmError::Provider(format!("provider {}: {why} ({tried})", provider.name))
                };
                return (Err(error), stats);
            }
            tracing::info!(provider = %provider.name, %why, wait_ms = wait.as_millis() as u64, "retrying an LLM request");
            let waited = Instant::now();
            tokio::time::sleep(wait).await;
            stats.backoff_ms += waited.elapsed().as_secs_f64() * 1000.0;
        }
    }

    async fn attempt(
        &self,
        provider: &Provider,
        request: &LlmRequest,
        url: &str,
        body: &serde_json::Value,
        deadline: Instant,
        stats: &mut CallStats,
    ) -> Attempt {
        let queued = Instant::now();
        let Ok(_slot) = provider.slots.acquire().await else {
            return Attempt::Done(Err(LlmError::Unavailable("the provider is shutting down".into())));
        };
        stats.queued_ms += queued.elapsed().as_secs_f64() * 1000.0;
        let limit = self
            .config
            .timeout()
            .min(deadline.saturating_duration_since(Instant::now()));
        let mut builder = self.http.post(url).json(body);
        builder = match (provider.config.api, &provider.key) {
            (Api::Openai, Some(key)) => builder.bearer_auth(key.expose()),
            (Api::Anthropic, Some(key)) => builder.header("x-api-key", key.expose()),
            (_, None) => builder,
        };
        if provider.config.api == Api::Anthropic {
            builder = builder.header("anthropic-version", "2023-06-01");
        }
        let sent = Instant::now();
        let exchange = async {
            let response = builder.send().await?;
            let status = response.status();
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            let bytes = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, retry_after, bytes))
        };
        let answered = tokio::time::timeout(limit, exchange).await;
        stats.provider_ms += sent.elapsed().as_secs_f64() * 1000.0;
        let (status, retry_after, bytes) = match answered {
            Err(_) => {
                stats.statuses.push(0);
                return Attempt::Retry {
                    why: format!("no answer within {:.0} s", limit.as_secs_f64()),
                    timed_out: true,
                    after: None,
                };
            }
            Ok(Err(error)) => {
                stats.statuses.push(0);
                // reqwest's message names the URL, never the headers.
                return Attempt::Retry {
                    why: provider.scrub(&format!("request failed: {}", without_source_chain(&error))),
                    timed_out: error.is_timeout(),
                    after: None,
                };
            }
            Ok(Ok(answer)) => answer,
        };
        stats.statuses.push(status.as_u16());
        judge(provider, request, status, retry_after, &bytes)
    }
}

/// What an answer of the provider means: a completion, a refusal, an
/// error of the request, or a failure worth retrying.
fn judge(
    provider: &Provider,
    request: &LlmRequest,
    status: reqwest::StatusCode,
    retry_after: Option<std::time::Duration>,
    bytes: &[u8],
) -> Attempt {
    let said = || provider.scrub(&wire::error_message(bytes));
    match status.as_u16() {
        200..=299 => Attempt::Done(match wire::decode(&provider.config, request, bytes) {
            Ok(Decoded::Completion(completion)) => Ok(completion),
            Ok(Decoded::Refused(why)) => Err(LlmError::Refused(provider.scrub(&why))),
            Err(malformed) => Err(LlmError::Provider(format!("provider {}: {malformed}", provider.name))),
        }),
        429 | 408 | 500..=599 => Attempt::Retry {
            why: format!("HTTP {}: {}", status.as_u16(), said()),
            timed_out: false,
            after: retry_after,
        },
        400 | 404 | 413 | 422 => Attempt::Done(Err(LlmError::InvalidRequest(format!(
            "provider {} rejected the request (HTTP {}): {}",
            provider.name,
            status.as_u16(),
            said()
        )))),
        code => Attempt::Done(Err(LlmError::Provider(format!(
            "provider {} answered HTTP {code}: {}",
            provider.name,
            said()
        )))),
    }
}

/// `Retry-After`: delay-seconds or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds >= 0.0 && seconds.is_finite()).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

fn without_source_chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("soon"), None);
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        let wait = parse_retry_after(&later).unwrap();
        assert!(
            wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&past), Some(Duration::ZERO));
    }
}
