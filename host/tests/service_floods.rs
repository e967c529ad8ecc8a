//! The submission service under floods, through the real `mlrb serve
//! --submissions` on loopback: thousands of idle and slowloris sockets
//! from one address and from many, past the process's limit on open files
//! (so `accept` fails with EMFILE), a slow upload, and bogus tokens from
//! hundreds of addresses. Each time a legitimate request is answered
//! (its time is printed; `benches/service_floods.rs` gives the figures).

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::floods::{self, loopback};
use common::service::Served;

/// A service folder with one open benchmark and one submitter; its token.
fn service_folder(dir: &Path) -> (PathBuf, String) {
    let service = common::service::folder(dir, "digits", common::service::OPEN_UNTIL);
    let token = common::service::submitter(&service, "alice");
    (service, token)
}

/// A legitimate request: answered 200, however long it took (printed).
fn answers(served: &Served, token: &str, when: &str) -> Duration {
    let (status, took) = floods::timed_request(
        served.address,
        "GET",
        "/v1/submissions",
        token,
        Duration::from_secs(120),
    );
    println!("{when}: a legitimate request answered {status} in {took:?}");
    assert_eq!(status, 200, "{when}: no answer (log: {})", served.log.lock().unwrap());
    took
}

/// How many of `sockets` the server has not closed.
fn still_open(sockets: &[tokio::net::TcpStream]) -> usize {
    let mut buf = [0u8; 512];
    sockets
        .iter()
        .filter(|s| matches!(s.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock))
        .count()
}

/// Sends one byte on each of `sockets` (a request head's first).
fn poke(sockets: &[tokio::net::TcpStream]) {
    for socket in sockets {
        let _ = socket.try_write(b"G");
    }
}

/// Polls until `done` holds, for at most two minutes.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(120), "{what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn socket_floods_past_the_descriptor_limit_leave_the_service_answering() {
    floods::raise_open_files();
    let dir = tempfile::tempdir().unwrap();
    let (service, token) = service_folder(dir.path());
    let per_address = "16";
    let served = Served::start(
        &service,
        256,
        &[
            "--max-connections-per-address",
            per_address,
            "--max-connections",
            "4096",
            // Long enough that only the caps can have closed a socket
            // before the floods end.
            "--header-timeout",
            "20",
            "--idle-timeout",
            "30",
        ],
    );
    let runtime = floods::runtime();
    answers(&served, &token, "before any flood");

    // 2000 idle and slowloris sockets from one address: all but its cap
    // closed at once, the newest kept.
    let one = runtime.block_on(floods::open_sockets(&[loopback(1)], 2000, served.address));
    println!(
        "one address: {} sockets connected, {} not taken",
        one.held.len(),
        one.refused
    );
    answers(&served, &token, "2000 sockets from one address open");
    let _guard = runtime.enter();
    // A byte on each first: a connection the listen backlog dropped (2000
    // connects at once overflow it) looks open to its client until it sends.
    poke(&one.held);
    // All but the address's newest 16 are closed at once (well before
    // the 20 s any timeout would take).
    let started = Instant::now();
    while still_open(&one.held) > 16 && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let open = still_open(&one.held);
    assert!(open <= 16, "{open} sockets of one address are held, over its cap of 16");

    // 2560 from 80 addresses: over the 256 descriptors the service may
    // have, so accepting fails with EMFILE until idle ones are shed.
    let addresses: Vec<_> = (2..82).map(loopback).collect();
    let many = runtime.block_on(floods::open_sockets(&addresses, 32, served.address));
    println!(
        "80 addresses: {} sockets connected, {} not taken",
        many.held.len(),
        many.refused
    );
    answers(&served, &token, "2560 sockets from 80 addresses open");
    let log = served.log.lock().unwrap().clone();
    assert!(
        log.contains("os error 24") && log.contains("serving on"),
        "the flood never ran the service out of descriptors: {log}"
    );

    // Heads never finished and idle connections are closed by the
    // service itself; then everything is let go. One byte more on each
    // first, for the connections the backlog dropped while the service was
    // out of descriptors.
    poke(&many.held);
    poke(&one.held);
    eventually("idle and slowloris sockets are never closed", || {
        still_open(&many.held) == 0 && still_open(&one.held) == 0
    });
    drop((one, many));
    answers(&served, &token, "after the floods");
}

#[test]
fn a_slow_upload_is_cut_off_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (service, token) = service_folder(dir.path());
    let served = Served::start(&service, 1024, &["--upload-timeout", "3"]);
    let mut stream = std::net::TcpStream::connect(served.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let head = format!(
        "POST /v1/submissions?benchmark=cpu-mini/1&agent=slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/wasm\r\nContent-Length: {}\r\n\r\n\0asm",
        1 << 20
    );
    stream.write_all(head.as_bytes()).unwrap();
    // A byte every 200 ms: it would take days to arrive.
    let mut writer = stream.try_clone().unwrap();
    let dripping = std::thread::spawn(move || {
        for _ in 0..600 {
            std::thread::sleep(Duration::from_millis(200));
            if writer.write_all(b"\0").is_err() {
                return;
            }
        }
    });
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("within 3 s"), "{answer}");
    dripping.join().unwrap();
    assert_eq!(
        std::fs::read_dir(service.join("staging")).unwrap().count(),
        0,
        "the cut-off upload was left in staging"
    );
    answers(&served, &token, "after the slow upload");
}

#[test]
fn bogus_tokens_from_hundreds_of_addresses_leave_real_ones_answered() {
    floods::raise_open_files();
    let dir = tempfile::tempdir().unwrap();
    let (service, token) = service_folder(dir.path());
    // The legitimate client may ask 50 times a second; each flooding
    // address sends 10 bogus tokens, well within that rate too.
    let served = Served::start(&service, 65536, &["--rate", "50", "--burst", "200"]);
    let runtime = floods::runtime();
    let addresses: Vec<_> = (1..301).map(loopback).collect();
    let flood = runtime.spawn(floods::token_flood(addresses, 10, served.address));
    let mut times = Vec::new();
    while !flood.is_finished() && times.len() < 200 {
        times.push(answers(&served, &token, "bogus tokens from 300 addresses"));
    }
    let refused = runtime.block_on(flood).unwrap();
    println!(
        "{refused} bogus tokens refused; {} legitimate requests: p50 {:.1} ms, p99 {:.1} ms",
        times.len(),
        floods::percentile_ms(&times, 50),
        floods::percentile_ms(&times, 99)
    );
    assert!(
        refused >= 2700,
        "only {refused} of 3000 bogus tokens were checked and refused"
    );
}
