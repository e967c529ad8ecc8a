//! The egress proxy's cost (`sandbox::egress::proxy`): the latency it adds
//! to one small HTTP request (through it against straight to the server,
//! each a fresh connection, as a script's requests are), and its
//! throughput for one large download through a CONNECT tunnel. Server,
//! proxy and client share this machine's cores, on loopback.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use mlrb::network::Tally;
use mlrb::sandbox::egress::AllowList;
use mlrb::sandbox::egress::proxy::{Proxy, Resolver};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REQUESTS: usize = 2000;
const DOWNLOAD: usize = 1 << 30;

/// A server answering `small` bytes to each request, or `DOWNLOAD` bytes
/// when the path is `/big`.
async fn server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut head = vec![0u8; 4096];
                let n = stream.read(&mut head).await.unwrap_or(0);
                let big = String::from_utf8_lossy(&head[..n]).contains("/big");
                let size = if big { DOWNLOAD } else { 64 };
                let _ = stream
                    .write_all(
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n").as_bytes(),
                    )
                    .await;
                let chunk = vec![b'x'; 1 << 20];
                let mut left = size;
                while left > 0 {
                    let n = left.min(chunk.len());
                    if stream.write_all(&chunk[..n]).await.is_err() {
                        return;
                    }
                    left -= n;
                }
            });
        }
    });
    address
}

/// A grant of `origin` (as origin.test) with room for the whole bench, and
/// a resolver that maps that name.
fn granted(origin: SocketAddr) -> (AllowList, Resolver) {
    let grant = AllowList {
        allow: vec![format!("origin.test:{}", origin.port()).parse().unwrap()],
        ingress_mb: Some(4096),
        connections: Some(1_000_000),
        ..Default::default()
    };
    let resolver = Resolver {
        hosts: [("origin.test".to_string(), IpAddr::V4(Ipv4Addr::LOCALHOST))].into(),
        system: false,
    };
    (grant, resolver)
}

async fn request(to: SocketAddr, line: &str) -> usize {
    let mut stream = tokio::net::TcpStream::connect(to).await.unwrap();
    stream.write_all(line.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    answer.len()
}

fn percentile(mut times: Vec<Duration>, p: f64) -> f64 {
    times.sort();
    times[((times.len() as f64 * p) as usize).min(times.len() - 1)].as_secs_f64() * 1e6
}

#[tokio::main]
async fn main() {
    let origin = server().await;
    let (grant, resolver) = granted(origin);
    let proxy = Proxy::new(grant, resolver, Tally::shared());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    tokio::spawn(proxy.clone().serve(listener));

    let direct_line = "GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n".to_string();
    let proxied_line = format!(
        "GET http://origin.test:{}/ HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n",
        origin.port()
    );
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..REQUESTS {
        let started = Instant::now();
        request(origin, &direct_line).await;
        direct.push(started.elapsed());
        let started = Instant::now();
        assert!(request(at, &proxied_line).await > 64);
        proxied.push(started.elapsed());
    }
    let (d50, p50) = (percentile(direct.clone(), 0.5), percentile(proxied.clone(), 0.5));
    let (d99, p99) = (percentile(direct, 0.99), percentile(proxied, 0.99));
    println!(
        "egress: {REQUESTS} small requests, each a new connection: straight p50 {d50:.0} µs p99 {d99:.0} µs; \
         through the proxy p50 {p50:.0} µs p99 {p99:.0} µs: {:.0} µs added at the median",
        p50 - d50
    );

    let tunnel = format!(
        "CONNECT origin.test:{0} HTTP/1.1\r\nHost: origin.test:{0}\r\n\r\nGET /big HTTP/1.1\r\nHost: origin.test\r\n\r\n",
        origin.port()
    );
    let started = Instant::now();
    let got = request(at, &tunnel).await;
    let elapsed = started.elapsed().as_secs_f64();
    assert!(got > DOWNLOAD, "the download was cut at {got} bytes");
    let direct_started = Instant::now();
    request(origin, "GET /big HTTP/1.1\r\nHost: origin.test\r\n\r\n").await;
    let direct_elapsed = direct_started.elapsed().as_secs_f64();
    println!(
        "egress: one {} MiB download through a CONNECT tunnel: {:.0} MiB/s (straight: {:.0} MiB/s)",
        DOWNLOAD >> 20,
        (DOWNLOAD >> 20) as f64 / elapsed,
        (DOWNLOAD >> 20) as f64 / direct_elapsed
    );
    let logged = proxy.connections();
    assert_eq!(logged.len(), REQUESTS + 1);
    assert!(
        logged.iter().all(|c| c.allowed && c.reason.is_none()),
        "a connection ended early"
    );
    from_a_sandbox(origin).await;
}

/// What a script in bubblewrap sees: its requests go through the relay
/// inside the sandbox, the Unix socket and the proxy.
const SANDBOXED: &str = r#"
import json, socket, sys, time
port, n, big = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def fetch(payload):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(payload)
    got = 0
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            return got
        got += len(chunk)
times = []
for _ in range(n):
    t = time.perf_counter()
    fetch(b"GET http://origin.test:%d/ HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n" % port)
    times.append(time.perf_counter() - t)
times.sort()
t = time.perf_counter()
got = fetch(b"CONNECT origin.test:%d HTTP/1.1\r\n\r\nGET /big HTTP/1.1\r\nHost: origin.test\r\n\r\n" % port)
print(json.dumps({"p50_us": times[n // 2] * 1e6, "p99_us": times[int(n * 0.99)] * 1e6,
                  "mib_s": (got >> 20) / (time.perf_counter() - t), "got": got}))
"#;

async fn from_a_sandbox(origin: SocketAddr) {
    use mlrb::sandbox::{Command, CommandLimits, Reach, Sandbox, egress::gateway::Gateway};
    let Ok(sandbox) = mlrb::sandbox::local::LocalSandbox::detect() else {
        println!("egress: no bubblewrap here; the sandboxed figures are skipped");
        return;
    };
    let (grant, resolver) = granted(origin);
    let gateway = Gateway::with_resolver(grant, resolver, Tally::shared()).unwrap();
    let n = 500;
    let argv = [
        "python3",
        "-c",
        SANDBOXED,
        &origin.port().to_string(),
        &n.to_string(),
        &DOWNLOAD.to_string(),
    ];
    let outcome = sandbox
        .run(Command {
            argv: argv.map(String::from).to_vec(),
            cwd: "/tmp".into(),
            mounts: Vec::new(),
            env: Vec::new(),
            network: Reach::Proxy(gateway.socket()),
            limits: CommandLimits::new(&mlrb::limits::Limits::default(), Duration::from_secs(300)),
            gpus: Vec::new(),
            log_prefix: None,
            stop: Default::default(),
            meter: Default::default(),
        })
        .await
        .unwrap();
    assert!(outcome.success(), "{}", outcome.stderr.text);
    let figures: serde_json::Value = serde_json::from_str(outcome.stdout.text.trim()).unwrap();
    assert!(figures["got"].as_u64().unwrap() > DOWNLOAD as u64);
    println!(
        "egress: from a script in bubblewrap (relay, Unix socket, proxy): {n} small requests p50 {:.0} µs p99 {:.0} µs; \
         one {} MiB download {:.0} MiB/s",
        figures["p50_us"].as_f64().unwrap(),
        figures["p99_us"].as_f64().unwrap(),
        DOWNLOAD >> 20,
        figures["mib_s"].as_f64().unwrap()
    );
}
