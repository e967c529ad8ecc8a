//! `mlrb submit`: upload an agent component to a submission service for a
//! published benchmark; prints the submission as recorded (or the
//! service's reason for refusing it; `--json`: the service's answer) and
//! exits non-zero when refused.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use super::say;
use super::submissions::Remote;

/// Options of `mlrb submit`.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  mlrb submit target/wasm32-wasip2/release/my_agent.wasm --benchmark cpu-mini/2026-11 \\\n      --server https://bench.example.org --token-file ~/.mlrb-token"
)]
pub struct SubmitArgs {
    /// The agent component (`.wasm`).
    agent: PathBuf,
    /// The benchmark and version, `NAME/VERSION`.
    #[arg(long, value_name = "NAME/VERSION")]
    benchmark: String,
    /// The name the leaderboard shows for it [default: the file's stem].
    #[arg(long)]
    name: Option<String>,
    #[command(flatten)]
    remote: Remote,
    /// Print the service's answer as JSON.
    #[arg(long)]
    json: bool,
}

impl SubmitArgs {
    /// Uploads; prints the submission.
    pub async fn run(self) -> Result<ExitCode> {
        let name = self.name.unwrap_or_else(|| crate::episode::agent_name(&self.agent));
        let submission = self
            .remote
            .client()?
            .submit(&self.agent, &self.benchmark, &name)
            .await?;
        match self.json {
            true => say!("{}", serde_json::to_string_pretty(&submission)?),
            false => say!("{}", super::submission_text::submitted(&submission)),
        }
        Ok(ExitCode::SUCCESS)
    }
}
