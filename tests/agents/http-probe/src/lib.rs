//! An agent that sends HTTP requests of its own, through wasi:http: one a
//! line of `urls.txt` in its workspace (`METHOD URL [BODY]`), or runs a
//! workspace script where a line says `RUN script.py` (the scripts' own
//! network goes through the episode's egress proxy). What came of
//! each (its status, `location` header, body size, hash and text, or the
//! error) is one line of `responses.txt` and of its answer, so a replay
//! that answered any request differently would answer differently.

use mlrb_sdk::{Agent, TaskInfo, workspace};
use wasip2::http::outgoing_handler;
use wasip2::http::types::{self, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

struct HttpProbe;

/// Characters of a body shown in the answer.
const SHOWN: usize = 200;

impl Agent for HttpProbe {
    fn run(_: TaskInfo) -> Result<String, String> {
        let urls = workspace::read("urls.txt").map_err(|e| format!("reading urls.txt: {e:?}"))?;
        let mut answer = String::new();
        let lines = urls
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        for (i, line) in lines.enumerate() {
            if let Some(script) = line.strip_prefix("RUN ") {
                answer.push_str(&format!("{} RUN {script} -> {}\n", i + 1, run(script.trim())));
                continue;
            }
            let mut parts = line.splitn(3, ' ');
            let (method, url, body) = (parts.next().unwrap_or("GET"), parts.next().unwrap_or(""), parts.next());
            let seen = fetch(method, url, body).unwrap_or_else(|e| format!("error {e}"));
            answer.push_str(&format!("{} {method} {url} -> {seen}\n", i + 1));
        }
        workspace::write("responses.txt", &answer).map_err(|e| format!("writing responses.txt: {e:?}"))?;
        Ok(answer)
    }
}

/// A workspace script's exit code and its output's first line.
fn run(script: &str) -> String {
    match mlrb_sdk::exec::run(script, &[]) {
        Ok(ran) => format!(
            "exit {:?} {}",
            ran.exit_code,
            ran.stdout.lines().next().unwrap_or("").trim()
        ),
        Err(e) => format!("error {e:?}"),
    }
}

/// One request; what came of it, in one line.
fn fetch(method: &str, url: &str, body: Option<&str>) -> Result<String, String> {
    let (scheme, rest) = url.split_once("://").ok_or("not an absolute URL")?;
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_string()),
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        other => Method::Other(other.to_string()),
    };
    let headers = Fields::new();
    if body.is_some() {
        headers
            .append("content-type", b"text/plain")
            .map_err(|e| format!("{e:?}"))?;
    }
    let request = OutgoingRequest::new(headers);
    request.set_method(&method).map_err(|()| "a bad method")?;
    request.set_scheme(Some(&scheme)).map_err(|()| "a bad scheme")?;
    request.set_authority(Some(authority)).map_err(|()| "a bad authority")?;
    request.set_path_with_query(Some(path)).map_err(|()| "a bad path")?;
    let outgoing = request.body().map_err(|()| "no request body")?;
    let future = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    if let Some(body) = body
        && let Ok(stream) = outgoing.write()
    {
        // A refused request's body is never read: the stream closes.
        for chunk in body.as_bytes().chunks(4096) {
            if stream.blocking_write_and_flush(chunk).is_err() {
                break;
            }
        }
    }
    let _ = OutgoingBody::finish(outgoing, None);
    let response = loop {
        match future.get() {
            Some(response) => break response,
            None => future.subscribe().block(),
        }
    };
    let response = response
        .map_err(|()| "the response was taken twice")?
        .map_err(|e| format!("{e:?}"))?;
    let status = response.status();
    let location = response
        .headers()
        .get("location")
        .first()
        .map(|v| format!(" location {}", String::from_utf8_lossy(v)))
        .unwrap_or_default();
    let incoming = response.consume().map_err(|()| "no response body")?;
    let mut data = Vec::new();
    let mut ended = String::new();
    {
        let stream = incoming.stream().map_err(|()| "no response body stream")?;
        loop {
            match stream.blocking_read(64 << 10) {
                Ok(chunk) => data.extend(chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    ended = format!(" body-error {:?}", types::http_error_code(&e));
                    break;
                }
            }
        }
    }
    let _ = IncomingBody::finish(incoming);
    let text = String::from_utf8_lossy(&data);
    let shown: String = text.chars().take(SHOWN).collect();
    Ok(format!(
        "{status}{location} {} bytes fnv {:016x}{ended} body {shown:?}",
        data.len(),
        fnv(&data)
    ))
}

/// FNV-1a, 64 bits: a hash of the whole body, for the answer.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

mlrb_sdk::register_agent!(HttpProbe);
