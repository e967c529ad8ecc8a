//! The egress proxy of one episode: HTTP (absolute-form requests) and
//! HTTPS (CONNECT tunnels, never decrypted) to the destinations its grant
//! allows, names resolved here (a script gets no DNS of its own), the
//! episode's byte and connection caps enforced, a stalled connection timed
//! out, and every connection recorded: where, how much each way, allowed or
//! not, and why it was refused or ended.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{AllowList, refusal};
use crate::http_server::Listener;
use crate::network::Tally;

/// How long a connection to a destination may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub use crate::network::Connection;

/// Where names resolve: the names an organiser mapped (a mirror inside the
/// cluster, a test server), else the system's resolver, whose answers must
/// be public addresses (no loopback, link-local such as cloud metadata,
/// private ranges or other episodes).
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    /// Names and the address each goes to.
    pub hosts: BTreeMap<String, IpAddr>,
    /// Whether names not mapped are looked up by the system.
    pub system: bool,
}

/// The variable an organiser maps names with (`name=address,...`): an
/// internal mirror, or a test's server.
pub const HOSTS_VARIABLE: &str = "MLRB_EGRESS_HOSTS";

impl Resolver {
    /// The system's resolver and the names `MLRB_EGRESS_HOSTS` maps.
    pub fn from_environment() -> anyhow::Result<Self> {
        let mut hosts = BTreeMap::new();
        let text = std::env::var(HOSTS_VARIABLE).unwrap_or_default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let parsed = pair
                .split_once('=')
                .and_then(|(name, ip)| Some((super::canonical(name.trim()), ip.trim().parse::<IpAddr>().ok()?)));
            let Some((name, ip)) = parsed else {
                anyhow::bail!("{HOSTS_VARIABLE}: `{pair}` is not name=address (e.g. mirror.internal=10.0.0.5)");
            };
            hosts.insert(name, ip);
        }
        Ok(Self { hosts, system: true })
    }

    /// Where `host:port` goes. An address not mapped by the organiser must
    /// be public, unless a rule names it exactly (`named`).
    pub async fn resolve(&self, host: &str, port: u16, named: bool) -> Result<SocketAddr, String> {
        let host = super::canonical(host);
        if let Some(ip) = self.hosts.get(&host) {
            return Ok(SocketAddr::new(*ip, port));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return match named || public(ip) {
                true => Ok(SocketAddr::new(ip, port)),
                false => Err(format!(
                    "{ip} is an address no episode may reach unless the grant names it"
                )),
            };
        }
        if !self.system {
            return Err(format!("{host} does not resolve here"));
        }
        let mut found = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| format!("{host} does not resolve: {e}"))?;
        let address = found.next().ok_or_else(|| format!("{host} does not resolve"))?;
        if !public(address.ip()) {
            return Err(format!(
                "{host} resolves to {}, an address no episode may reach",
                address.ip()
            ));
        }
        Ok(address)
    }
}

/// Whether an address is on the public internet.
fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.octets()[0] == 100 && (64..128).contains(&v4.octets()[1]))
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6.to_ipv4_mapped().is_some_and(|v4| !public(IpAddr::V4(v4))))
        }
    }
}

/// An episode's proxy: its grant, resolver, totals and connection log.
pub struct Proxy {
    grant: AllowList,
    resolver: Resolver,
    /// The episode's totals (its agent's wasi:http counts in them too).
    tally: Arc<Tally>,
    /// Tunnels not yet ended.
    open: AtomicU32,
    log: Mutex<Vec<Connection>>,
}

type Answer = Response<Full<Bytes>>;

impl Proxy {
    /// A proxy enforcing `grant`, resolving with `resolver`, counting
    /// against the episode's `tally`.
    pub fn new(grant: AllowList, resolver: Resolver, tally: Arc<Tally>) -> Arc<Self> {
        Arc::new(Self {
            grant,
            resolver,
            tally,
            open: AtomicU32::new(0),
            log: Mutex::new(Vec::new()),
        })
    }

    /// Tunnels open now.
    pub fn open(&self) -> u32 {
        self.open.load(Ordering::Relaxed)
    }

    /// Every connection so far, in the order they ended.
    pub fn connections(&self) -> Vec<Connection> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn record(&self, connection: Connection) {
        tracing::debug!(?connection, "egress");
        self.log.lock().unwrap_or_else(|e| e.into_inner()).push(connection);
    }

