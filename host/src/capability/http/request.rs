//! What the agent's request says: where it goes (scheme, host, port), its
//! headers as the trace keeps them, and its whole body.

use http_body_util::BodyExt;
use hyper::HeaderMap;
use wasmtime_wasi_http::WasiBody;

use super::failure::Failure;

/// The largest request body an agent may send: it is held whole, to be
/// recorded (and hashed, for a replay to compare).
pub(super) const MAX_REQUEST_BODY: usize = 16 << 20;

/// Headers about one connection, never passed on either way.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The request's headers without the hop-by-hop ones, as the trace keeps them.
pub(super) fn strip_hop_by_hop(headers: &mut HeaderMap) -> Vec<(String, String)> {
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
    headers
        .iter()
        .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect()
}

/// Where a request goes: scheme, host (an IPv6 address without brackets), port.
pub(super) fn target(uri: &hyper::Uri) -> Result<(bool, String, u16), Failure> {
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        other => {
            return Err(Failure::HttpRequestUriInvalid(format!(
                "the scheme {other:?} is not http or https"
            )));
        }
    };
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| Failure::HttpRequestUriInvalid(format!("{uri} names no host")))?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    Ok((tls, host, port))
}

/// The agent's whole request body (it writes it after `handle`, as it likes).
pub(super) async fn read_body(mut body: WasiBody) -> Result<Vec<u8>, Failure> {
    let mut sent = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Failure::of_request_body(&e))?;
        if let Ok(data) = frame.into_data() {
            sent.extend_from_slice(&data);
            if sent.len() > MAX_REQUEST_BODY {
                return Err(Failure::HttpRequestBodySize(Some(sent.len() as u64)));
            }
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_take_the_scheme_s_port_and_hop_by_hop_headers_go() {
        let parse = |uri: &str| target(&uri.parse().unwrap());
        assert_eq!(parse("http://a.example/x").unwrap(), (false, "a.example".into(), 80));
        assert_eq!(parse("https://a.example/x").unwrap(), (true, "a.example".into(), 443));
        assert_eq!(
            parse("http://a.example:8080").unwrap(),
            (false, "a.example".into(), 8080)
        );
        assert_eq!(parse("https://[::1]:8443/").unwrap(), (true, "::1".into(), 8443));
        assert!(parse("/relative").is_err());
        let mut headers = HeaderMap::new();
        for (name, value) in [("te", "trailers"), ("connection", "close"), ("accept", "text/plain")] {
            headers.insert(name, value.parse().unwrap());
        }
        assert_eq!(
            strip_hop_by_hop(&mut headers),
            vec![("accept".to_string(), "text/plain".to_string())]
        );
    }
}
