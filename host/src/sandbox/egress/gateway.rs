//! An episode's way out: its egress proxy listening on a Unix socket in a
//! folder of its own, which the sandbox binds into the script's otherwise
//! empty network namespace (see `forwarder.py`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};

use super::AllowList;
use super::proxy::{Connection, Proxy, Resolver};
use crate::network::Tally;

/// Where the proxy's socket appears inside a sandbox.
pub const GUEST_SOCKET: &str = "/run/mlrb-egress.sock";

/// Where a sandboxed script finds the proxy: the forwarder listens here.
pub const GUEST_PROXY: &str = "127.0.0.1:3128";

/// The forwarder started inside a sandbox (`python3 -I -S -c`): a TCP port
/// on the sandbox's loopback relayed to the proxy's socket.
pub const FORWARDER: &str = include_str!("forwarder.py");

/// A running egress proxy on a Unix socket.
pub struct Gateway {
    dir: tempfile::TempDir,
    proxy: Arc<Proxy>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
    /// Connections already handed out by [`Gateway::take_new`].
    taken: AtomicUsize,
}

impl Gateway {
    /// Starts a proxy for `grant` (names resolved as the organiser set),
    /// counting against the episode's `tally`.
    pub fn start(grant: AllowList, tally: Arc<Tally>) -> Result<Self> {
        Self::with_resolver(grant, Resolver::from_environment()?, tally)
    }

    /// Starts a proxy for `grant` resolving with `resolver`.
    pub fn with_resolver(grant: AllowList, resolver: Resolver, tally: Arc<Tally>) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("mlrb-egress-")
            .tempdir()
            .context("making a folder for the egress proxy's socket")?;
        let path = dir.path().join("egress.sock");
        let listener =
            tokio::net::UnixListener::bind(&path).with_context(|| format!("listening on {}", path.display()))?;
        // The sandbox user (another uid under Docker) must be able to
        // connect; the folder itself stays the host's.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))?;
        let proxy = Proxy::new(grant, resolver, tally);
        let served = tokio::spawn(proxy.clone().serve(listener));
        Ok(Self {
            dir,
            proxy,
            served,
            taken: AtomicUsize::new(0),
        })
    }

    /// The proxy's socket on the host.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("egress.sock")
    }

    /// The folder the socket lives in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Every connection so far.
    pub fn connections(&self) -> Vec<Connection> {
        self.proxy.connections()
    }

    /// Waits (at most `within`) until no connection is open.
    pub async fn settle(&self, within: std::time::Duration) {
        let until = tokio::time::Instant::now() + within;
        while self.proxy.open() > 0 && tokio::time::Instant::now() < until {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// The connections that ended since the last call.
    pub fn take_new(&self) -> Vec<Connection> {
        let all = self.proxy.connections();
        let from = self.taken.swap(all.len(), Ordering::Relaxed).min(all.len());
        all[from..].to_vec()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.served.abort();
    }
}

/// The environment that points a script's HTTP clients at the forwarder
/// (curl, pip, requests, urllib and huggingface_hub all read it).
pub fn proxy_environment() -> Vec<(String, String)> {
    let url = format!("http://{GUEST_PROXY}");
    [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .into_iter()
    .map(|k| (k.to_string(), url.clone()))
    .chain([
        ("NO_PROXY".to_string(), String::new()),
        ("no_proxy".to_string(), String::new()),
    ])
    .collect()
}
