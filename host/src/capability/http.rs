//! The WIT `wasi:http` interfaces (`types` and `outgoing-handler`): an
//! agent's own HTTP requests, under the episode's network grant. Every
//! agent links them, so a component that imports wasi:http instantiates;
//! a request goes out only when `Limits.network` allows its host, port and
//! method, its name resolves to a public address (or to one the organiser
//! mapped, or an address a rule names), and the episode's request budget
//! and the grant's byte and connection caps have room. Otherwise it fails
//! with `http-request-denied` (or the cap's error) and the reason is
//! recorded. Redirects are returned as they are, never followed.
//!
//! Every request is recorded with its response, as an `http exchange`
//! line: method, URL, both sides' headers and bodies (UTF-8 text, else
//! base64), byte counts, duration, and whether it was allowed or why not.
//! A response completes after `handle` returns (the agent streams its body
//! later, from tasks that cannot reach the recorder), so finished exchanges
//! are queued ([`Exchanges`]) and the recorder writes them before its next
//! line and at the episode's end. A replay answers each request from the
//! exchange recorded under its number (`n`, in the order the agent sent
//! them), touching no network; a request that differs from the recorded
//! one fails and marks the replay diverged.
//!
//! The grant's byte and connection caps count the agent's own requests
//! together (the scripts' egress proxy keeps totals of its own).
//!
//! Requests are sent with hyper over a connection this module opens to the
//! address the egress resolver chose, TLS by rustls (the ring provider and
//! webpki roots reqwest already brings), rather than with reqwest: one
//! connection per request and no pool, so the connection cap counts what it
//! says; bytes counted on the socket itself; no header, decompression,
//! redirect or proxy added behind the agent's back.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::{HeaderMap, Request, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use super::AgentState;
use super::observed::Observed;
use super::recorder::Recorder;
use crate::limits::Limits;
use crate::network::{Network, Tally, refusal};
use crate::sandbox::egress::proxy::Resolver;
use crate::sandbox::egress::trust;

/// How long a connection may take to open (the egress proxy's too).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest request body an agent may send: it is held whole, to be
/// recorded (and hashed, for a replay to compare).
const MAX_REQUEST_BODY: usize = 16 << 20;

/// Requests past the budget recorded one by one; those after them are
/// refused unrecorded (an agent looping on refusals must not fill the
/// host's memory), and a replay refuses them alike.
const RECORDED_PAST_BUDGET: u64 = 10;

/// Headers about one connection, never passed on either way.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Finished exchanges waiting for the recorder to write them: the http
/// tasks push, the recorder drains (its trace is not theirs to borrow).
#[derive(Clone, Default)]
pub struct Exchanges(Arc<Mutex<Vec<Value>>>);

impl Exchanges {
    fn push(&self, exchange: Value) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(exchange);
    }

    /// Every exchange finished since the last call, in the order they finished.
    pub fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The wasi:http interfaces' state: wasmtime-wasi-http's context, and the
/// hooks that send (or replay) each request.
pub struct HttpState {
    ctx: WasiHttpCtx,
    hooks: Hooks,
}

/// What `send_request` sees: the episode's shared http state, and whether
/// requests are answered from a recording now (a fork goes live midway).
struct Hooks {
    shared: Arc<Shared>,
    replaying: bool,
}

/// What the request tasks share with the state (they outlive any borrow).
struct Shared {
    network: Network,
    /// `Limits.http_requests`.
    requests: u32,
    /// `Limits.http_response_bytes`.
    response_bytes: u64,
    /// The organiser's name map and the system's resolver, or why the map
    /// does not parse (every request is refused with it).
    resolver: Result<Resolver, String>,
    /// Requests sent so far: the last one's number.
    sent: AtomicU64,
    /// Bytes sent and received, connections opened: the episode's, its
    /// scripts' egress proxy counting in the same tally.
    tally: Arc<Tally>,
    /// Exchanges begun and not yet queued for the recorder.
    in_flight: AtomicUsize,
    settled: tokio::sync::Notify,
    exchanges: Exchanges,
    /// The recorded exchanges by number, in a replay (or why one is unreadable).
    recorded: BTreeMap<u64, Result<Exchange, String>>,
    /// Where a replay's divergence is told (the next call ends the episode).
    observed: Observed,
}

impl Shared {
    fn new(
        limits: &Limits,
        resolver: Result<Resolver, String>,
        tally: Arc<Tally>,
        exchanges: Exchanges,
        recorded: BTreeMap<u64, Result<Exchange, String>>,
        observed: Observed,
    ) -> Self {
        Self {
            network: limits.network.clone(),
            requests: limits.http_requests,
            response_bytes: limits.http_response_bytes,
            resolver,
            sent: AtomicU64::new(0),
            tally,
            in_flight: AtomicUsize::new(0),
            settled: tokio::sync::Notify::new(),
            exchanges,
            recorded,
            observed,
        }
    }

    /// Whether request `n` is so far past the budget that it is refused
    /// without a record.
    fn unrecorded(&self, n: u64) -> bool {
        n > u64::from(self.requests) + RECORDED_PAST_BUDGET
    }

    /// The grant's byte caps (egress, ingress), connections and idle time.
    fn caps(&self) -> (u64, u64, u32, u64) {
        self.network.allow_list().map_or((0, 0, 0, 60), |list| list.caps())
    }
}

