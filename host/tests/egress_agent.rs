//! Network as a capability, for the agent itself: wasi:http requests go
//! out only as the episode's grant allows (host, port, a public address or
//! one the organiser mapped), under the request budget, the response cap and
//! the grant's caps; redirects come back unfollowed; every exchange is in
//! the trace, and a replay answers the agent from it with every server gone.
//! The agent is `tests/agents/http-probe`: it requests each line of its
//! `urls.txt` and answers with what came of each.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use serde_json::Value;

/// A loopback HTTP/1.1 server of the test's, one connection at a time
/// (each closed after its answer), counting the requests it got.
struct Server {
    port: u16,
    hits: Arc<AtomicU32>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a server answers: status, headers, body.
type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// The allowed server's answers; `denied` is the denied server's port.
fn allowed_routes(denied: u16) -> impl Fn(&str, &str, &[u8]) -> Answer {
    move |method, path, body| match path {
        "/hello" => (200, vec![], b"hello from allowed".to_vec()),
        "/redirect" => (
            302,
            vec![("Location".into(), format!("http://denied.mlrb.test:{denied}/secret"))],
            Vec::new(),
        ),
        "/echo" => (200, vec![], [format!("{method} echo: ").as_bytes(), body].concat()),
        "/binary" => (200, vec![], vec![0xff, 0xfe, 0x00, 0x01, 0x80]),
        "/big" => (200, vec![], vec![b'x'; 3 << 19]),
        _ => (404, vec![], b"no such page".to_vec()),
    }
}

fn server(route: impl Fn(&str, &str, &[u8]) -> Answer + Send + 'static) -> Server {
    serve(move |stream| {
        let _ = answer(stream, &route);
    })
}

/// A server handing each connection to `handle`, one at a time.
fn serve(handle: impl Fn(TcpStream) + Send + 'static) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (hits, stop) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicBool::new(false)));
    let (counted, stopping) = (hits.clone(), stop.clone());
    let thread = std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if stopping.load(Ordering::SeqCst) {
                return;
            }
            counted.fetch_add(1, Ordering::SeqCst);
            handle(stream);
        }
    });
    Server {
        port,
        hits,
        stop,
        thread: Some(thread),
    }
}

fn answer(stream: TcpStream, route: &impl Fn(&str, &str, &[u8]) -> Answer) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, headers, body) = route(method, path, &body);
    let mut stream = stream;
    write!(stream, "HTTP/1.1 {status} Whatever\r\n")?;
    for (name, value) in headers {
        write!(stream, "{name}: {value}\r\n")?;
    }
    write!(stream, "Content-Length: {}\r\nConnection: close\r\n\r\n", body.len())?;
    stream.write_all(&body)?;
    stream.flush()
}

impl Server {
    fn hits(&self) -> u32 {
        self.hits.load(Ordering::SeqCst)
    }

    /// Closes the server: from now on its port refuses connections.
    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        assert!(
            TcpStream::connect(("127.0.0.1", self.port)).is_err(),
            "port {} still open",
            self.port
        );
    }
}

/// The allowed server, the denied one, and one standing for the host's own
/// loopback services (the LLM proxy, the viewer).
struct World {
    allowed: Server,
    denied: Server,
    service: Server,
}

fn world() -> World {
    let denied = server(|_, _, _| (200, vec![], b"secret from denied".to_vec()));
    let allowed = server(allowed_routes(denied.port));
    let service = server(|_, _, _| (200, vec![], b"host service".to_vec()));
    World {
        allowed,
        denied,
        service,
    }
}

impl World {
    fn stop(&mut self) {
        for server in [&mut self.allowed, &mut self.denied, &mut self.service] {
            server.stop();
        }
    }
}

/// The names the organiser maps (`MLRB_EGRESS_HOSTS`): both servers' names
/// go to the loopback, which no episode reaches otherwise.
const HOSTS: &str = "allowed.mlrb.test=127.0.0.1,denied.mlrb.test=127.0.0.1,\
    tls.mlrb.test=127.0.0.1,wrong.mlrb.test=127.0.0.1";