    /// Serves clients on `listener` (TCP, or the Unix socket that is a
    /// sandbox's only way out) until the task is dropped.
    pub async fn serve(self: Arc<Self>, listener: impl Listener) -> std::io::Result<()> {
        let settings = crate::http_server::Settings::unbounded();
        crate::http_server::serve(listener, "egress client", settings, move |request| {
            self.clone().handle(request)
        })
        .await
    }

    async fn handle(self: Arc<Self>, request: Request<Incoming>) -> Answer {
        let method = request.method().to_string();
        let target = match destination(&request) {
            Ok(target) => target,
            Err(why) => return text(StatusCode::BAD_REQUEST, &why),
        };
        let asked = format!("{}:{}", target.0, target.1);
        let refuse = |status: StatusCode, why: String, address: Option<String>| {
            self.record(Connection {
                destination: asked.clone(),
                method: method.clone(),
                address,
                allowed: false,
                reason: Some(why.clone()),
                bytes_out: 0,
                bytes_in: 0,
                ms: 0,
            });
            text(status, &why)
        };
        let plain = (request.method() != Method::CONNECT).then_some(method.as_str());
        if let Some(why) = refusal(&self.grant, &target.0, target.1, plain) {
            return refuse(StatusCode::FORBIDDEN, why, None);
        }
        let (_, _, most, _) = self.grant.caps();
        if !self.tally.open_one(most) {
            return refuse(
                StatusCode::FORBIDDEN,
                format!("the episode's cap of {most} connections was reached"),
                None,
            );
        }
        let named = self.grant.allow.iter().any(|rule| rule.names(&target.0));
        let address = match self.resolver.resolve(&target.0, target.1, named).await {
            Ok(address) => address,
            Err(why) => return refuse(StatusCode::BAD_GATEWAY, why, None),
        };
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(address)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                return refuse(
                    StatusCode::BAD_GATEWAY,
                    format!("{address}: {e}"),
                    Some(address.to_string()),
                );
            }
            Err(_) => {
                return refuse(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!("{address}: no answer"),
                    Some(address.to_string()),
                );
            }
        };
        let opened = Opened {
            destination: asked,
            method,
            address,
            started: Instant::now(),
        };
        match request.method() == Method::CONNECT {
            true => self.tunnel(request, stream, opened),
            false => self.forward(request, stream, opened).await,
        }
    }

    /// Answers a CONNECT and pumps bytes both ways once the client upgrades.
    fn tunnel(self: Arc<Self>, request: Request<Incoming>, stream: tokio::net::TcpStream, opened: Opened) -> Answer {
        self.open.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let (ended, out, into) = match hyper::upgrade::on(request).await {
                Ok(upgraded) => self.pump(hyper_util::rt::TokioIo::new(upgraded), stream).await,
                Err(error) => (Some(format!("the client never took the tunnel: {error}")), 0, 0),
            };
            self.record(opened.ended(ended, out, into));
            self.open.fetch_sub(1, Ordering::Relaxed);
        });
        Response::new(Full::new(Bytes::new()))
    }

    /// Sends a plain HTTP request on to its destination and its answer back.
    async fn forward(&self, request: Request<Incoming>, stream: tokio::net::TcpStream, opened: Opened) -> Answer {
        let (egress, ingress, _, _) = self.grant.caps();
        let (mut parts, body) = request.into_parts();
        let left_out = egress.saturating_sub(self.tally.out.load(Ordering::Relaxed));
        let body = match http_body_util::Limited::new(body, left_out as usize).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => {
                return self.cut(
                    opened,
                    format!("the episode's egress cap of {} MiB was reached", egress >> 20),
                );
            }
        };
        self.tally.out.fetch_add(body.len() as u64, Ordering::Relaxed);
        let path = parts.uri.path_and_query().map_or("/".to_string(), |p| p.to_string());
        parts.uri = path.parse().unwrap_or_default();
        for hop in [
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
            "te",
            "upgrade",
        ] {
            parts.headers.remove(hop);
        }
        let out = body.len() as u64;
        let answer = async {
            let io = hyper_util::rt::TokioIo::new(stream);
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(connection);
            sender.send_request(Request::from_parts(parts, Full::new(body))).await
        };
        let response = match answer.await {
            Ok(response) => response,
            Err(error) => return self.cut(opened, format!("the destination failed: {error}")),
        };
        let (parts, body) = response.into_parts();
        let left_in = ingress.saturating_sub(self.tally.into.load(Ordering::Relaxed));
        let Ok(body) = http_body_util::Limited::new(body, left_in as usize).collect().await else {
            return self.cut(
                opened,
                format!("the episode's ingress cap of {} MiB was reached", ingress >> 20),
            );
        };
        let body = body.to_bytes();
        self.tally.into.fetch_add(body.len() as u64, Ordering::Relaxed);
        self.record(opened.ended(None, out, body.len() as u64));
        Response::from_parts(parts, Full::new(body))
    }

    /// Ends an allowed connection early, with its reason recorded.
    fn cut(&self, opened: Opened, why: String) -> Answer {
        self.record(opened.ended(Some(why.clone()), 0, 0));
        text(StatusCode::BAD_GATEWAY, &why)
    }

    /// Copies both ways until both sides are done, a cap is reached or the
    /// connection stalls; why it ended early, and the bytes each way.
    async fn pump(
        &self,
        client: impl AsyncRead + AsyncWrite + Unpin,
        server: tokio::net::TcpStream,
    ) -> (Option<String>, u64, u64) {
        let (egress, ingress, _, idle) = self.grant.caps();
        let idle = Duration::from_secs(idle);
        let (client_read, client_write) = tokio::io::split(client);
        let (server_read, server_write) = server.into_split();
        let (out, into) = (AtomicU64::new(0), AtomicU64::new(0));
        let ended = {
            let up = copy(
                client_read,
                server_write,
                Flow {
                    total: &self.tally.out,
                    cap: egress,
                    mine: &out,
                    idle,
                    name: "egress",
                },
            );
            let down = copy(
                server_read,
                client_write,
                Flow {
                    total: &self.tally.into,
                    cap: ingress,
                    mine: &into,
                    idle,
                    name: "ingress",
                },
            );
            tokio::pin!(up, down);
            // Both directions run until both ended; a failing one ends both.
            tokio::select! {
                first = &mut up => match first { Ok(()) => down.await.err(), Err(why) => Some(why) },
                first = &mut down => match first { Ok(()) => up.await.err(), Err(why) => Some(why) },
            }
        };
        (ended, out.load(Ordering::Relaxed), into.load(Ordering::Relaxed))
    }
}

