//! The wasi:http interfaces' state ([`HttpState`]): wasmtime-wasi-http's
//! context, the view of the agent's state it takes, and the hook that
//! sends each request live or answers it from the recording.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hyper::Request;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use super::live::live;
use super::replay::{recorded_exchanges, replayed};
use super::shared::{Sent, Shared};
use crate::capability::AgentState;
use crate::capability::recorder::Recorder;
use crate::limits::Limits;
use crate::network::Tally;
use crate::sandbox::egress::proxy::Resolver;

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