/// A copy of the hostile fixture with `urls` for the probe to request and
/// `network` granted as given (none when `None`).
fn task(dir: &Path, urls: &str, network: Option<&str>) -> PathBuf {
    let task = common::hostile_task(dir, &[("urls.txt", urls)]);
    if let Some(network) = network {
        common::edit_task_toml(&task, "pids = 64", &format!("pids = 64\nnetwork = {network}"));
    }
    task
}

/// Runs the probe on `task`; the episode, and its answer's lines by number.
fn run_probe(task: &Path, out: &Path, extra: &[&str]) -> (common::Finished, BTreeMap<u32, String>) {
    run_probe_with(task, out, extra, &[])
}

/// [`run_probe`] with more variables set for mlrb.
fn run_probe_with(
    task: &Path,
    out: &Path,
    extra: &[&str],
    env: &[(&str, &Path)],
) -> (common::Finished, BTreeMap<u32, String>) {
    let mut command = common::run_command(&common::agent("http-probe"), task.to_str().unwrap(), out, extra);
    command
        .arg("--json")
        .env("MLRB_EGRESS_HOSTS", HOSTS)
        .envs(env.iter().copied());
    let finished = common::finish(command);
    assert_eq!(finished.end_reason(), "completed", "{}", finished.json);
    let answer = finished.answer();
    let lines = answer
        .lines()
        .map(|l| {
            let (n, rest) = l.split_once(' ').unwrap();
            (n.parse().unwrap(), rest.to_string())
        })
        .collect();
    (finished, lines)
}

/// The episode's `http exchange` lines' results, by request number.
fn exchanges(finished: &common::Finished) -> BTreeMap<u64, Value> {
    let events = finished.events();
    let exchanges: Vec<Value> = events
        .iter()
        .filter(|e| e["interface"] == "http" && e["function"] == "exchange")
        .map(|e| e["result"].clone())
        .collect();
    let by_number: BTreeMap<u64, Value> = exchanges
        .iter()
        .map(|e| (e["n"].as_u64().unwrap(), e.clone()))
        .collect();
    assert_eq!(by_number.len(), exchanges.len(), "each exchange once: {exchanges:?}");
    by_number
}