impl HttpState {
    /// The state of an episode under `limits`, counting in the episode's
    /// `tally` and resolving with its `resolver` (or refusing every request
    /// with why the organiser's name map does not parse); when `recorder`
    /// replays a recording, its exchanges answer the requests it covers.
    pub fn new(limits: &Limits, recorder: &Recorder, tally: Arc<Tally>, resolver: Result<Resolver, String>) -> Self {
        let recorded = recorder
            .replay()
            .map(|r| recorded_exchanges(r.recording()))
            .unwrap_or_default();
        let shared = Shared::new(
            limits,
            resolver,
            tally,
            recorder.http.clone(),
            recorded,
            recorder.observed.clone(),
        );
        Self {
            ctx: WasiHttpCtx::new(),
            hooks: Hooks {
                shared: Arc::new(shared),
                replaying: false,
            },
        }
    }

    /// Requests the agent sent so far.
    pub fn sent(&self) -> u64 {
        self.hooks.shared.sent.load(Ordering::Relaxed)
    }

    /// Waits (at most `within`) until every exchange begun is queued for
    /// the recorder: at the episode's end, once the agent's resources are
    /// dropped, the aborted ones finish as they unwind.
    pub async fn settle(&self, within: Duration) {
        let shared = &self.hooks.shared;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let settled = shared.settled.notified();
            if shared.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                tracing::warn!("http exchanges still unfinished at the episode's end");
                return;
            }
        }
    }
}

impl WasiHttpView for AgentState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        self.http.hooks.replaying = self.recorder.is_replaying();
        WasiHttpCtxView {
            ctx: &mut self.http.ctx,
            table: &mut self.table,
            hooks: &mut self.http.hooks,
        }
    }
}

/// What `send_request` hands back to wasmtime-wasi-http.
type Sent = Result<(Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>), Error>;

impl WasiHttpHooks for Hooks {
    fn send_request(
        &mut self,
        request: Request<WasiBody>,
        options: Option<RequestOptions>,
        _: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let shared = self.shared.clone();
        // Numbered as the agent sends them, replayed or not, so a fork's
        // live requests go on from the recorded ones.
        let n = shared.sent.fetch_add(1, Ordering::Relaxed) + 1;
        if self.replaying {
            return Box::new(replayed(shared, n, request));
        }
        Box::new(live(shared, n, request, options))
    }
}

/// Why a request failed, as the agent is told (a wasi:http error code) and
/// the trace keeps it (with the reason, which the code has no room for).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "code", content = "detail", rename_all = "kebab-case")]
enum Failure {
    HttpRequestDenied(String),
    HttpRequestUriInvalid(String),
    HttpRequestBodySize(Option<u64>),
    ConnectionLimitReached(String),
    ConnectionRefused(String),
    ConnectionTimeout(String),
    ConnectionReadTimeout(String),
    ConnectionTerminated(String),
    TlsCertificateError(String),
    TlsProtocolError(String),
    HttpProtocolError(String),
    HttpResponseBodySize(u64),
    InternalError(String),
}

impl Failure {
    /// The error the agent gets.
    fn to_error(&self) -> Error {
        match self {
            Self::HttpRequestDenied(_) => Error::HttpRequestDenied,
            Self::HttpRequestUriInvalid(_) => Error::HttpRequestUriInvalid,
            Self::HttpRequestBodySize(size) => Error::HttpRequestBodySize(*size),
            Self::ConnectionLimitReached(_) => Error::ConnectionLimitReached,
            Self::ConnectionRefused(_) => Error::ConnectionRefused,
            Self::ConnectionTimeout(_) => Error::ConnectionTimeout,
            Self::ConnectionReadTimeout(_) => Error::ConnectionReadTimeout,
            Self::ConnectionTerminated(_) => Error::ConnectionTerminated,
            Self::TlsCertificateError(_) => Error::TlsCertificateError,
            Self::TlsProtocolError(_) => Error::TlsProtocolError,
            Self::HttpProtocolError(_) => Error::HttpProtocolError,
            Self::HttpResponseBodySize(cap) => Error::HttpResponseBodySize(Some(*cap)),
            Self::InternalError(why) => Error::InternalError(Some(why.clone())),
        }
    }

    /// An error of the agent's own request body (a wrong content-length).
    fn of_request_body(error: &Error) -> Self {
        match error {
            Error::HttpRequestBodySize(size) => Self::HttpRequestBodySize(*size),
            other => Self::InternalError(format!("the request body: {other}")),
        }
    }

    /// A hyper error on a connection, or the cap `meter` cut it for.
    fn of_hyper(error: &hyper::Error, meter: &Meter) -> Self {
        if let Some(why) = meter.cut() {
            return Self::ConnectionTerminated(why);
        }
        let mut detail = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            detail = format!("{detail}: {cause}");
            source = cause.source();
        }
        match error.is_timeout() {
            true => Self::ConnectionReadTimeout(detail),
            false if error.is_incomplete_message() || error.is_closed() => Self::ConnectionTerminated(detail),
            false => Self::HttpProtocolError(detail),
        }
    }
}

/// A body as the trace keeps it: UTF-8 text as it is, anything else in
/// base64; the trace clips a long one (kept whole as an object).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Body {
    data: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    base64: bool,
    bytes: u64,
    blake3: String,
}

