//! The recorded exchanges: what each request and its response were (an
//! `http exchange` line's result, its bodies as the trace keeps them),
//! and the queue finished ones wait in for the recorder.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::failure::Failure;

/// Finished exchanges waiting for the recorder to write them: the http
/// tasks push, the recorder drains (its trace is not theirs to borrow).
#[derive(Clone, Default)]
pub struct Exchanges(Arc<Mutex<Vec<Value>>>);

impl Exchanges {
    pub(super) fn push(&self, exchange: Value) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(exchange);
    }

    /// Every exchange finished since the last call, in the order they finished.
    pub fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// A body as the trace keeps it: UTF-8 text as it is, anything else in
/// base64; the trace clips a long one (kept whole as an object).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Body {
    pub(super) data: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) base64: bool,
    pub(super) bytes: u64,
    pub(super) blake3: String,
}

impl Body {
    pub(super) fn of(bytes: &[u8]) -> Self {
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

    pub(super) fn bytes(&self) -> Result<Bytes, String> {
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
pub(super) struct Exchange {
    /// The request's number, in the order the agent sent them (from 1).
    pub(super) n: u64,
    pub(super) method: String,
    pub(super) url: String,
    pub(super) request_headers: Vec<(String, String)>,
    /// The body sent; none when the request was refused before it was read.
    pub(super) request_body: Option<Body>,
    /// Whether the grant, the budget and the resolver let it go out.
    pub(super) allowed: bool,
    /// Why it was refused, or how it failed.
    pub(super) reason: Option<String>,
    /// Where it went.
    pub(super) address: Option<String>,
    pub(super) status: Option<u16>,
    pub(super) response_headers: Vec<(String, String)>,
    /// The response body the agent was handed (all of it when `complete`).
    pub(super) response_body: Option<Body>,
    /// Whether the response body was read to its end (or its error).
    pub(super) complete: bool,
    /// The request failed with this: the agent got no response.
    pub(super) error: Option<Failure>,
    /// The response body ended with this error.
    pub(super) body_error: Option<Failure>,
    /// Bytes on the wire each way (TLS included).
    pub(super) bytes_out: u64,
    pub(super) bytes_in: u64,
    /// From the request to its last byte (or failure), in ms.
    pub(super) ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
