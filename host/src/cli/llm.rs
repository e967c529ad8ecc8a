//! `mlrb llm`: the local model, the offline default for agents' LLM calls.

use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use super::say;
use crate::llm::local;

/// `mlrb llm` commands.
#[derive(Subcommand, Debug)]
pub enum LlmCommand {
    /// Serve SmolLM2-135M-Instruct on 127.0.0.1 with an OpenAI-compatible
    /// API (llama-cpp-python's server), until Ctrl-C.
    Serve {
        #[arg(long, default_value_t = 8765)]
        port: u16,
    },
}

impl LlmCommand {
    /// Serves the model in the foreground.
    pub async fn run(self) -> Result<ExitCode> {
        let Self::Serve { port } = self;
        let server = tokio::task::spawn_blocking(move || local::start(Some(port), true)).await??;
        say!(
            "serving {model} on http://127.0.0.1:{port}/v1 (OpenAI-compatible); in mlrb.toml:\n\n\
             [llm.providers.local]\napi = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\n\
             [llm.models.main]\nprovider = \"local\"\nmodel = \"{model}\"\n\nCtrl-C stops it.",
            model = local::MODEL,
            port = server.port,
        );
        tokio::signal::ctrl_c().await?;
        drop(server);
        Ok(ExitCode::SUCCESS)
    }
}