impl Body {
    fn of(bytes: &[u8]) -> Self {
        let (data, base64) = match std::str::from_utf8(bytes) {
            Ok(text) => (text.to_string(), false),
            Err(_) => (base64::engine::general_purpose::STANDARD.encode(bytes), true),
        };
        Self {
            data,
            base64,
            bytes: bytes.len() as u64,
            blake3: blake3::hash(bytes).to_hex().to_string(),
        }
    }

    fn bytes(&self) -> Result<Bytes, String> {
        match self.base64 {
            false => Ok(Bytes::from(self.data.clone().into_bytes())),
            true => base64::engine::general_purpose::STANDARD
                .decode(&self.data)
                .map(Bytes::from)
                .map_err(|e| format!("a recorded body is not base64: {e}")),
        }
    }
}

/// One request and what came of it: an `http exchange` line's result.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
struct Exchange {
    /// The request's number, in the order the agent sent them (from 1).
    n: u64,
    method: String,
    url: String,
    request_headers: Vec<(String, String)>,
    /// The body sent; none when the request was refused before it was read.
    request_body: Option<Body>,
    /// Whether the grant, the budget and the resolver let it go out.
    allowed: bool,
    /// Why it was refused, or how it failed.
    reason: Option<String>,
    /// Where it went.
    address: Option<String>,
    status: Option<u16>,
    response_headers: Vec<(String, String)>,
    /// The response body the agent was handed (all of it when `complete`).
    response_body: Option<Body>,
    /// Whether the response body was read to its end (or its error).
    complete: bool,
    /// The request failed with this: the agent got no response.
    error: Option<Failure>,
    /// The response body ended with this error.
    body_error: Option<Failure>,
    /// Bytes on the wire each way (TLS included).
    bytes_out: u64,
    bytes_in: u64,
    /// From the request to its last byte (or failure), in ms.
    ms: f64,
}

/// The exchanges of a recording, by number, long strings made whole.
fn recorded_exchanges(recording: &crate::record::recording::Recording) -> BTreeMap<u64, Result<Exchange, String>> {
    let objects = recording.objects();
    recording
        .events
        .iter()
        .filter(|e| e["interface"] == "http" && e["function"] == "exchange")
        .filter_map(|event| {
            let n = event["result"]["n"].as_u64()?;
            let parsed = crate::record::trace::unclip(event["result"].clone(), &objects)
                .ok_or_else(|| {
                    format!(
                        "recorded HTTP exchange {n}: a long string is missing from the snapshot objects or was changed"
                    )
                })
                .and_then(|v| {
                    serde_json::from_value(v).map_err(|e| format!("recorded HTTP exchange {n} does not parse: {e}"))
                });
            Some((n, parsed))
        })
        .collect()
}

/// Bytes of one exchange's connection, and why a cap cut it (if it did).
#[derive(Default)]
struct Meter {
    out: AtomicU64,
    into: AtomicU64,
    cut: Mutex<Option<String>>,
}

impl Meter {
    fn cut(&self) -> Option<String> {
        self.cut.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn cut_for(&self, why: String) -> std::io::Error {
        self.cut
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(why.clone());
        std::io::Error::other(why)
    }
}

/// One live exchange being recorded; queued for the recorder when dropped
/// (done, failed, or abandoned by the agent or the episode's end).
struct Record {
    exchange: Exchange,
    response_body: Vec<u8>,
    started: Instant,
    meter: Arc<Meter>,
    shared: Arc<Shared>,
}

impl Record {
    fn new(shared: Arc<Shared>, n: u64, request: &Request<WasiBody>, headers: Vec<(String, String)>) -> Self {
        shared.in_flight.fetch_add(1, Ordering::AcqRel);
        Self {
            exchange: Exchange {
                n,
                method: request.method().to_string(),
                url: request.uri().to_string(),
                request_headers: headers,
                ..Exchange::default()
            },
            response_body: Vec::new(),
            started: Instant::now(),
            meter: Arc::default(),
            shared,
        }
    }

    fn fail(&mut self, failure: &Failure) {
        self.exchange.reason.get_or_insert_with(|| match failure {
            Failure::HttpRequestBodySize(size) => format!("the request body's size is wrong ({size:?})"),
            Failure::HttpResponseBodySize(cap) => format!("the response body is over the cap of {cap} bytes"),
            Failure::HttpRequestDenied(why)
            | Failure::HttpRequestUriInvalid(why)
            | Failure::ConnectionLimitReached(why)
            | Failure::ConnectionRefused(why)
            | Failure::ConnectionTimeout(why)
            | Failure::ConnectionReadTimeout(why)
            | Failure::ConnectionTerminated(why)
            | Failure::TlsCertificateError(why)
            | Failure::TlsProtocolError(why)
            | Failure::HttpProtocolError(why)
            | Failure::InternalError(why) => why.clone(),
        });
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let exchange = &mut self.exchange;
        if exchange.status.is_none() && exchange.error.is_none() {
            let failure = Failure::InternalError("the episode ended before the response came".into());
            exchange
                .reason
                .get_or_insert_with(|| "the episode ended before the response came".into());
            exchange.error = Some(failure);
        }
        if exchange.status.is_some() {
            exchange.response_body = Some(Body::of(&self.response_body));
        }
        exchange.bytes_out = self.meter.out.load(Ordering::Relaxed);
        exchange.bytes_in = self.meter.into.load(Ordering::Relaxed);
        exchange.ms = self.started.elapsed().as_secs_f64() * 1000.0;
        tracing::debug!(n = exchange.n, url = %exchange.url, allowed = exchange.allowed, "http exchange");
        self.shared
            .exchanges
            .push(serde_json::to_value(&*exchange).unwrap_or(Value::Null));
        self.shared.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.shared.settled.notify_waiters();
    }
}

/// The request's headers without the hop-by-hop ones, as the trace keeps them.
fn strip_hop_by_hop(headers: &mut HeaderMap) -> Vec<(String, String)> {
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
    headers
        .iter()
        .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect()
}

/// Where a request goes: scheme, host (an IPv6 address without brackets), port.
fn target(uri: &hyper::Uri) -> Result<(bool, String, u16), Failure> {
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        other => {
            return Err(Failure::HttpRequestUriInvalid(format!(
                "the scheme {other:?} is not http or https"
            )));
        }
    };
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| Failure::HttpRequestUriInvalid(format!("{uri} names no host")))?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    Ok((tls, host, port))
}

