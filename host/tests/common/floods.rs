//! Floods a server on loopback as a hostile client would, from addresses
//! of 127.0.0.0/8 of its choosing: idle sockets, slowloris heads, bogus
//! tokens; and one legitimate request timed beside them. Shared by the
//! tests (which assert it is answered) and `benches/service_floods.rs`
//! (which prints how long it took). Self-contained: no other helper.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

/// Raises this process's soft limit on open files to its hard one: a
/// flood holds thousands of sockets.
pub fn raise_open_files() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write and read only `limit`.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
}

/// 127.0.0.`n` (n from 2: 127.0.0.1 is the legitimate client's).
pub fn loopback(n: u32) -> IpAddr {
    let n = n + 1;
    IpAddr::V4(Ipv4Addr::new(127, (n >> 16) as u8, (n >> 8) as u8, n as u8))
}

/// A runtime for the flood's sockets.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A connection to `to` from address `from`, or None when the server
/// does not take it within 3 s.
pub async fn connect_from(from: IpAddr, to: SocketAddr) -> Option<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::new(from, 0)).ok()?;
    tokio::time::timeout(Duration::from_secs(3), socket.connect(to))
        .await
        .ok()?
        .ok()
}

/// What a flood of sockets holds open.
pub struct Sockets {
    /// The sockets the server took (and has not closed, as far as is known).
    pub held: Vec<tokio::net::TcpStream>,
    /// Connections the server did not take within the connect timeout.
    pub refused: usize,
}

/// Opens `per_address` sockets from each of `addresses` to `to`, 200
/// connecting at a time (more would overflow the listen backlog and leave
/// connections the server never saw); every other one sends the start of
/// a request head and never finishes it (slowloris), the rest send nothing.
pub async fn open_sockets(addresses: &[IpAddr], per_address: usize, to: SocketAddr) -> Sockets {
    let mut tasks = tokio::task::JoinSet::new();
    let connecting = std::sync::Arc::new(tokio::sync::Semaphore::new(200));
    for (a, &from) in addresses.iter().enumerate() {
        for i in 0..per_address {
            let slow = (a + i) % 2 == 1;
            let connecting = connecting.clone();
            tasks.spawn(async move {
                let _turn = connecting.acquire().await.ok()?;
                let mut stream = connect_from(from, to).await?;
                if slow {
                    let _ = stream
                        .write_all(b"GET /v1/benchmarks HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                        .await;
                }
                Some(stream)
            });
        }
    }
    let mut sockets = Sockets {
        held: Vec::new(),
        refused: 0,
    };
    while let Some(done) = tasks.join_next().await {
        match done.ok().flatten() {
            Some(stream) => sockets.held.push(stream),
            None => sockets.refused += 1,
        }
    }
    sockets
}

/// One plain HTTP/1.1 request from 127.0.0.1 (`Connection: close`): its
/// status (0: no answer within `patience`) and how long it took.
pub fn timed_request(to: SocketAddr, method: &str, path: &str, token: &str, patience: Duration) -> (u16, Duration) {
    let started = Instant::now();
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&to, patience) else {
        return (0, started.elapsed());
    };
    stream.set_read_timeout(Some(patience)).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {to}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\n\r\n"
    );
    if stream.write_all(head.as_bytes()).is_err() {
        return (0, started.elapsed());
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, started.elapsed())
}

/// A token of the service's form that no service issued.
pub fn bogus_token(n: usize) -> String {
    format!("mlrbs_{:012x}_{:064x}", n * 7919 % 0xffff_ffff_ffff, n)
}

/// From each of `addresses`, `each` requests with bogus tokens, one after
/// another (within the address's rate), all addresses at once; returns
/// how many were answered 401.
pub async fn token_flood(addresses: Vec<IpAddr>, each: usize, to: SocketAddr) -> usize {
    let mut tasks = tokio::task::JoinSet::new();
    for (a, from) in addresses.into_iter().enumerate() {
        tasks.spawn(async move {
            let mut refused = 0;
            for i in 0..each {
                if bogus_request(from, to, &bogus_token(a * each + i)).await == Some(401) {
                    refused += 1;
                }
            }
            refused
        });
    }
    let mut refused = 0;
    while let Some(done) = tasks.join_next().await {
        refused += done.unwrap_or(0);
    }
    refused
}

async fn bogus_request(from: IpAddr, to: SocketAddr, token: &str) -> Option<u16> {
    use tokio::io::AsyncReadExt;
    let mut stream = connect_from(from, to).await?;
    let head = format!(
        "GET /v1/submissions HTTP/1.1\r\nHost: {to}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.ok()?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut answer))
        .await
        .ok()?
        .ok()?;
    String::from_utf8_lossy(&answer).split_whitespace().nth(1)?.parse().ok()
}

/// The p-th percentile (0..=100) of `times`, in milliseconds.
pub fn percentile_ms(times: &[Duration], p: usize) -> f64 {
    let mut sorted: Vec<Duration> = times.to_vec();
    sorted.sort();
    let i = (sorted.len().saturating_sub(1) * p) / 100;
    sorted.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
}
