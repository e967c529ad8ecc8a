//! What the tests of the request paths start from: the shared state of an
//! episode under a network grant (and a recording), and a bare GET.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Request;
use wasmtime_wasi_http::WasiBody;

use super::exchanges::{Exchange, Exchanges};
use super::shared::Shared;
use crate::capability::observed::Observed;
use crate::limits::Limits;
use crate::network::{Network, Tally};
use crate::sandbox::egress::proxy::Resolver;

/// The shared state of an episode under `network`, replaying `recorded`.
pub(super) fn shared(network: Network, recorded: Vec<Exchange>) -> Arc<Shared> {
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

/// A GET of `url` with an empty body.
pub(super) fn get(url: &str) -> Request<WasiBody> {
    let empty = http_body_util::Empty::<Bytes>::new().map_err(|never| match never {});
    Request::builder().uri(url).body(empty.boxed_unsync()).unwrap()
}