/// A live request: checked, sent, and its response handed back with a body
/// that records what the agent reads.
async fn live(shared: Arc<Shared>, n: u64, mut request: Request<WasiBody>, options: Option<RequestOptions>) -> Sent {
    if shared.unrecorded(n) {
        return Err(Error::HttpRequestDenied);
    }
    let headers = strip_hop_by_hop(request.headers_mut());
    let mut record = Record::new(shared.clone(), n, &request, headers);
    let sent = match send(&shared, &mut record, request, options).await {
        Ok(sent) => sent,
        Err(failure) => {
            record.fail(&failure);
            let error = failure.to_error();
            record.exchange.error = Some(failure);
            return Err(error);
        }
    };
    let (parts, incoming, conn) = sent;
    let mut parts = parts;
    record.exchange.status = Some(parts.status.as_u16());
    record.exchange.response_headers = strip_hop_by_hop(&mut parts.headers);
    let idle = options
        .and_then(|o| o.between_bytes_timeout)
        .unwrap_or(Duration::from_secs(shared.caps().3))
        .max(Duration::from_millis(1));
    let body = LiveBody {
        incoming,
        idle: tokio::time::interval_at(tokio::time::Instant::now() + idle, idle),
        cap: shared.response_bytes,
        received: 0,
        pending: None,
        done: false,
        record,
    };
    // Driven by wasmtime-wasi-http while the agent holds the body.
    let io = async move {
        if let Some(conn) = conn {
            let _ = conn.await;
        }
        Ok(())
    };
    Ok((Response::from_parts(parts, body.boxed_unsync()), Box::new(io)))
}

type Connection = hyper::client::conn::http1::Connection<hyper_util::rt::TokioIo<Box<dyn Stream>>, Full<Bytes>>;

/// What a stream to a destination is: a TCP connection, or TLS over one.
trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Checks the request against the grant, the budget and the caps, opens a
/// connection to where its host resolves and sends it; the response's head.
async fn send(
    shared: &Arc<Shared>,
    record: &mut Record,
    request: Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<(hyper::http::response::Parts, Incoming, Option<Connection>), Failure> {
    let (mut head, body) = request.into_parts();
    let admitted = admit(shared, record, &head).await?;
    // The whole body first: it is recorded, and the egress cap checked on it.
    let sent = read_body(body).await?;
    record.exchange.request_body = Some(Body::of(&sent));
    let (egress, _, _, idle) = admitted.caps;
    if shared.tally.out.load(Ordering::Relaxed) + sent.len() as u64 > egress {
        return Err(Failure::ConnectionTerminated(format!(
            "the grant's egress cap of {} MiB would be passed",
            egress >> 20
        )));
    }
    let (mut sender, conn) = connect(shared, record, &admitted, options).await?;
    // The request line has the path only: the destination is this connection.
    let path = head.uri.path_and_query().map_or("/", |p| p.as_str());
    head.uri = path
        .parse()
        .map_err(|e| Failure::HttpRequestUriInvalid(format!("{path}: {e}")))?;
    let request = Request::from_parts(head, Full::new(Bytes::from(sent)));
    let first_byte = options
        .and_then(|o| o.first_byte_timeout)
        .unwrap_or(Duration::from_secs(idle));
    let response = drive(sender.send_request(request), conn, first_byte).await;
    let (response, conn) = response.map_err(|e| match e {
        Driven::Hyper(e) => Failure::of_hyper(&e, &record.meter),
        Driven::Timeout => Failure::ConnectionReadTimeout(format!("no response within {} s", first_byte.as_secs())),
    })?;
    let (parts, incoming) = response.into_parts();
    Ok((parts, incoming, conn))
}

/// Where an admitted request goes, and the grant's caps.
struct Admitted {
    tls: bool,
    host: String,
    address: SocketAddr,
    caps: (u64, u64, u32, u64),
}

/// Lets a request go out, or says why not: the grant (host, port, method),
/// the request budget, the resolver (public addresses only, unless mapped
/// or named by a rule), and the connection cap.
async fn admit(
    shared: &Shared,
    record: &mut Record,
    request: &hyper::http::request::Parts,
) -> Result<Admitted, Failure> {
    let denied = |why: String| Failure::HttpRequestDenied(why);
    let (tls, host, port) = target(&request.uri)?;
    let Some(grant) = shared.network.allow_list() else {
        return Err(denied("the task grants no network".into()));
    };
    if record.exchange.n > u64::from(shared.requests) {
        return Err(denied(format!(
            "the episode's budget of {} HTTP requests is spent",
            shared.requests
        )));
    }
    if let Some(why) = refusal(grant, &host, port, Some(request.method.as_str())) {
        return Err(denied(why));
    }
    let resolver = shared.resolver.as_ref().map_err(|why| denied(why.clone()))?;
    // Only a rule naming this very address may reach one that is not public.
    let named = grant.allow.iter().any(|rule| rule.names(&host));
    let address = resolver.resolve(&host, port, named).await.map_err(denied)?;
    let caps = grant.caps();
    if !shared.tally.open_one(caps.2) {
        return Err(Failure::ConnectionLimitReached(format!(
            "the grant's cap of {} connections was reached",
            caps.2
        )));
    }
    record.exchange.allowed = true;
    record.exchange.address = Some(address.to_string());
    Ok(Admitted {
        tls,
        host,
        address,
        caps,
    })
}

/// The agent's whole request body (it writes it after `handle`, as it likes).
async fn read_body(mut body: WasiBody) -> Result<Vec<u8>, Failure> {
    let mut sent = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Failure::of_request_body(&e))?;
        if let Ok(data) = frame.into_data() {
            sent.extend_from_slice(&data);
            if sent.len() > MAX_REQUEST_BODY {
                return Err(Failure::HttpRequestBodySize(Some(sent.len() as u64)));
            }
        }
    }
    Ok(sent)
}

