//! Downloads of a folder's real data, made on the host for its preparation
//! (`mlrb tasks prepare FOLDER --network`): one file, streamed to disk, no
//! larger than `MLRB_FETCH_MAX_BYTES`, refused when the source answers an
//! error or stops short. Credentials stay on the host: the sandboxed
//! preparation sees only the files.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::io::AsyncWriteExt;

/// The default ceiling on one download and on what it unpacks to (1 TiB:
/// identify-contrails' competition files are some 450 GB).
const DEFAULT_MAX_BYTES: u64 = 1 << 40;
/// How long a source may stay silent mid-download.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// The ceiling on a download and what it unpacks to: `MLRB_FETCH_MAX_BYTES`.
pub fn max_bytes() -> u64 {
    std::env::var("MLRB_FETCH_MAX_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_BYTES)
}

/// A source's endpoint: `variable` where the user set it (a mirror, or a
/// server standing in for it), else the real one; no trailing slash.
pub fn endpoint(variable: &str, default: &str) -> String {
    let chosen = std::env::var(variable).ok().filter(|v| !v.trim().is_empty());
    chosen
        .as_deref()
        .unwrap_or(default)
        .trim()
        .trim_end_matches('/')
        .to_string()
}

/// What went wrong with an answer's status, in words, where a source's own
/// words are wanted (`hint`: what a refusal by this source usually means).
pub type Hint<'a> = &'a dyn Fn(u16) -> Option<String>;

/// Streams `url` into `to` (with `basic` credentials where given), refusing
/// an error status, a body larger than `max` and one shorter than it said.
/// The error is one line, without the credentials.
pub async fn download(url: &str, basic: Option<(&str, &str)>, to: &Path, max: u64, hint: Hint<'_>) -> Result<u64> {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(READ_TIMEOUT)
        .build()?;
    let mut request = client.get(url);
    if let Some((user, key)) = basic {
        request = request.basic_auth(user, Some(key));
    }
    let mut response = request
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("cannot be reached ({})", without_url(&e)))?;
    let status = response.status();
    if !status.is_success() {
        let why = hint(status.as_u16()).unwrap_or_default();
        bail!("answered {status}{why}");
    }
    let said = response.content_length();
    if let Some(said) = said.filter(|&n| n > max) {
        bail!("offers {said} bytes, more than {max} (MLRB_FETCH_MAX_BYTES)");
    }
    let mut file = tokio::fs::File::create(to)
        .await
        .with_context(|| format!("creating {}", to.display()))?;
    let mut got = 0u64;
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| anyhow::anyhow!("truncated: stopped after {got} bytes ({})", without_url(&e)))?;
        let Some(chunk) = chunk else { break };
        got += chunk.len() as u64;
        if got > max {
            bail!("sent more than {max} bytes (MLRB_FETCH_MAX_BYTES)");
        }
        file.write_all(&chunk).await?;
    }
    file.flush().await?;
    if let Some(said) = said.filter(|&n| n != got) {
        bail!("truncated: sent {got} of the {said} bytes it announced");
    }
    Ok(got)
}

/// A request's error without the URL (which the caller names once).
fn without_url(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(&format!(" ({url})"), "").replace(url.as_str(), "");
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text.replace('\n', " ")
}

/// A server on 127.0.0.1 answering each path with a fixed response (for
/// tests of the sources): `(status, body, announced length)`.
#[cfg(test)]
pub(super) mod server {
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    pub type Routes = HashMap<String, (u16, Vec<u8>, Option<usize>)>;

    /// Serves `routes` until the process ends; its base URL.
    pub fn serve(routes: Routes) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).map_or(true, |n| n == 0) || header == "\r\n" {
                        break;
                    }
                }
                let (status, body, length) = routes.get(&path).cloned().unwrap_or((404, b"no".to_vec(), None));
                // An announced length of 0 with a body: none announced, the body ends at close.
                let length = match length {
                    Some(0) => String::new(),
                    said => format!("content-length: {}\r\n", said.unwrap_or(body.len())),
                };
                let head = format!("HTTP/1.1 {status} X\r\n{length}connection: close\r\n\r\n");
                let mut stream = &stream;
                let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(&body));
            }
        });
        url
    }
}

#[cfg(test)]
mod tests {
    use super::server::{Routes, serve};
    use super::*;

    async fn get(routes: Routes, path: &str, max: u64) -> (Result<u64>, tempfile::TempDir) {
        let url = serve(routes);
        let dir = tempfile::tempdir().unwrap();
        let hint = |s: u16| (s == 403).then(|| ": accept the rules".to_string());
        let got = download(
            &format!("{url}{path}"),
            Some(("u", "secret-key")),
            &dir.path().join("f"),
            max,
            &hint,
        )
        .await;
        (got, dir)
    }

    #[tokio::test]
    async fn a_whole_answer_is_kept_and_a_bad_one_refused_in_one_line() {
        let mut routes = Routes::new();
        routes.insert("/ok".into(), (200, b"hello".to_vec(), None));
        routes.insert("/short".into(), (200, b"hel".to_vec(), Some(5)));
        routes.insert("/huge".into(), (200, vec![b'x'; 64], None));
        routes.insert("/unannounced".into(), (200, vec![b'x'; 64], Some(0)));
        routes.insert("/rules".into(), (403, b"{}".to_vec(), None));
        let (got, dir) = get(routes.clone(), "/ok", 100).await;
        assert_eq!(got.unwrap(), 5);
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"hello");
        for (path, says) in [
            ("/short", "truncated"),
            ("/huge", "offers 64 bytes, more than 10"),
            ("/unannounced", "sent more than 10 bytes"),
            ("/rules", "403 Forbidden: accept the rules"),
            ("/missing", "404"),
        ] {
            let error = format!("{:#}", get(routes.clone(), path, 10).await.0.unwrap_err());
            assert!(error.contains(says), "{path}: {error}");
            assert!(!error.contains('\n') && !error.contains("secret-key"), "{error}");
        }
    }

    #[test]
    fn an_endpoint_is_the_users_where_set() {
        assert_eq!(
            endpoint("MLRB_TEST_UNSET_ENDPOINT", "https://x.org/api/"),
            "https://x.org/api"
        );
    }
}
