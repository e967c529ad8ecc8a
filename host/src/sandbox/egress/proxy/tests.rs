//! The proxy against real servers on loopback, reached under names its
//! resolver maps: what it lets through, what it refuses, and its caps.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Proxy, Resolver};
use crate::network::Tally;
use crate::sandbox::egress::AllowList;

/// A server that answers every request with `body` (or a redirect to
/// `redirect`) and counts the connections it got.
async fn server(body: Vec<u8>, redirect: Option<String>) -> (SocketAddr, Arc<AtomicU32>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let hits = Arc::new(AtomicU32::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, Ordering::Relaxed);
            let (body, redirect) = (body.clone(), redirect.clone());
            tokio::spawn(async move {
                let mut head = vec![0u8; 4096];
                let _ = stream.read(&mut head).await;
                let status = match &redirect {
                    Some(to) => format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\n"),
                    None => "HTTP/1.1 200 OK\r\n".to_string(),
                };
                let head = format!("{status}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&body).await;
            });
        }
    });
    (address, hits)
}

async fn proxy(grant: AllowList, names: &[&str]) -> (SocketAddr, Arc<Proxy>) {
    counted(grant, names, Tally::shared()).await
}

/// A proxy counting against `tally`, as the episode's agent does too.
async fn counted(grant: AllowList, names: &[&str], tally: Arc<Tally>) -> (SocketAddr, Arc<Proxy>) {
    let resolver = Resolver {
        hosts: names
            .iter()
            .map(|n| (n.to_string(), IpAddr::V4(Ipv4Addr::LOCALHOST)))
            .collect(),
        system: true,
    };
    let proxy = Proxy::new(grant, resolver, tally);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(proxy.clone().serve(listener));
    (address, proxy)
}

