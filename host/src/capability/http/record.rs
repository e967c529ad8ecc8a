//! One live exchange being recorded: what the agent sent and was handed so
//! far, queued for the recorder when it ends (done, failed or abandoned).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use hyper::Request;
use serde_json::Value;
use wasmtime_wasi_http::WasiBody;

use super::exchanges::{Body, Exchange};
use super::failure::Failure;
use super::meter::Meter;
use super::shared::Shared;

/// One live exchange being recorded; queued for the recorder when dropped
/// (done, failed, or abandoned by the agent or the episode's end).
pub(super) struct Record {
    pub(super) exchange: Exchange,
    pub(super) response_body: Vec<u8>,
    started: Instant,
    pub(super) meter: Arc<Meter>,
    shared: Arc<Shared>,
}

impl Record {
    pub(super) fn new(
        shared: Arc<Shared>,
        n: u64,
        request: &Request<WasiBody>,
        headers: Vec<(String, String)>,
    ) -> Self {
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

    pub(super) fn fail(&mut self, failure: &Failure) {
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
