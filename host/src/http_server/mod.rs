//! The one accept loop behind every HTTP server mlrb runs (the egress
//! proxy, the trace viewer, a cluster run's queue, the submission
//! service): each connection accepted is served as HTTP/1.1 by hyper on a
//! task of its own, with upgrades (a proxy's CONNECT), until the serving
//! task is dropped. No client can stop it serving: a failed accept (out of
//! descriptors, a connection aborted) is logged and survived, a request
//! head must arrive within a timeout, an idle connection is closed after
//! another, and connections are capped per address and in total
//! (`connections`), idle ones shed first.

pub mod connections;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite};

use connections::{Caps, Slot, Table};

/// The Content-Security-Policy of every page mlrb serves: rendered on the
/// server, styles inline, no script, nothing fetched from elsewhere, forms
/// only to the page's own server, never framed.
pub const PAGE_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// How a server treats its clients.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long a request's head may take to arrive, from the connection's
    /// start or the previous answer (hyper's `header_read_timeout`, which
    /// also closes a kept-alive connection that long without a request).
    pub header_timeout: Option<Duration>,
    /// How long a connection may stay with no request being answered.
    pub idle_timeout: Option<Duration>,
    /// How long a request's body may take to arrive, from its head on
    /// (read through [`frame`]).
    pub body_timeout: Option<Duration>,
    /// Connections held at once.
    pub caps: Caps,
    /// The Content-Security-Policy header of every HTML answer that has none.
    pub page_policy: Option<&'static str>,
}

impl Settings {
    /// For a server strangers reach (the submission service).
    pub fn public() -> Self {
        Self {
            header_timeout: Some(Duration::from_secs(10)),
            idle_timeout: Some(Duration::from_secs(60)),
            body_timeout: Some(Duration::from_secs(300)),
            caps: Caps {
                per_address: 32,
                total: 1024,
            },
            page_policy: Some(PAGE_POLICY),
        }
    }

    /// For a cluster run's queue: workers of many nodes, each holding a
    /// few connections, uploads as slow as their network.
    pub fn queue() -> Self {
        Self {
            // Both longer than a worker's HTTP client keeps a pooled
            // connection (90 s): hyper's header timeout also runs while a
            // kept-alive connection waits for its next request.
            header_timeout: Some(Duration::from_secs(120)),
            idle_timeout: Some(Duration::from_secs(120)),
            body_timeout: None,
            caps: Caps {
                per_address: 256,
                total: 4096,
            },
            page_policy: None,
        }
    }

    /// For a page served on loopback to its user (`mlrb view`).
    pub fn local() -> Self {
        Self {
            header_timeout: Some(Duration::from_secs(30)),
            idle_timeout: Some(Duration::from_secs(120)),
            body_timeout: Some(Duration::from_secs(60)),
            caps: Caps {
                per_address: 256,
                total: 1024,
            },
            page_policy: Some(PAGE_POLICY),
        }
    }

    /// No timeouts and no caps: an episode's egress proxy, whose only
    /// clients are the episode's own scripts under its own caps.
    pub fn unbounded() -> Self {
        Self {
            header_timeout: None,
            idle_timeout: None,
            body_timeout: None,
            caps: Caps {
                per_address: usize::MAX,
                total: usize::MAX,
            },
            page_policy: None,
        }
    }
}

/// A listener whose connections are served: TCP or a Unix socket.
pub trait Listener: Send + 'static {
    /// One accepted connection.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next connection.
    fn next(&self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
    /// Who is on the other end of `stream`, where that is an address.
    fn peer(_stream: &Self::Stream) -> Option<std::net::SocketAddr> {
        None
    }
}

/// The address a request came from (a TCP connection's peer), as a
/// request extension.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::SocketAddr);

/// When a request's body must have arrived, as a request extension.
#[derive(Debug, Clone, Copy)]
pub struct BodyDeadline(pub Instant, pub Duration);

impl Listener for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn next(&self) -> std::io::Result<Self::Stream> {
        let (stream, _) = self.accept().await?;
        // Small requests and answers: no Nagle delay on either.
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
    fn peer(stream: &Self::Stream) -> Option<std::net::SocketAddr> {
        stream.peer_addr().ok()
    }
}

impl Listener for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn next(&self) -> std::io::Result<Self::Stream> {
        Ok(self.accept().await?.0)
    }
}

/// Serves every connection `listener` accepts with `respond` under
/// `settings`; `name` says whose server it is in the log. Never returns.
pub async fn serve<L, F, A>(listener: L, name: &'static str, settings: Settings, respond: F) -> std::io::Result<()>
where
    L: Listener,
    F: Fn(Request<Incoming>) -> A + Clone + Send + Sync + 'static,
    A: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let table = Table::new(settings.caps);
    let settings = Arc::new(settings);
    let mut failing = Failing::default();
    loop {
        let stream = match listener.next().await {
            Ok(stream) => stream,
            Err(error) => {
                failing.survive(&error, &table, name).await;
                continue;
            }
        };
        (failing.pause, failing.in_a_row) = (Duration::ZERO, 0);
        let peer = L::peer(&stream);
        // Over a cap with every connection busy: closed at once, unread.
        let Some(slot) = table.admit(peer.map(|p| p.ip())) else {
            continue;
        };
        tokio::spawn(connection(stream, peer, name, slot, settings.clone(), respond.clone()));
    }
}

