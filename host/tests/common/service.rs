//! `mlrb serve --submissions` for a test: a service folder with one
//! benchmark and a submitter, the service started as a process (with a
//! limit on its open files, if asked), its address and its log.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A closing time far ahead: the version stays open.
pub const OPEN_UNTIL: &str = "2099-01-01T00:00:00Z";
/// A closing time long past: the version is closed.
pub const CLOSED: &str = "2000-01-01T00:00:00Z";

/// A service folder with benchmark `cpu-mini/1` on `task` (a name or a
/// task folder), closing at `closes`, with a quota nobody runs into.
pub fn folder(dir: &Path, task: &str, closes: &str) -> PathBuf {
    let service = dir.join("service");
    let made = super::mlrb()
        .args(["submissions", "init"])
        .arg(&service)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    publish(&service, task, closes);
    service
}

/// (Re)publishes `cpu-mini/1`.
pub fn publish(service: &Path, task: &str, closes: &str) {
    std::fs::write(
        service.join("benchmarks/cpu-mini.toml"),
        format!(
            "name = \"cpu-mini\"\nversion = \"1\"\ncloses = \"{closes}\"\nmax_agent_mb = 16\n\
             [plan]\ntasks = [{task:?}]\nseeds = 1\nretries = 0\n\
             [quota]\nper_day = 100\nin_flight = 100\ncooldown_seconds = 0\n"
        ),
    )
    .unwrap();
}

/// A new submitter's token.
pub fn submitter(service: &Path, name: &str) -> String {
    let out = super::mlrb()
        .args(["submissions", "add-submitter"])
        .arg(service)
        .arg(name)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The service as a process with at most `open_files` descriptors, its
/// address, and everything it logs; killed when dropped.
pub struct Served {
    child: Child,
    /// Where it listens.
    pub address: SocketAddr,
    /// What it logged so far.
    pub log: Arc<Mutex<String>>,
}

impl Served {
    /// Starts `mlrb serve --submissions service` with `extra` options.
    pub fn start(service: &Path, open_files: u64, extra: &[&str]) -> Self {
        let mut command = super::mlrb();
        command
            .args(["serve", "--submissions"])
            .arg(service)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stderr(Stdio::piped())
            .stdout(Stdio::null());
        let limit = libc::rlimit {
            rlim_cur: open_files,
            rlim_max: open_files,
        };
        // SAFETY: setrlimit is async-signal-safe and reads only `limit`.
        unsafe {
            command.pre_exec(move || {
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                Ok(())
            })
        };
        let mut child = command.spawn().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let address = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the service ended before serving"
            );
            if let Some(url) = line
                .strip_prefix("serving submissions")
                .and_then(|l| l.split("http://").nth(1))
            {
                break url.trim().trim_end_matches('/').parse().unwrap();
            }
        };
        let log = Arc::new(Mutex::new(String::new()));
        let kept = log.clone();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                kept.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Self { child, address, log }
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Stops it with SIGINT and waits.
    pub fn stop(mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let started = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(started.elapsed() < Duration::from_secs(60), "the service did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw HTTP/1.1 request: the status, the head's lines, the body.
pub fn exchange(url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String, Vec<u8>) {
    use std::io::{Read, Write};
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(answer.len());
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    let body = answer.get(split + 4..).unwrap_or_default().to_vec();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head, body)
}

/// Fails unless `mlrb verify PATH --key` with the service's public key
/// passes (a run folder, or a records archive as downloaded).
pub fn assert_verifies(path: &Path, service: &Path) {
    let verified = super::mlrb()
        .arg("verify")
        .arg(path)
        .arg("--key")
        .arg(service.join("service.key.pub"))
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
}

/// The first link of an HTML page that `wanted` accepts.
pub fn link_in(page: &str, wanted: impl Fn(&str) -> bool) -> String {
    page.split("href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .find(|l| wanted(l))
        .unwrap_or_else(|| panic!("no such link: {page}"))
        .to_string()
}
