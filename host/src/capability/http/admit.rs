//! Whether a request may go out: the grant (host, port, method), the
//! episode's request budget, the resolver and the connection cap; where
//! an admitted one goes.

use std::net::SocketAddr;

use super::failure::Failure;
use super::record::Record;
use super::request::target;
use super::shared::Shared;
use crate::network::refusal;

/// Where an admitted request goes, and the grant's caps.
pub(super) struct Admitted {
    pub(super) tls: bool,
    pub(super) host: String,
    pub(super) address: SocketAddr,
    pub(super) caps: (u64, u64, u32, u64),
}

/// Lets a request go out, or says why not: the grant (host, port, method),
/// the request budget, the resolver (public addresses only, unless mapped
/// or named by a rule), and the connection cap.
pub(super) async fn admit(
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use wasmtime_wasi_http::Error;

    use super::super::fixtures::{get, shared};
    use super::super::live::live;
    use crate::network::Network;

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
}
