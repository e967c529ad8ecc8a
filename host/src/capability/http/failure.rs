//! Why a request failed: the wasi:http error code the agent is told, and
//! the reason the trace keeps with it.

use serde::{Deserialize, Serialize};
use wasmtime_wasi_http::Error;

use super::meter::Meter;

/// Why a request failed, as the agent is told (a wasi:http error code) and
/// the trace keeps it (with the reason, which the code has no room for).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "code", content = "detail", rename_all = "kebab-case")]
pub(super) enum Failure {
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
    pub(super) fn to_error(&self) -> Error {
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
    pub(super) fn of_request_body(error: &Error) -> Self {
        match error {
            Error::HttpRequestBodySize(size) => Self::HttpRequestBodySize(*size),
            other => Self::InternalError(format!("the request body: {other}")),
        }
    }

    /// A hyper error on a connection, or the cap `meter` cut it for.
    pub(super) fn of_hyper(error: &hyper::Error, meter: &Meter) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