/// A metered connection (TLS for https) to the admitted address, ready
/// for one HTTP/1.1 request.
async fn connect(
    shared: &Arc<Shared>,
    record: &Record,
    to: &Admitted,
    options: Option<RequestOptions>,
) -> Result<(hyper::client::conn::http1::SendRequest<Full<Bytes>>, Connection), Failure> {
    let address = to.address;
    let within = options.and_then(|o| o.connect_timeout).unwrap_or(CONNECT_TIMEOUT);
    let tcp = match tokio::time::timeout(within, tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err(Failure::ConnectionRefused(format!("{address}: {e}"))),
        Err(_) => return Err(Failure::ConnectionTimeout(format!("{address}: no answer"))),
    };
    let metered = Metered {
        inner: tcp,
        meter: record.meter.clone(),
        shared: shared.clone(),
        caps: (to.caps.0, to.caps.1),
    };
    let stream: Box<dyn Stream> = match to.tls {
        false => Box::new(metered),
        true => Box::new(tls_connect(&to.host, metered, within).await?),
    };
    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| Failure::of_hyper(&e, &record.meter))
}

enum Driven {
    Hyper(hyper::Error),
    Timeout,
}

/// Waits for the response while driving the connection (hyper's client
/// connection does the I/O only when polled); the connection, unless it
/// has ended already, still to drive for the body.
async fn drive(
    response: impl Future<Output = Result<Response<Incoming>, hyper::Error>>,
    conn: Connection,
    within: Duration,
) -> Result<(Response<Incoming>, Option<Connection>), Driven> {
    let mut response = std::pin::pin!(response);
    let mut conn = Some(conn);
    let polled = std::future::poll_fn(|cx| {
        if let Poll::Ready(answer) = response.as_mut().poll(cx) {
            return Poll::Ready(answer.map_err(Driven::Hyper));
        }
        let Some(driving) = conn.as_mut() else {
            return Poll::Pending;
        };
        let ended = ready!(Pin::new(driving).poll(cx));
        conn = None;
        match ended {
            Ok(()) => response.as_mut().poll(cx).map(|a| a.map_err(Driven::Hyper)),
            Err(e) => Poll::Ready(Err(Driven::Hyper(e))),
        }
    });
    let outcome = tokio::time::timeout(within, polled).await;
    match outcome {
        Ok(Ok(response)) => Ok((response, conn)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Driven::Timeout),
    }
}

/// TLS over `stream` to `host`, verified against the webpki roots and the
/// organiser's (`MLRB_EGRESS_CA`).
async fn tls_connect<S: Stream>(
    host: &str,
    stream: S,
    within: Duration,
) -> Result<tokio_rustls::client::TlsStream<S>, Failure> {
    use tokio_rustls::rustls;
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let extra = trust::extra_roots().map_err(|e| format!("{e:#}"))?;
        let (_, unusable) = roots.add_parsable_certificates(extra);
        if unusable > 0 {
            return Err(format!(
                "{}: {unusable} certificates are not usable roots",
                trust::CA_VARIABLE
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // HTTP/1.1 only: the client below speaks nothing else.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    });
    let config = config.clone().map_err(Failure::InternalError)?;
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| Failure::HttpRequestUriInvalid(format!("{host}: {e}")))?;
    let connecting = tokio_rustls::TlsConnector::from(config).connect(name, stream);
    match tokio::time::timeout(within, connecting).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => {
            let certificate = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)));
            Err(match certificate {
                true => Failure::TlsCertificateError(format!("{host}: {e}")),
                false => Failure::TlsProtocolError(format!("{host}: {e}")),
            })
        }
        Err(_) => Err(Failure::ConnectionTimeout(format!("{host}: no TLS handshake"))),
    }
}