fn replay(dir: &Path) -> Output {
    common::mlrb().args(["replay"]).arg(dir).output().unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn the_agent_reaches_only_what_the_grant_allows_and_a_replay_needs_no_server() {
    let tmp = tempfile::tempdir().unwrap();
    let mut world = world();
    let (a, d, s) = (world.allowed.port, world.denied.port, world.service.port);
    let urls = [
        format!("GET http://allowed.mlrb.test:{a}/hello"),
        format!("GET http://denied.mlrb.test:{d}/secret"),
        format!("GET http://allowed.mlrb.test:{d}/secret"),
        format!("GET http://127.0.0.1:{a}/hello"),
        format!("GET http://localhost:{s}/"),
        format!("GET http://r4nd0m-x9q2.nowhere.mlrb.test:{a}/hello"),
        format!("GET http://allowed.mlrb.test:{a}/redirect"),
        format!("POST http://allowed.mlrb.test:{a}/echo a body of the agent's"),
        format!("GET http://allowed.mlrb.test:{a}/binary"),
    ]
    .join("\n");
    // `localhost` is granted by name, so only the resolver stands in its
    // way; the wildcard lets a name that resolves nowhere be tried.
    let grant = format!("{{ allow = [\"allowed.mlrb.test:{a}\", \"*.nowhere.mlrb.test:{a}\", \"localhost:{s}\"] }}");
    let task = task(tmp.path(), &urls, Some(&grant));
    let (finished, lines) = run_probe(&task, &tmp.path().join("runs"), &[]);

    assert!(
        lines[&1].contains("-> 200 18 bytes") && lines[&1].contains("\"hello from allowed\""),
        "{lines:?}"
    );
    for n in 2..=6 {
        assert!(
            lines[&n].ends_with("-> error ErrorCode::HttpRequestDenied"),
            "request {n}: {lines:?}"
        );
    }
    assert!(
        lines[&7].contains(&format!("-> 302 location http://denied.mlrb.test:{d}/secret 0 bytes")),
        "a redirect comes back as it is: {lines:?}"
    );
    assert!(lines[&8].contains("\"POST echo: a body of the agent's\""), "{lines:?}");
    assert!(lines[&9].contains("-> 200 5 bytes"), "{lines:?}");
    assert_eq!(
        world.denied.hits(),
        0,
        "the denied server was reached (the redirect followed?)"
    );
    assert_eq!(world.service.hits(), 0, "the host's loopback service was reached");
    assert_eq!(world.allowed.hits(), 4);

    // Every exchange is in the trace, numbered as sent, with why it was refused.
    let recorded = exchanges(&finished);
    assert_eq!(
        recorded.keys().copied().collect::<Vec<_>>(),
        (1..=9).collect::<Vec<_>>()
    );
    let first = &recorded[&1];
    assert_eq!(first["method"], "GET");
    assert_eq!(first["url"], format!("http://allowed.mlrb.test:{a}/hello"));
    assert_eq!(
        (first["allowed"].as_bool(), first["status"].as_u64()),
        (Some(true), Some(200))
    );
    assert_eq!(first["response_body"]["data"], "hello from allowed");
    assert_eq!(first["address"], format!("127.0.0.1:{a}"));
    assert!(first["bytes_out"].as_u64().unwrap() > 0 && first["bytes_in"].as_u64().unwrap() > 18);
    assert!(
        first["request_headers"].to_string().contains("allowed.mlrb.test"),
        "{first}"
    );
    for (n, why) in [
        (2, "not in the task's network grant".to_string()),
        (3, format!("allowed.mlrb.test:{d} is not in")),
        (4, "127.0.0.1".to_string()),
        (5, "localhost resolves to".to_string()),
        (6, "does not resolve".to_string()),
    ] {
        let refused = &recorded[&n];
        assert_eq!(refused["allowed"], false, "{refused}");
        assert_eq!(refused["error"]["code"], "http-request-denied", "{refused}");
        assert!(
            refused["reason"].as_str().unwrap().contains(&why),
            "request {n}: {refused}"
        );
    }
    assert_eq!(recorded[&7]["status"], 302);
    assert_eq!(recorded[&8]["request_body"]["data"], "a body of the agent's");
    assert_eq!(
        recorded[&8]["response_body"]["data"],
        "POST echo: a body of the agent's"
    );
    assert_eq!(recorded[&9]["response_body"]["base64"], true);
    assert!(recorded.values().all(|e| e["ms"].as_f64().is_some()));

    // Replayed with every server gone: the same answers, from the trace.
    world.stop();
    let replayed = replay(&finished.dir);
    let text = said(&replayed);
    assert!(replayed.status.success() && text.starts_with("identical"), "{text}");

    // A fork after the agent's last request answers them all from the
    // trace too, and keeps each exchange once.
    let mut fork = common::mlrb();
    fork.arg("fork")
        .arg(&finished.dir)
        .args(["--at-step", "2", "--json", "--run-name", "fork", "--out"])
        .arg(tmp.path().join("runs"))
        .env("MLRB_EGRESS_HOSTS", HOSTS);
    let forked = common::finish(fork);
    assert_eq!(forked.answer(), finished.answer());
    assert_eq!(exchanges(&forked).len(), 9);
}

#[test]
fn a_task_without_network_refuses_every_request() {
    let tmp = tempfile::tempdir().unwrap();
    let world = world();
    let a = world.allowed.port;
    let urls = format!("GET http://allowed.mlrb.test:{a}/hello\nGET http://127.0.0.1:{a}/hello\n");
    let task = task(tmp.path(), &urls, None);
    let (finished, lines) = run_probe(&task, &tmp.path().join("runs"), &[]);
    assert_eq!(lines.len(), 2);
    assert!(
        lines
            .values()
            .all(|l| l.ends_with("-> error ErrorCode::HttpRequestDenied")),
        "{lines:?}"
    );
    assert_eq!(world.allowed.hits(), 0);
    let recorded = exchanges(&finished);
    assert_eq!(recorded.len(), 2);
    for exchange in recorded.values() {
        assert_eq!(exchange["reason"], "the task grants no network", "{exchange}");
    }
}

#[test]
fn the_request_budget_and_the_response_cap_hold_and_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let mut world = world();
    let a = world.allowed.port;
    let urls = [
        format!("GET http://allowed.mlrb.test:{a}/big"),
        format!("GET http://allowed.mlrb.test:{a}/hello"),
        format!("GET http://allowed.mlrb.test:{a}/hello"),
        format!("GET http://allowed.mlrb.test:{a}/hello"),
        format!("GET http://allowed.mlrb.test:{a}/hello"),
    ]
    .join("\n");
    let grant = format!("{{ allow = [\"allowed.mlrb.test:{a}\"] }}");
    let task = task(tmp.path(), &urls, Some(&grant));
    let extra = ["--http-requests", "3", "--http-response-mb", "1"];
    let (finished, lines) = run_probe(&task, &tmp.path().join("runs"), &extra);
    assert!(
        lines[&1].contains("-> 200 1048576 bytes")
            // wasmtime-wasi-http 48 hands a body's error to the agent as a
            // stream failure without its code: the trace has the code.
            && lines[&1].contains("body-error "),
        "the body is cut at the cap, with an error: {lines:?}"
    );
    assert!(
        lines[&2].contains("-> 200 18 bytes") && lines[&3].contains("-> 200 18 bytes"),
        "{lines:?}"
    );
    for n in [4, 5] {
        assert!(
            lines[&n].ends_with("-> error ErrorCode::HttpRequestDenied"),
            "past the budget: {lines:?}"
        );
    }
    assert_eq!(world.allowed.hits(), 3);
    let recorded = exchanges(&finished);
    let big = &recorded[&1];
    assert_eq!(
        big["body_error"]["code"], "http-response-body-size",
        "{}",
        big["body_error"]
    );
    // The body is cut in the line and kept whole as an object.
    assert_eq!(
        big["response_body"]["data"]["bytes"],
        1 << 20,
        "{}",
        big["response_body"]["bytes"]
    );
    assert_eq!(big["response_body"]["bytes"], 1 << 20);
    assert!(
        recorded[&4]["reason"]
            .as_str()
            .unwrap()
            .contains("budget of 3 HTTP requests")
    );

    world.stop();
    let replayed = replay(&finished.dir);
    let text = said(&replayed);
    assert!(replayed.status.success() && text.starts_with("identical"), "{text}");
}