/// A connection that was allowed and opened.
struct Opened {
    destination: String,
    method: String,
    address: SocketAddr,
    started: Instant,
}

impl Opened {
    fn ended(self, reason: Option<String>, bytes_out: u64, bytes_in: u64) -> Connection {
        Connection {
            destination: self.destination,
            method: self.method,
            address: Some(self.address.to_string()),
            allowed: true,
            reason,
            bytes_out,
            bytes_in,
            ms: self.started.elapsed().as_millis() as u64,
        }
    }
}

/// One direction of a tunnel: the episode's total for it, its cap, this
/// connection's count, and how long it may stall.
struct Flow<'a> {
    total: &'a AtomicU64,
    cap: u64,
    mine: &'a AtomicU64,
    idle: Duration,
    name: &'static str,
}

async fn copy(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin, flow: Flow<'_>) -> Result<(), String> {
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        let n = match tokio::time::timeout(flow.idle, from.read(&mut buffer)).await {
            Err(_) => return Err(format!("no byte for {} s: closed as stalled", flow.idle.as_secs())),
            Ok(Err(error)) => return Err(error.to_string()),
            Ok(Ok(0)) => {
                let _ = to.shutdown().await;
                return Ok(());
            }
            Ok(Ok(n)) => n,
        };
        if flow.total.fetch_add(n as u64, Ordering::Relaxed) + n as u64 > flow.cap {
            return Err(format!(
                "the episode's {} cap of {} MiB was reached",
                flow.name,
                flow.cap >> 20
            ));
        }
        flow.mine.fetch_add(n as u64, Ordering::Relaxed);
        to.write_all(&buffer[..n]).await.map_err(|e| e.to_string())?;
    }
}

/// The host and port a proxy request is for: CONNECT's authority, or an
/// absolute-form `http://` URI's.
fn destination(request: &Request<Incoming>) -> Result<(String, u16), String> {
    let uri = request.uri();
    let Some(authority) = uri.authority() else {
        return Err("this is an egress proxy: send CONNECT host:port or an absolute http:// URI".into());
    };
    if request.method() != Method::CONNECT && uri.scheme_str() != Some("http") {
        return Err(format!("{uri}: only http:// is forwarded; use CONNECT for https"));
    }
    let default = (request.method() != Method::CONNECT).then_some(80);
    let Some(port) = authority.port_u16().or(default) else {
        return Err(format!("CONNECT {authority}: a port is needed"));
    };
    Ok((
        authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
    ))
}

/// A refusal, closing the client's connection: bytes it sent after a
/// refused CONNECT must not be read as requests of their own.
fn text(status: StatusCode, why: &str) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from(format!("{why}\n"))));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    answer
}

#[cfg(test)]
mod tests;