/// A connection whose bytes are counted, for the exchange and against the
/// grant's caps over all the agent's requests (past one, it fails).
struct Metered<S> {
    inner: S,
    meter: Arc<Meter>,
    shared: Arc<Shared>,
    /// Egress and ingress caps, in bytes.
    caps: (u64, u64),
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let read = (buf.filled().len() - before) as u64;
        self.meter.into.fetch_add(read, Ordering::Relaxed);
        let total = self.shared.tally.into.fetch_add(read, Ordering::Relaxed) + read;
        if total > self.caps.1 {
            let why = format!("the grant's ingress cap of {} MiB was reached", self.caps.1 >> 20);
            return Poll::Ready(Err(self.meter.cut_for(why)));
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.shared.tally.out.load(Ordering::Relaxed) + buf.len() as u64 > self.caps.0 {
            let why = format!("the grant's egress cap of {} MiB was reached", self.caps.0 >> 20);
            return Poll::Ready(Err(self.meter.cut_for(why)));
        }
        let written = ready!(Pin::new(&mut self.inner).poll_write(cx, buf))? as u64;
        self.meter.out.fetch_add(written, Ordering::Relaxed);
        self.shared.tally.out.fetch_add(written, Ordering::Relaxed);
        Poll::Ready(Ok(written as usize))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A live response body: what the agent reads of it is recorded, cut at
/// the response cap, and ended when no byte comes for the idle time.
struct LiveBody {
    incoming: Incoming,
    idle: tokio::time::Interval,
    cap: u64,
    received: u64,
    /// An error to end the body with, after the data before it.
    pending: Option<Failure>,
    done: bool,
    record: Record,
}

impl LiveBody {
    fn end(&mut self, failure: Option<Failure>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        self.done = true;
        self.record.exchange.complete = true;
        match failure {
            None => Poll::Ready(None),
            Some(failure) => {
                self.record.fail(&failure);
                let error = failure.to_error();
                self.record.exchange.body_error = Some(failure);
                Poll::Ready(Some(Err(error)))
            }
        }
    }
}

impl hyper::body::Body for LiveBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(failure) = this.pending.take() {
            return this.end(Some(failure));
        }
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(None) => this.end(None),
            Poll::Ready(Some(Err(e))) => {
                let failure = Failure::of_hyper(&e, &this.record.meter);
                this.end(Some(failure))
            }
            Poll::Ready(Some(Ok(frame))) => {
                this.idle.reset();
                let Ok(mut data) = frame.into_data() else {
                    // Trailers: not the agent's to see in a replay either.
                    return this.end(None);
                };
                let room = this.cap - this.received;
                if data.len() as u64 > room {
                    data.truncate(room as usize);
                    this.pending = Some(Failure::HttpResponseBodySize(this.cap));
                    if data.is_empty() {
                        let failure = this.pending.take();
                        return this.end(failure);
                    }
                }
                this.received += data.len() as u64;
                this.record.response_body.extend_from_slice(&data);
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Pending => {
                ready!(this.idle.poll_tick(cx));
                let idle = this.idle.period().as_secs();
                this.end(Some(Failure::ConnectionReadTimeout(format!("no byte for {idle} s"))))
            }
        }
    }
}

/// A replayed request: checked against the recorded one with its number,
/// answered with what was recorded.
async fn replayed(shared: Arc<Shared>, n: u64, mut request: Request<WasiBody>) -> Sent {
    let diverged = |why: String| {
        shared.observed.diverge(why.clone());
        Err(Failure::InternalError(format!("the replay diverged: {why}")).to_error())
    };
    let (method, url) = (request.method().to_string(), request.uri().to_string());
    let recorded = match shared.recorded.get(&n) {
        Some(Ok(recorded)) => recorded,
        Some(Err(why)) => return diverged(why.clone()),
        None if shared.unrecorded(n) => return Err(Error::HttpRequestDenied),
        None => {
            return diverged(format!(
                "the agent sent HTTP request {n} ({method} {url}), which the recording does not hold"
            ));
        }
    };
    if recorded.method != method || recorded.url != url {
        return diverged(format!(
            "HTTP request {n} differs from the recording: expected {} {}, the agent sent {method} {url}",
            recorded.method, recorded.url
        ));
    }
    if let Some(body) = &recorded.request_body {
        let mut sent = Vec::new();
        while let Some(frame) = request.body_mut().frame().await {
            match frame {
                Ok(frame) => sent.extend_from_slice(frame.data_ref().map_or(&[][..], |d| &d[..])),
                Err(_) => break,
            }
            if sent.len() > MAX_REQUEST_BODY {
                break;
            }
        }
        let hash = blake3::hash(&sent).to_hex().to_string();
        if hash != body.blake3 {
            return diverged(format!(
                "the body of HTTP request {n} ({method} {url}) differs from the recording ({} bytes, recorded {})",
                sent.len(),
                body.bytes
            ));
        }
    }
    if let Some(failure) = &recorded.error {
        return Err(failure.to_error());
    }
    let Some(status) = recorded.status else {
        return diverged(format!(
            "recorded HTTP exchange {n} holds neither a response nor an error"
        ));
    };
    let data = match recorded.response_body.as_ref().map(Body::bytes).transpose() {
        Ok(data) => data.unwrap_or_default(),
        Err(why) => return diverged(why),
    };
    let mut response = Response::builder().status(status);
    for (name, value) in &recorded.response_headers {
        response = response.header(name.as_str(), value.as_str());
    }
    let body = ReplayBody {
        n,
        data: Some(data).filter(|d| !d.is_empty()),
        end: recorded.body_error.clone(),
        complete: recorded.complete,
        observed: shared.observed.clone(),
    };
    match response.body(body.boxed_unsync()) {
        Ok(response) => Ok((response, Box::new(async { Ok(()) }))),
        Err(e) => diverged(format!("recorded HTTP exchange {n} does not make a response: {e}")),
    }
}

