//! What the request tasks share with the wasi:http state (they outlive any
//! borrow of it): the episode's limits, resolver and counters, the queue
//! for the recorder, the recorded exchanges; and what each task hands back.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};

use hyper::Response;
use wasmtime_wasi_http::{Error, WasiBody};

use super::exchanges::{Exchange, Exchanges};
use crate::capability::observed::Observed;
use crate::limits::Limits;
use crate::network::{Network, Tally};
use crate::sandbox::egress::proxy::Resolver;

/// Requests past the budget recorded one by one; those after them are
/// refused unrecorded (an agent looping on refusals must not fill the
/// host's memory), and a replay refuses them alike.
pub(super) const RECORDED_PAST_BUDGET: u64 = 10;

/// What `send_request` hands back to wasmtime-wasi-http.
pub(super) type Sent = Result<(Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>), Error>;

/// What the request tasks share with the state (they outlive any borrow).
pub(super) struct Shared {
    pub(super) network: Network,
    /// `Limits.http_requests`.
    pub(super) requests: u32,
    /// `Limits.http_response_bytes`.
    pub(super) response_bytes: u64,
    /// The organiser's name map and the system's resolver, or why the map
    /// does not parse (every request is refused with it).
    pub(super) resolver: Result<Resolver, String>,
    /// Requests sent so far: the last one's number.
    pub(super) sent: AtomicU64,
    /// Bytes sent and received, connections opened: the episode's, its
    /// scripts' egress proxy counting in the same tally.
    pub(super) tally: Arc<Tally>,
    /// Exchanges begun and not yet queued for the recorder.
    pub(super) in_flight: AtomicUsize,
    pub(super) settled: tokio::sync::Notify,
    pub(super) exchanges: Exchanges,
    /// The recorded exchanges by number, in a replay (or why one is unreadable).
    pub(super) recorded: BTreeMap<u64, Result<Exchange, String>>,
    /// Where a replay's divergence is told (the next call ends the episode).
    pub(super) observed: Observed,
}

impl Shared {
    pub(super) fn new(
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
    pub(super) fn unrecorded(&self, n: u64) -> bool {
        n > u64::from(self.requests) + RECORDED_PAST_BUDGET
    }

    /// The grant's byte caps (egress, ingress), connections and idle time.
    pub(super) fn caps(&self) -> (u64, u64, u32, u64) {
        self.network.allow_list().map_or((0, 0, 0, 60), |list| list.caps())
    }
}

#[cfg(test)]
mod tests {
    use wasmtime_wasi_http::Error;

    use super::super::fixtures::{get, shared};
    use super::super::live::live;
    use super::super::replay::replayed;
    use super::*;

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
}