/// Accept errors in a row: how many, how long to pause, and when one was
/// last logged.
#[derive(Default)]
struct Failing {
    in_a_row: u32,
    pause: Duration,
    logged: Option<Instant>,
    unlogged: u64,
}

impl Failing {
    /// Survives a failed accept. Out of descriptors (or memory), the
    /// oldest idle connection is shed and, when none is, the loop pauses a
    /// little longer each time (up to 200 ms); anything else (a connection
    /// aborted) concerned only the one connection, unless it goes on.
    /// Logged at most once a second.
    async fn survive(&mut self, error: &std::io::Error, table: &Table, name: &str) {
        let starved = matches!(
            error.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
        );
        self.unlogged += 1;
        if self.logged.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            let held = table.held();
            let failed = self.unlogged;
            tracing::warn!(%error, held, failed, "{name}: accepting a connection failed; serving on");
            (self.logged, self.unlogged) = (Some(Instant::now()), 0);
        }
        self.in_a_row += 1;
        if !starved && self.in_a_row < 16 {
            return;
        }
        if starved && table.shed_oldest_idle() {
            // Let the shed connection's task close its socket.
            tokio::time::sleep(Duration::from_millis(1)).await;
            return;
        }
        self.pause = (self.pause * 2).clamp(Duration::from_millis(5), Duration::from_millis(200));
        tokio::time::sleep(self.pause).await;
    }
}

/// Serves one connection (a TCP or Unix stream) until it closes, is shed,
/// or stays idle too long.
async fn connection<S, F, A>(
    stream: S,
    peer: Option<std::net::SocketAddr>,
    name: &'static str,
    slot: Slot,
    settings: Arc<Settings>,
    respond: F,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> A + Send + Sync + 'static,
    A: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let slot = Arc::new(slot);
    let answering = slot.clone();
    let (policy, body_timeout) = (settings.page_policy, settings.body_timeout);
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        if let Some(peer) = peer {
            request.extensions_mut().insert(Peer(peer));
        }
        if let Some(timeout) = body_timeout {
            request
                .extensions_mut()
                .insert(BodyDeadline(Instant::now() + timeout, timeout));
        }
        let busy = Busy::of(&answering);
        let answer = respond(request);
        async move {
            let mut answer = answer.await;
            drop(busy);
            if let Some(policy) = policy {
                with_policy(&mut answer, policy);
            }
            Ok::<_, Infallible>(answer)
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    if let Some(timeout) = settings.header_timeout {
        http.timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(timeout);
    }
    let served = http
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .with_upgrades();
    tokio::pin!(served);
    let ended = loop {
        let idle_until = match (slot.idle_since(), settings.idle_timeout) {
            (Some(since), Some(timeout)) => since + timeout,
            // Busy, or no idle timeout: look again later.
            _ => Instant::now() + settings.idle_timeout.unwrap_or(Duration::from_secs(3600)),
        };
        tokio::select! {
            served = &mut served => break served.err().map(|e| e.to_string()),
            () = slot.shed() => break Some("shed for another connection".into()),
            () = tokio::time::sleep_until(idle_until.into()) => {
                if slot.idle_since().is_some_and(|since| settings.idle_timeout.is_some_and(|t| since.elapsed() >= t)) {
                    break Some("idle too long".into());
                }
            }
        }
    };
    if let Some(error) = ended {
        tracing::debug!(%error, "{name} connection");
    }
}

/// A request being answered: its connection is not idle meanwhile.
struct Busy(Arc<Slot>);

impl Busy {
    fn of(slot: &Arc<Slot>) -> Self {
        slot.busy();
        Self(slot.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.idle();
    }
}

/// Gives an HTML answer `policy` as its Content-Security-Policy header,
/// unless it has one.
fn with_policy(answer: &mut Response<Full<Bytes>>, policy: &'static str) {
    let html = answer
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/html"));
    let headers = answer.headers_mut();
    if html && !headers.contains_key(hyper::header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            hyper::header::CONTENT_SECURITY_POLICY,
            hyper::header::HeaderValue::from_static(policy),
        );
        headers.insert(
            hyper::header::X_CONTENT_TYPE_OPTIONS,
            hyper::header::HeaderValue::from_static("nosniff"),
        );
    }
}

/// Why a request's body could not be read.
#[derive(Debug)]
pub enum BodyError {
    /// It did not arrive within the server's body timeout.
    Late(Duration),
    /// The connection broke off.
    Broken(hyper::Error),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Late(timeout) => write!(
                f,
                "the body did not arrive within {} s: send it faster, or in smaller pieces",
                timeout.as_secs()
            ),
            Self::Broken(error) => write!(f, "the body broke off: {error}"),
        }
    }
}

/// The next frame of a request's body, by its `deadline` (the request's
/// [`BodyDeadline`], if the server set one).
pub async fn frame(body: &mut Incoming, deadline: Option<BodyDeadline>) -> Result<Option<Frame<Bytes>>, BodyError> {
    let next = body.frame();
    let frame = match deadline {
        Some(BodyDeadline(at, timeout)) => tokio::time::timeout_at(at.into(), next)
            .await
            .map_err(|_| BodyError::Late(timeout))?,
        None => next.await,
    };
    frame.transpose().map_err(BodyError::Broken)
}