/// A recorded response body: its bytes, then its error or its end.
struct ReplayBody {
    n: u64,
    data: Option<Bytes>,
    end: Option<Failure>,
    complete: bool,
    observed: Observed,
}

impl hyper::body::Body for ReplayBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if let Some(failure) = self.end.take() {
            self.complete = true;
            return Poll::Ready(Some(Err(failure.to_error())));
        }
        if self.complete {
            return Poll::Ready(None);
        }
        // The agent left this body unread when it was recorded.
        self.complete = true;
        let why = format!(
            "the agent read more of HTTP response {} than the recording holds",
            self.n
        );
        self.observed.diverge(why.clone());
        Poll::Ready(Some(Err(
            Failure::InternalError(format!("the replay diverged: {why}")).to_error()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(network: Network, recorded: Vec<Exchange>) -> Arc<Shared> {
        let limits = Limits {
            network,
            http_response_bytes: 1 << 20,
            ..Limits::default()
        };
        let recorded = recorded.into_iter().map(|e| (e.n, Ok(e))).collect();
        let resolver = Ok(Resolver::default());
        let (exchanges, observed) = (Exchanges::default(), Observed::default());
        Arc::new(Shared::new(
            &limits,
            resolver,
            Tally::shared(),
            exchanges,
            recorded,
            observed,
        ))
    }

    fn get(url: &str) -> Request<WasiBody> {
        let empty = http_body_util::Empty::<Bytes>::new().map_err(|never| match never {});
        Request::builder().uri(url).body(empty.boxed_unsync()).unwrap()
    }

    #[tokio::test]
    async fn a_request_without_a_grant_is_refused_and_recorded() {
        let shared = shared(Network::Off, Vec::new());
        let Err(error) = live(shared.clone(), 1, get("http://example.org/x"), None).await else {
            panic!("sent without a grant");
        };
        assert!(matches!(error, Error::HttpRequestDenied), "{error}");
        let recorded = shared.exchanges.take();
        assert_eq!(recorded.len(), 1);
        assert_eq!(recorded[0]["reason"], "the task grants no network");
        assert_eq!(recorded[0]["allowed"], false);
        assert_eq!(recorded[0]["url"], "http://example.org/x");
        assert_eq!(shared.in_flight.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn https_to_a_server_that_speaks_no_tls_fails_its_handshake() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await;
            }
        });
        // A rule naming the address is what lets a loopback one be reached.
        let grant: crate::network::AllowList =
            serde_json::from_value(serde_json::json!({ "allow": [format!("127.0.0.1:{port}")] })).unwrap();
        let shared = shared(Network::Allow(grant), Vec::new());
        let url = format!("https://127.0.0.1:{port}/");
        let Err(error) = live(shared.clone(), 1, get(&url), None).await else {
            panic!("a plain server answered over TLS");
        };
        assert!(matches!(error, Error::TlsProtocolError), "{error}");
        let recorded = shared.exchanges.take();
        assert_eq!(recorded[0]["allowed"], true);
        assert_eq!(recorded[0]["error"]["code"], "tls-protocol-error", "{}", recorded[0]);
        assert!(
            recorded[0]["bytes_out"].as_u64().unwrap() > 0,
            "the client hello was counted"
        );
    }

    /// The scripts' proxy counts in the same tally: what it opened leaves
    /// the agent only the rest of the connection cap.
    #[tokio::test]
    async fn the_connection_cap_is_shared_with_the_scripts() {
        let grant: crate::network::AllowList =
            serde_json::from_value(serde_json::json!({ "allow": ["127.0.0.1:9"], "connections": 2 })).unwrap();
        let shared = shared(Network::Allow(grant), Vec::new());
        shared.tally.opened.store(2, Ordering::Relaxed);
        let Err(error) = live(shared.clone(), 1, get("http://127.0.0.1:9/"), None).await else {
            panic!("sent past the episode's connection cap");
        };
        assert!(matches!(error, Error::ConnectionLimitReached), "{error}");
        let recorded = shared.exchanges.take();
        assert!(
            recorded[0]["reason"].as_str().unwrap().contains("cap of 2 connections"),
            "{}",
            recorded[0]
        );
    }

    #[tokio::test]
    async fn requests_far_past_the_budget_are_refused_unrecorded_live_and_replayed() {
        let shared = shared(Network::from(true), Vec::new());
        let far = 100 + RECORDED_PAST_BUDGET + 1;
        let Err(Error::HttpRequestDenied) = live(shared.clone(), far, get("http://example.org/"), None).await else {
            panic!("sent past the budget");
        };
        assert!(shared.exchanges.take().is_empty());
        let Err(Error::HttpRequestDenied) = replayed(shared.clone(), far, get("http://example.org/")).await else {
            panic!("answered past the budget");
        };
        assert!(shared.observed.diverged().is_none());
    }

    #[tokio::test]
    async fn a_replayed_request_must_be_the_recorded_one() {
        let recorded = Exchange {
            n: 1,
            method: "GET".into(),
            url: "http://a.test/x".into(),
            request_body: Some(Body::of(b"")),
            allowed: true,
            status: Some(200),
            response_headers: vec![("content-type".into(), "text/plain".into())],
            response_body: Some(Body::of(b"hi")),
            complete: true,
            ..Exchange::default()
        };
        let shared = shared(Network::Off, vec![recorded]);
        let Ok((response, _)) = replayed(shared.clone(), 1, get("http://a.test/x")).await else {
            panic!("the recorded request is not answered");
        };
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/plain");
        assert_eq!(response.into_body().collect().await.unwrap().to_bytes(), "hi");
        assert!(shared.observed.diverged().is_none());
        assert!(shared.exchanges.take().is_empty(), "a replay records nothing itself");

        let Err(error) = replayed(shared.clone(), 1, get("http://a.test/other")).await else {
            panic!("another URL is answered");
        };
        assert!(
            matches!(&error, Error::InternalError(Some(why)) if why.contains("diverged")),
            "{error}"
        );
        let why = shared.observed.diverged().unwrap();
        assert!(
            why.contains("expected GET http://a.test/x") && why.contains("/other"),
            "{why}"
        );
        let Err(_) = replayed(shared.clone(), 2, get("http://a.test/x")).await else {
            panic!("a request the recording does not hold is answered");
        };
    }

    #[test]
    fn failures_keep_their_reason_and_read_back() {
        for failure in [
            Failure::HttpRequestDenied("evil.com:443 is not in the task's network grant".into()),
            Failure::HttpResponseBodySize(1 << 20),
            Failure::HttpRequestBodySize(None),
            Failure::ConnectionTerminated("the grant's ingress cap of 1 MiB was reached".into()),
        ] {
            let json = serde_json::to_value(&failure).unwrap();
            assert!(json["code"].is_string(), "{json}");
            assert_eq!(serde_json::from_value::<Failure>(json).unwrap(), failure);
        }
        assert!(matches!(
            Failure::HttpRequestDenied(String::new()).to_error(),
            Error::HttpRequestDenied
        ));
        let json = serde_json::to_value(Failure::HttpRequestDenied("why".into())).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"code": "http-request-denied", "detail": "why"})
        );
    }

    #[test]
    fn bodies_are_text_when_they_can_be_else_base64() {
        let text = Body::of("héllo".as_bytes());
        assert!(!text.base64);
        assert_eq!(text.data, "héllo");
        let binary = Body::of(&[0xff, 0x00, 0x80]);
        assert!(binary.base64);
        assert_eq!(binary.bytes().unwrap(), Bytes::from_static(&[0xff, 0x00, 0x80]));
        assert_eq!(text.bytes().unwrap(), Bytes::from("héllo"));
        let json = serde_json::to_value(&text).unwrap();
        assert!(json.get("base64").is_none(), "the default is left out: {json}");
    }

    #[test]
    fn targets_take_the_scheme_s_port_and_hop_by_hop_headers_go() {
        let parse = |uri: &str| target(&uri.parse().unwrap());
        assert_eq!(parse("http://a.example/x").unwrap(), (false, "a.example".into(), 80));
        assert_eq!(parse("https://a.example/x").unwrap(), (true, "a.example".into(), 443));
        assert_eq!(
            parse("http://a.example:8080").unwrap(),
            (false, "a.example".into(), 8080)
        );
        assert_eq!(parse("https://[::1]:8443/").unwrap(), (true, "::1".into(), 8443));
        assert!(parse("/relative").is_err());
        let mut headers = HeaderMap::new();
        for (name, value) in [("te", "trailers"), ("connection", "close"), ("accept", "text/plain")] {
            headers.insert(name, value.parse().unwrap());
        }
        assert_eq!(
            strip_hop_by_hop(&mut headers),
            vec![("accept".to_string(), "text/plain".to_string())]
        );
    }

    #[tokio::test]
    async fn a_replayed_body_ends_as_recorded_or_diverges_past_it() {
        let observed = Observed::default();
        let body = |complete: bool, end: Option<Failure>| ReplayBody {
            n: 1,
            data: Some(Bytes::from("abc")),
            end,
            complete,
            observed: observed.clone(),
        };
        let read = |body: ReplayBody| async move {
            let mut body = std::pin::pin!(body);
            let mut frames = Vec::new();
            while let Some(frame) = body.frame().await {
                frames.push(frame.map(|f| f.into_data().unwrap()).map_err(|e| e.to_string()));
            }
            frames
        };
        let whole = read(body(true, None)).await;
        assert_eq!(whole.len(), 1);
        assert!(observed.diverged().is_none());
        let capped = read(body(true, Some(Failure::HttpResponseBodySize(3)))).await;
        assert!(capped[1].as_ref().unwrap_err().contains("exceeds limit"), "{capped:?}");
        assert!(observed.diverged().is_none());
        let past = read(body(false, None)).await;
        assert!(past[1].is_err());
        assert!(observed.diverged().unwrap().contains("read more of HTTP response 1"));
    }
}
