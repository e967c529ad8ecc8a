//! A live request: recorded, checked against the grant, the budget and the
//! caps, sent over its own connection, and its response handed back with a
//! body that records what the agent reads.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

use super::admit::admit;
use super::exchanges::Body;
use super::failure::Failure;
use super::live_body::LiveBody;
use super::record::Record;
use super::request::{read_body, strip_hop_by_hop};
use super::shared::{Sent, Shared};
use super::transport::{Connection, Driven, connect, drive};

/// A live request: checked, sent, and its response handed back with a body
/// that records what the agent reads.
pub(super) async fn live(
    shared: Arc<Shared>,
    n: u64,
    mut request: Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Sent {
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

#[cfg(test)]
mod tests {
    use super::super::fixtures::{get, shared};
    use super::*;
    use crate::network::Network;

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
}