/// The agent's wasi:http and its scripts' egress proxy count against one
/// set of caps: three connections in all, whichever of them opens them.
#[test]
fn the_agent_and_its_scripts_share_the_episodes_caps() {
    let tmp = tempfile::tempdir().unwrap();
    let world = world();
    let a = world.allowed.port;
    let script = format!(
        "import urllib.error, urllib.request\n\
         try:\n    \
             r = urllib.request.urlopen('http://allowed.mlrb.test:{a}/hello', timeout=20)\n    \
             print('status', r.status, r.read().decode())\n\
         except urllib.error.HTTPError as e:\n    \
             print('refused', e.code, e.read().decode().strip())\n"
    );
    let hello = format!("GET http://allowed.mlrb.test:{a}/hello");
    let urls = [&hello, "RUN fetch.py", &hello, "RUN fetch.py", &hello]
        .map(|s| s.to_string())
        .join("\n");
    let grant = format!("{{ allow = [\"allowed.mlrb.test:{a}\"], connections = 3 }}");
    let task = task(tmp.path(), &urls, Some(&grant));
    std::fs::write(task.join("env/fetch.py"), script).unwrap();
    let (finished, lines) = run_probe(&task, &tmp.path().join("runs"), &[]);
    assert!(lines[&1].contains("-> 200 18 bytes"), "{lines:?}");
    assert!(
        lines[&2].ends_with("-> exit Some(0) status 200 hello from allowed"),
        "{lines:?}"
    );
    assert!(lines[&3].contains("-> 200 18 bytes"), "{lines:?}");
    assert!(
        lines[&4].ends_with("-> exit Some(0) refused 403 the episode's cap of 3 connections was reached"),
        "the script is refused what the agent used: {lines:?}"
    );
    assert!(
        lines[&5].ends_with("-> error ErrorCode::ConnectionLimitReached"),
        "the agent is refused what the script used: {lines:?}"
    );
    assert_eq!(world.allowed.hits(), 3);
    let network = &finished.json["episode"]["end"]["network"];
    assert_eq!(
        (network["allowed"].as_u64(), network["refused"].as_u64()),
        (Some(1), Some(1)),
        "{network}"
    );
}

