//! The live transport: a metered connection (TLS for https) to the address
//! a request was admitted to, and driving it until the response's head.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite};
use wasmtime_wasi_http::RequestOptions;

use super::admit::Admitted;
use super::failure::Failure;
use super::meter::Metered;
use super::record::Record;
use super::shared::Shared;
use crate::sandbox::egress::trust;

/// How long a connection may take to open (the egress proxy's too).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) type Connection =
    hyper::client::conn::http1::Connection<hyper_util::rt::TokioIo<Box<dyn Stream>>, Full<Bytes>>;

/// What a stream to a destination is: a TCP connection, or TLS over one.
pub(super) trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// A metered connection (TLS for https) to the admitted address, ready
/// for one HTTP/1.1 request.
pub(super) async fn connect(
    shared: &Arc<Shared>,
    record: &Record,
    to: &Admitted,
    options: Option<RequestOptions>,
) -> Result<(hyper::client::conn::http1::SendRequest<Full<Bytes>>, Connection), Failure> {
    let address = to.address;
    let within = options.and_then(|o| o.connect_timeout).unwrap_or(CONNECT_TIMEOUT);
    let tcp = match tokio::time::timeout(within, tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err(Failure::ConnectionRefused(format!("{address}: {e}"))),
        Err(_) => return Err(Failure::ConnectionTimeout(format!("{address}: no answer"))),
    };
    let metered = Metered {
        inner: tcp,
        meter: record.meter.clone(),
        tally: shared.tally.clone(),
        caps: (to.caps.0, to.caps.1),
    };
    let stream: Box<dyn Stream> = match to.tls {
        false => Box::new(metered),
        true => Box::new(tls_connect(&to.host, metered, within).await?),
    };
    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| Failure::of_hyper(&e, &record.meter))
}

pub(super) enum Driven {
    Hyper(hyper::Error),
    Timeout,
}

/// Waits for the response while driving the connection (hyper's client
/// connection does the I/O only when polled); the connection, unless it
/// has ended already, still to drive for the body.
pub(super) async fn drive(
    response: impl Future<Output = Result<Response<Incoming>, hyper::Error>>,
    conn: Connection,
    within: Duration,
) -> Result<(Response<Incoming>, Option<Connection>), Driven> {
    let mut response = std::pin::pin!(response);
    let mut conn = Some(conn);
    let polled = std::future::poll_fn(|cx| {
        if let Poll::Ready(answer) = response.as_mut().poll(cx) {
            return Poll::Ready(answer.map_err(Driven::Hyper));
        }
        let Some(driving) = conn.as_mut() else {
            return Poll::Pending;
        };
        let ended = ready!(Pin::new(driving).poll(cx));
        conn = None;
        match ended {
            Ok(()) => response.as_mut().poll(cx).map(|a| a.map_err(Driven::Hyper)),
            Err(e) => Poll::Ready(Err(Driven::Hyper(e))),
        }
    });
    let outcome = tokio::time::timeout(within, polled).await;
    match outcome {
        Ok(Ok(response)) => Ok((response, conn)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Driven::Timeout),
    }
}

/// TLS over `stream` to `host`, verified against the webpki roots and the
/// organiser's (`MLRB_EGRESS_CA`).
async fn tls_connect<S: Stream>(
    host: &str,
    stream: S,
    within: Duration,
) -> Result<tokio_rustls::client::TlsStream<S>, Failure> {
    use tokio_rustls::rustls;
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let extra = trust::extra_roots().map_err(|e| format!("{e:#}"))?;
        let (_, unusable) = roots.add_parsable_certificates(extra);
        if unusable > 0 {
            return Err(format!(
                "{}: {unusable} certificates are not usable roots",
                trust::CA_VARIABLE
            ));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // HTTP/1.1 only: the client below speaks nothing else.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    });
    let config = config.clone().map_err(Failure::InternalError)?;
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| Failure::HttpRequestUriInvalid(format!("{host}: {e}")))?;
    let connecting = tokio_rustls::TlsConnector::from(config).connect(name, stream);
    match tokio::time::timeout(within, connecting).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => {
            let certificate = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)));
            Err(match certificate {
                true => Failure::TlsCertificateError(format!("{host}: {e}")),
                false => Failure::TlsProtocolError(format!("{host}: {e}")),
            })
        }
        Err(_) => Err(Failure::ConnectionTimeout(format!("{host}: no TLS handshake"))),
    }
}

#[cfg(test)]
mod tests {
    use wasmtime_wasi_http::Error;

    use super::super::fixtures::{get, shared};
    use super::super::live::live;
    use crate::network::Network;

    #[tokio::test]
    async fn https_to_a_server_that_speaks_no_tls_fails_its_handshake() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").await;
            }
        });
        // A rule naming the address is what lets a loopback one be reached.
        let grant: crate::network::AllowList =
            serde_json::from_value(serde_json::json!({ "allow": [format!("127.0.0.1:{port}")] })).unwrap();
        let shared = shared(Network::Allow(grant), Vec::new());
        let url = format!("https://127.0.0.1:{port}/");
        let Err(error) = live(shared.clone(), 1, get(&url), None).await else {
            panic!("a plain server answered over TLS");
        };
        assert!(matches!(error, Error::TlsProtocolError), "{error}");
        let recorded = shared.exchanges.take();
        assert_eq!(recorded[0]["allowed"], true);
        assert_eq!(recorded[0]["error"]["code"], "tls-protocol-error", "{}", recorded[0]);
        assert!(
            recorded[0]["bytes_out"].as_u64().unwrap() > 0,
            "the client hello was counted"
        );
    }
}
