//! The submitter's side of the service's API (`mlrb submit`, `mlrb
//! submissions list/status/download`): one request each, the service's
//! refusal passed on in its own words.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

/// The service, as a submitter reaches it.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    /// A client of the service at `base` (`http://host:port`) with `token`.
    pub fn new(base: &str, token: &str) -> Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder().build()?,
            base: base.trim_end_matches('/').to_string(),
            token: token.trim().to_string(),
        })
    }

    /// Uploads the component at `path` to `benchmark` (`name/version`)
    /// under the name `agent`; the submission as recorded.
    pub async fn submit(&self, path: &Path, benchmark: &str, agent: &str) -> Result<Value> {
        let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
        let url = format!("{}/v1/submissions", self.base);
        let request = self
            .http
            .post(&url)
            .query(&[("benchmark", benchmark), ("agent", agent)])
            .header(reqwest::header::CONTENT_TYPE, "application/wasm")
            .body(bytes);
        self.send(request, &url).await
    }

    /// The submissions the token may see.
    pub async fn list(&self) -> Result<Value> {
        self.get("/v1/submissions").await
    }

    /// One submission's status and results.
    pub async fn status(&self, id: i64) -> Result<Value> {
        self.get(&format!("/v1/submissions/{id}")).await
    }

    /// Withdraws submission `id`.
    pub async fn withdraw(&self, id: i64) -> Result<Value> {
        let url = format!("{}/v1/submissions/{id}/withdraw", self.base);
        self.send(self.http.post(&url), &url).await
    }

    /// Writes submission `id`'s records (a tar archive) to `out`; its size.
    pub async fn download(&self, id: i64, out: &Path) -> Result<u64> {
        let url = format!("{}/v1/submissions/{id}/records", self.base);
        let answer = self.http.get(&url).bearer_auth(&self.token).send().await?;
        let answer = refused(answer, &url).await?;
        let bytes = answer.bytes().await?;
        std::fs::write(out, &bytes).with_context(|| format!("{}: cannot write", out.display()))?;
        Ok(bytes.len() as u64)
    }

    async fn get(&self, path: &str) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        self.send(self.http.get(&url), &url).await
    }

    async fn send(&self, request: reqwest::RequestBuilder, url: &str) -> Result<Value> {
        let answer = request
            .bearer_auth(&self.token)
            .send()
            .await
            .with_context(|| format!("{url}: cannot reach the service"))?;
        let answer = refused(answer, url).await?;
        answer
            .json()
            .await
            .with_context(|| format!("{url}: not the answer expected"))
    }
}

/// The answer, or an error with the service's reason.
async fn refused(answer: reqwest::Response, url: &str) -> Result<reqwest::Response> {
    if answer.status().is_success() {
        return Ok(answer);
    }
    let status = answer.status();
    let text = answer.text().await.unwrap_or_default();
    let why = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or(text);
    bail!("{url}: {status}: {why}")
}
