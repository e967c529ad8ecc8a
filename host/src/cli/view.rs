//! `mlrb view`: the trace viewer, on loopback.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use super::say;

/// Options of `mlrb view`.
#[derive(Args, Debug)]
pub struct ViewArgs {
    /// A run directory or one episode directory.
    dir: PathBuf,
    /// The port on 127.0.0.1 [default: any free one].
    #[arg(long, default_value_t = 0)]
    port: u16,
}

impl ViewArgs {
    /// Serves the viewer until Ctrl-C.
    pub async fn run(self) -> Result<ExitCode> {
        let viewer = crate::view::Viewer::new(&self.dir)?;
        // Loopback only: traces may hold what an organiser must not publish.
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .with_context(|| format!("listening on 127.0.0.1:{}", self.port))?;
        let address = listener.local_addr()?;
        say!(
            "mlrb view: serving {} at http://{address}/ (Ctrl-C stops)",
            self.dir.display()
        );
        use std::io::Write;
        std::io::stdout().flush()?;
        tokio::select! {
            served = viewer.serve(listener) => served?,
            _ = tokio::signal::ctrl_c() => {}
        }
        Ok(ExitCode::SUCCESS)
    }
}
