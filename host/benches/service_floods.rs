//! The submission service under floods on loopback (`mlrb serve
//! --submissions`, at most 256 open files): how long a legitimate
//! authenticated request takes (p50, p99) with nothing else going on,
//! while bogus tokens come from 300 addresses (10 each, within each
//! address's rate), and while 2000 idle and slowloris sockets from one
//! address and 2560 from 80 more are open (past the descriptor limit, so
//! `accept` fails with EMFILE until idle connections are shed). Client and
//! server share this machine's cores.

#[path = "../tests/common/floods.rs"]
mod floods;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use floods::loopback;

/// The `mlrb` measured: this build's, or `MLRB_BENCH_BIN` (an earlier
/// build, for a before-and-after on one machine).
fn mlrb() -> Command {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let binary = std::env::var("MLRB_BENCH_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_mlrb").into());
    let mut command = Command::new(binary);
    command.env("MLRB_TASKS_DIR", root.join("tasks")).env_remove("MLRB_LOG");
    command
}

/// A service folder with one benchmark and a submitter: its token.
fn folder(service: &Path) -> String {
    assert!(
        mlrb()
            .args(["submissions", "init"])
            .arg(service)
            .status()
            .unwrap()
            .success()
    );
    std::fs::write(
        service.join("benchmarks/b.toml"),
        "name = \"b\"\nversion = \"1\"\ncloses = \"2099-01-01T00:00:00Z\"\n[plan]\ntasks = [\"digits\"]\n[quota]\nper_day = 5\n",
    )
    .unwrap();
    let out = mlrb()
        .args(["submissions", "add-submitter"])
        .arg(service)
        .arg("alice")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The service with at most 256 open files (unless `MLRB_BENCH_NOFILE`
/// says otherwise), and its address.
fn start(service: &Path) -> (Child, SocketAddr) {
    let mut command = mlrb();
    command
        .args(["serve", "--submissions"])
        .arg(service)
        .args(["--listen", "127.0.0.1:0", "--rate", "50", "--burst", "400"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null());
    // MLRB_BENCH_NOFILE: another limit (an earlier build dies at 256 under
    // the token flood alone, whose figure is then wanted apart).
    let files = std::env::var("MLRB_BENCH_NOFILE")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256);
    let limit = libc::rlimit {
        rlim_cur: files,
        rlim_max: files,
    };
    // SAFETY: setrlimit is async-signal-safe and reads only `limit`.
    unsafe {
        command.pre_exec(move || {
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        })
    };
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let address = loop {
        let line = lines.next().expect("the service ended").unwrap();
        if let Some(url) = line.split("http://").nth(1) {
            break url.trim_end_matches('/').parse().unwrap();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (child, address)
}

/// `n` legitimate requests one after another (fewer if `until` finishes
/// first): the times of those answered 200, and how many were not.
fn legitimate(address: SocketAddr, token: &str, n: usize, until: impl Fn() -> bool) -> (Vec<Duration>, usize) {
    let (mut times, mut failed) = (Vec::new(), 0);
    while times.len() + failed < n && !until() {
        let (status, took) = floods::timed_request(address, "GET", "/v1/submissions", token, Duration::from_secs(30));
        match status {
            200 => times.push(took),
            _ => failed += 1,
        }
    }
    (times, failed)
}

fn report(what: &str, (times, failed): &(Vec<Duration>, usize)) {
    println!(
        "service_floods: {what}: {} legitimate requests answered, p50 {:.1} ms, p99 {:.1} ms; {failed} not answered",
        times.len(),
        floods::percentile_ms(times, 50),
        floods::percentile_ms(times, 99)
    );
}

fn main() {
    floods::raise_open_files();
    let tmp = tempfile::tempdir().unwrap();
    let service = tmp.path().join("service");
    let token = folder(&service);
    let (mut child, address) = start(&service);
    let runtime = floods::runtime();
    report("quiet", &legitimate(address, &token, 100, || false));

    let addresses: Vec<_> = (1..301).map(loopback).collect();
    let flood = runtime.spawn(floods::token_flood(addresses, 10, address));
    let answered = legitimate(address, &token, 100_000, || flood.is_finished());
    let refused = runtime.block_on(flood).unwrap();
    report(&format!("{refused} bogus tokens from 300 addresses"), &answered);

    let one = runtime.block_on(floods::open_sockets(&[loopback(1)], 2000, address));
    let many: Vec<_> = (2..82).map(loopback).collect();
    let many = runtime.block_on(floods::open_sockets(&many, 32, address));
    report(
        &format!(
            "{} idle and slowloris sockets open (256 descriptors)",
            one.held.len() + many.held.len()
        ),
        &legitimate(address, &token, 100, || false),
    );
    drop((one, many));
    report("after the floods", &legitimate(address, &token, 100, || false));
    let _ = child.kill();
    let _ = child.wait();
}