/// Sends raw bytes to the proxy and reads until it closes (or 3 s pass).
async fn exchange(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(proxy).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

fn grant(rules: &[String]) -> AllowList {
    AllowList {
        allow: rules.iter().map(|r| r.parse().unwrap()).collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn only_granted_destinations_are_reached_and_every_connection_is_recorded() {
    let (allowed, allowed_hits) = server(b"hello".to_vec(), None).await;
    let (denied, denied_hits) = server(b"secret".to_vec(), None).await;
    let (redirecting, _) = server(Vec::new(), Some(format!("http://denied.test:{}/", denied.port()))).await;
    let rules = [
        format!("allowed.test:{}", allowed.port()),
        format!("allowed.test:{}", redirecting.port()),
        format!("localhost:{}", allowed.port()),
    ];
    let (at, proxy) = proxy(grant(&rules), &["allowed.test", "denied.test"]).await;
    let get = |host: String| format!("GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");

    let ok = exchange(at, get(format!("allowed.test:{}", allowed.port())).as_bytes()).await;
    assert!(ok.starts_with("HTTP/1.1 200") && ok.ends_with("hello"), "{ok}");
    for (what, host, says) in [
        (
            "a denied host",
            format!("denied.test:{}", denied.port()),
            "not in the task's network grant",
        ),
        (
            "an allowed host on a denied port",
            format!("allowed.test:{}", denied.port()),
            "not in the task's network grant",
        ),
        (
            "a raw IP",
            format!("127.0.0.1:{}", allowed.port()),
            "not in the task's network grant",
        ),
        (
            "the host's loopback by a system name",
            format!("localhost:{}", allowed.port()),
            "no episode may reach",
        ),
    ] {
        let answer = exchange(at, get(host).as_bytes()).await;
        assert!(answer.contains(says), "{what}: {answer}");
        assert!(!answer.contains("HTTP/1.1 200"), "{what}: {answer}");
    }
    // A redirect to a denied host is handed back, not followed.
    let moved = exchange(at, get(format!("allowed.test:{}", redirecting.port())).as_bytes()).await;
    assert!(moved.starts_with("HTTP/1.1 302"), "{moved}");
    // A request for a denied host smuggled inside an allowed tunnel goes to
    // the allowed host, which is all a tunnel can reach.
    let smuggled = format!(
        "CONNECT allowed.test:{0} HTTP/1.1\r\nHost: allowed.test:{0}\r\n\r\nGET http://denied.test:{1}/ HTTP/1.1\r\nHost: denied.test:{1}\r\n\r\n",
        allowed.port(),
        denied.port()
    );
    let tunnelled = exchange(at, smuggled.as_bytes()).await;
    assert!(
        tunnelled.contains("hello") && !tunnelled.contains("secret"),
        "{tunnelled}"
    );
    let origin = exchange(at, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(origin.contains("400") && origin.contains("egress proxy"), "{origin}");
    assert_eq!(denied_hits.load(Ordering::Relaxed), 0, "the denied server was reached");
    assert_eq!(allowed_hits.load(Ordering::Relaxed), 2);

    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = proxy.connections();
    let allowed_log: Vec<_> = log.iter().filter(|c| c.allowed).collect();
    assert_eq!(allowed_log.len(), 3, "{log:#?}");
    assert_eq!(log.iter().filter(|c| !c.allowed).count(), 4, "{log:#?}");
    let tunnel = log.iter().find(|c| c.method == "CONNECT").unwrap();
    assert!(tunnel.bytes_out > 0 && tunnel.bytes_in > 0, "{tunnel:?}");
    assert!(
        log.iter()
            .filter(|c| !c.allowed)
            .all(|c| c.reason.is_some() && c.bytes_out == 0)
    );
}

/// What the episode's agent used (its wasi:http counts in the same tally)
/// leaves the scripts only the rest of each cap.
#[tokio::test]
async fn the_caps_are_the_episodes_not_the_proxys_alone() {
    let (small, hits) = server(vec![b'y'; 100 << 10], None).await;
    let rules = [format!("small.test:{}", small.port())];
    let capped = AllowList {
        ingress_mb: Some(1),
        connections: Some(3),
        ..grant(&rules)
    };
    let tally = Tally::shared();
    let (at, _proxy) = counted(capped, &["small.test"], tally.clone()).await;
    let get = format!(
        "GET http://small.test:{}/ HTTP/1.1\r\nHost: small.test\r\n\r\n",
        small.port()
    );
    // The agent has had 1 MiB less 50 KiB: a 100 KiB answer passes the cap.
    tally.into.store((1 << 20) - (50 << 10), Ordering::Relaxed);
    let cut = exchange(at, get.as_bytes()).await;
    assert!(cut.contains("ingress cap of 1 MiB"), "{cut}");
    // The agent opens two more: with the cut one that is three, no fourth.
    tally.into.store(0, Ordering::Relaxed);
    tally.opened.fetch_add(2, Ordering::Relaxed);
    let refused = exchange(at, get.as_bytes()).await;
    assert!(refused.contains("cap of 3 connections"), "{refused}");
    assert_eq!(
        hits.load(Ordering::Relaxed),
        1,
        "only the cut request reached the server"
    );
    assert_eq!(
        tally.opened.load(Ordering::Relaxed),
        4,
        "refused at the cap are counted too"
    );
}

#[tokio::test]
async fn caps_and_stalls_end_the_connection_with_a_reason_not_the_proxy() {
    let (big, _) = server(vec![b'x'; 3 << 20], None).await;
    let rules = [format!("big.test:{}", big.port())];
    let capped = AllowList {
        ingress_mb: Some(1),
        connections: Some(3),
        idle_seconds: Some(1),
        ..grant(&rules)
    };
    let (at, proxy) = proxy(capped, &["big.test"]).await;
    let connect = format!(
        "CONNECT big.test:{0} HTTP/1.1\r\nHost: big.test:{0}\r\n\r\n",
        big.port()
    );
    let download = format!("{connect}GET / HTTP/1.1\r\nHost: big.test\r\n\r\n");
    let got = exchange(at, download.as_bytes()).await;
    assert!(got.len() < 2 << 20, "the ingress cap let {} bytes through", got.len());
    // Stalled: a tunnel opened and never used is closed after 1 s.
    let started = std::time::Instant::now();
    let mut stream = tokio::net::TcpStream::connect(at).await.unwrap();
    stream.write_all(connect.as_bytes()).await.unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the stalled tunnel was not closed"
    );
    // The third connection is the last; the fourth is refused.
    let _ = exchange(
        at,
        format!("GET http://big.test:{}/ HTTP/1.1\r\nHost: big.test\r\n\r\n", big.port()).as_bytes(),
    )
    .await;
    // Refused, with the tunnel's bytes already sent: the proxy closes the
    // connection rather than read them as requests (a client would hang).
    let refused_at = std::time::Instant::now();
    let fourth = exchange(at, download.as_bytes()).await;
    assert!(fourth.contains("cap of 3 connections"), "{fourth}");
    assert!(
        refused_at.elapsed() < Duration::from_secs(2),
        "the refused connection was kept open"
    );

    tokio::time::sleep(Duration::from_millis(200)).await;
    let reasons: Vec<String> = proxy.connections().iter().filter_map(|c| c.reason.clone()).collect();
    for says in ["ingress cap of 1 MiB", "closed as stalled", "cap of 3 connections"] {
        assert!(reasons.iter().any(|r| r.contains(says)), "no `{says}` in {reasons:?}");
    }
}

#[tokio::test]
async fn a_name_the_system_cannot_resolve_is_refused_by_the_proxy() {
    let rules = ["*.mlrb.invalid:80".to_string()];
    let (at, proxy) = proxy(grant(&rules), &[]).await;
    let answer = exchange(
        at,
        b"GET http://nx-7f3a9.mlrb.invalid/ HTTP/1.1\r\nHost: nx-7f3a9.mlrb.invalid\r\n\r\n",
    )
    .await;
    assert!(
        answer.contains("502") && answer.contains("does not resolve"),
        "{answer}"
    );
    assert!(!proxy.connections()[0].allowed);
}

#[tokio::test]
async fn the_egress_cap_cuts_an_upload_and_an_ungranted_method_is_refused() {
    // A server that reads everything it is sent.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sink = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move { tokio::io::copy(&mut stream, &mut tokio::io::sink()).await });
        }
    });
    let rules = [format!("sink.test:{}", sink.port())];
    let capped = AllowList {
        egress_mb: Some(1),
        methods: vec!["GET".into()],
        ..grant(&rules)
    };
    let (at, proxy) = proxy(capped, &["sink.test"]).await;
    let post = format!(
        "POST http://sink.test:{}/ HTTP/1.1\r\nHost: sink.test\r\nContent-Length: 1\r\n\r\nx",
        sink.port()
    );
    let refused = exchange(at, post.as_bytes()).await;
    assert!(
        refused.contains("403") && refused.contains("POST is not among the granted methods"),
        "{refused}"
    );
    // Through a tunnel (any method inside), 2 MiB out against a 1 MiB cap.
    let mut stream = tokio::net::TcpStream::connect(at).await.unwrap();
    let connect = format!(
        "CONNECT sink.test:{0} HTTP/1.1\r\nHost: sink.test:{0}\r\n\r\n",
        sink.port()
    );
    stream.write_all(connect.as_bytes()).await.unwrap();
    let chunk = vec![b'y'; 64 << 10];
    let mut sent = 0usize;
    while sent < 2 << 20 {
        if stream.write_all(&chunk).await.is_err() {
            break;
        }
        sent += chunk.len();
    }
    // Read until the proxy closes the tunnel: dropping it with the
    // proxy's answer unread would reset it before the cap is reached.
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut answer)).await;
    drop(stream);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = proxy.connections();
    let tunnel = log
        .iter()
        .find(|c| c.method == "CONNECT")
        .expect("the tunnel is recorded");
    assert!(
        tunnel
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("egress cap of 1 MiB")),
        "{tunnel:?}"
    );
    assert!(tunnel.bytes_out <= 1 << 20, "{tunnel:?}");
}
