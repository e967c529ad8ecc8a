//! A service folder served: the API on one listener and the runner beside
//! it, until interrupted; the runner's bench then stops at its episodes'
//! current step and the next start resumes it.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use super::Service;
use super::api::Api;
use super::limiter::{Limiter, Rate};

/// How the service is served.
pub struct Options {
    /// Where the API listens (`127.0.0.1:8787`; port 0 picks a free one).
    pub listen: String,
    /// Requests each client address may make.
    pub rate: Rate,
    /// Where the agent engine caches compiled components.
    pub cache_dir: std::path::PathBuf,
    /// The connections' caps and timeouts.
    pub connections: crate::http_server::Settings,
}

/// Serves the service folder `dir` until `interrupt` resolves; `ready`
/// hears the address it listens on.
pub async fn serve(
    dir: &Path,
    options: Options,
    ready: impl FnOnce(std::net::SocketAddr),
    interrupt: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let service = Arc::new(Service::open(dir, &options.cache_dir)?);
    let listener = tokio::net::TcpListener::bind(&options.listen)
        .await
        .with_context(|| format!("--listen {}: cannot listen there", options.listen))?;
    ready(listener.local_addr()?);
    let api = Arc::new(Api {
        service: service.clone(),
        limiter: Limiter::new(options.rate),
        connections: options.connections,
        uploading: Default::default(),
    });
    let serving = tokio::spawn(api.serve(listener));
    let stop = CancellationToken::new();
    // The runner stays on this task: a bench's future is not `Send`.
    let running = super::runner::run(service, stop.clone());
    tokio::pin!(running, interrupt);
    let ended = tokio::select! {
        _ = &mut interrupt => {
            stop.cancel();
            (&mut running).await
        }
        ended = &mut running => ended.context("the runner stopped"),
    };
    serving.abort();
    ended
}