/// A loopback HTTPS server (certificate for `tls.mlrb.test`, signed by a
/// CA of the test's own): the CA's PEM and the server, which answers every
/// request `hello over tls`.
fn tls_server() -> (String, Server) {
    use tokio_rustls::rustls;
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "mlrb test CA");
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["tls.mlrb.test".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let config = Arc::new(config);
    let server = serve(move |stream| {
        let connection = rustls::ServerConnection::new(config.clone()).unwrap();
        let mut tls = rustls::StreamOwned::new(connection, stream);
        // A client that refused the certificate ends the handshake here.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && tls.read(&mut byte).is_ok_and(|n| n == 1) {
            head.push(byte[0]);
        }
        let body = "hello over tls";
        let _ = write!(
            tls,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        tls.conn.send_close_notify();
        let _ = tls.flush();
    });
    (ca.pem(), server)
}

/// Live HTTPS: the agent's wasi:http verifies the server against the roots
/// the organiser added (and refuses a name the certificate does not carry);
/// a script's client does TLS itself through the proxy's CONNECT tunnel,
/// which never sees inside. A replay answers the agent with the server gone.
#[test]
fn https_is_verified_for_the_agent_and_tunnelled_for_scripts() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, mut server) = tls_server();
    let p = server.port;
    let ca_file = tmp.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let script = format!(
        "import ssl, urllib.request\n\
         context = ssl.create_default_context(cafile='ca.pem')\n\
         r = urllib.request.urlopen('https://tls.mlrb.test:{p}/hello', context=context, timeout=20)\n\
         print('status', r.status, r.read().decode())\n"
    );
    let urls = format!("GET https://tls.mlrb.test:{p}/hello\nGET https://wrong.mlrb.test:{p}/hello\nRUN tls.py\n");
    let grant = format!("{{ allow = [\"tls.mlrb.test:{p}\", \"wrong.mlrb.test:{p}\"] }}");
    let task = task(tmp.path(), &urls, Some(&grant));
    std::fs::write(task.join("env/tls.py"), script).unwrap();
    std::fs::write(task.join("env/ca.pem"), &ca).unwrap();
    let env = [("MLRB_EGRESS_CA", ca_file.as_path())];
    let (finished, lines) = run_probe_with(&task, &tmp.path().join("runs"), &[], &env);
    assert!(lines[&1].contains("-> 200 14 bytes"), "{lines:?}");
    assert!(
        lines[&2].ends_with("-> error ErrorCode::TlsCertificateError"),
        "a certificate for another name is refused: {lines:?}"
    );
    assert!(
        lines[&3].ends_with("-> exit Some(0) status 200 hello over tls"),
        "{lines:?}"
    );
    let recorded = exchanges(&finished);
    assert_eq!(
        recorded[&1]["response_body"]["data"], "hello over tls",
        "{}",
        recorded[&1]
    );
    let tunnel = &finished.json["episode"]["end"]["network"]["connections"][0];
    assert_eq!(tunnel["method"], "CONNECT", "{tunnel}");
    assert!(
        tunnel["bytes_in"].as_u64().unwrap() > 500,
        "the TLS handshake went through: {tunnel}"
    );

    server.stop();
    let replayed = replay(&finished.dir);
    let text = said(&replayed);
    assert!(replayed.status.success() && text.starts_with("identical"), "{text}");
}

/// A trust file that is not PEM is refused before anything runs.
#[test]
fn an_unreadable_trust_file_is_refused_with_its_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let task = task(tmp.path(), "", Some("true"));
    let junk = tmp.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    for (file, says) in [
        (junk.clone(), "holds no certificate"),
        (tmp.path().join("absent.pem"), "cannot read"),
    ] {
        let output = common::run_command(
            &common::agent("http-probe"),
            task.to_str().unwrap(),
            &tmp.path().join("runs"),
            &[],
        )
        .env("MLRB_EGRESS_CA", &file)
        .output()
        .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("MLRB_EGRESS_CA") && stderr.contains(says), "{stderr}");
    }
    assert!(!tmp.path().join("runs").exists(), "a refused run left a folder");
}
