//! The service's answers: JSON, and refusals as `{"error": ...}` in one line.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde::Serialize;

/// An answer.
pub type Answer = Response<Full<Bytes>>;

/// A JSON answer.
pub fn json(status: StatusCode, value: &impl Serialize) -> Answer {
    let body = serde_json::to_vec_pretty(value).unwrap_or_default();
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

/// A refusal: the status and why, in one line.
pub fn refuse(status: StatusCode, why: &str) -> Answer {
    json(status, &serde_json::json!({ "error": why }))
}
