//! Answering a request from a recording: the exchanges a recording holds,
//! by number; each request checked against the recorded one with its
//! number and answered with what was recorded, touching no network.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Frame;
use hyper::{Request, Response};
use wasmtime_wasi_http::{Error, WasiBody};

use super::exchanges::{Body, Exchange};
use super::failure::Failure;
use super::request::MAX_REQUEST_BODY;
use super::shared::{Sent, Shared};
use crate::capability::observed::Observed;
use crate::record::recording::Recording;

/// The exchanges of a recording, by number, long strings made whole.
pub(super) fn recorded_exchanges(recording: &Recording) -> BTreeMap<u64, Result<Exchange, String>> {
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

/// A replayed request: checked against the recorded one with its number,
/// answered with what was recorded.
pub(super) async fn replayed(shared: Arc<Shared>, n: u64, mut request: Request<WasiBody>) -> Sent {
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
    use super::super::fixtures::{get, shared};
    use super::*;
    use crate::network::Network;

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
