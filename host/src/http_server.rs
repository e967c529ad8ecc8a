//! The one accept loop behind every HTTP server mlrb runs (the egress
//! proxy, the trace viewer, a cluster run's queue): each connection
//! accepted is served as HTTP/1.1 by hyper on a task of its own, with
//! upgrades (a proxy's CONNECT), until the serving task is dropped.

use std::convert::Infallible;
use std::future::Future;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite};

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

/// Serves every connection `listener` accepts with `respond`; `name` says
/// whose connection failed in the debug log. Returns only when accepting fails.
pub async fn serve<L, F, A>(listener: L, name: &'static str, respond: F) -> std::io::Result<()>
where
    L: Listener,
    F: Fn(Request<Incoming>) -> A + Clone + Send + Sync + 'static,
    A: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    loop {
        let stream = listener.next().await?;
        let peer = L::peer(&stream);
        tokio::spawn(connection(stream, peer, name, respond.clone()));
    }
}

/// Serves one connection (a TCP or Unix stream) until it closes.
async fn connection<S, F, A>(stream: S, peer: Option<std::net::SocketAddr>, name: &'static str, respond: F)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> A + Send + Sync + 'static,
    A: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
        if let Some(peer) = peer {
            request.extensions_mut().insert(Peer(peer));
        }
        let answer = respond(request);
        async move { Ok::<_, Infallible>(answer.await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    if let Err(error) = served {
        tracing::debug!(%error, "{name} connection");
    }
}
