//! Capturing a command's output: the head and tail for the caller, a capped
//! log on disk, and a running total so a flood can be stopped.

use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Result;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::{CommandLimits, Stopper, Termination};

use serde::Serialize;

/// What the caller gets of one output stream.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CapturedOutput {
    /// The kept text: the head, a note of what was cut, and the tail.
    pub text: String,
    /// Whether bytes were cut from the middle.
    pub truncated: bool,
    /// Bytes the stream carried in all.
    pub total_bytes: u64,
}

/// Keeps the first and last `cap / 2` bytes of a stream.
pub struct HeadTail {
    cap: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: u64,
    log: Option<(std::fs::File, u64)>,
    log_cap: u64,
}

impl HeadTail {
    /// Keeps `cap` bytes for the caller and up to `log_cap` bytes in `log`.
    pub fn new(cap: usize, log: Option<std::fs::File>, log_cap: u64) -> Self {
        Self {
            cap,
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            total: 0,
            log: log.map(|f| (f, 0)),
            log_cap,
        }
    }

    /// Takes the next bytes of the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if let Some((file, written)) = self.log.as_mut() {
            let room = self.log_cap.saturating_sub(*written) as usize;
            let kept = bytes.len().min(room);
            if kept > 0 && file.write_all(&bytes[..kept]).is_ok() {
                *written += kept as u64;
            }
        }
        let head_cap = self.cap / 2;
        let mut rest = bytes;
        if self.head.len() < head_cap {
            let take = rest.len().min(head_cap - self.head.len());
            self.head.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        let tail_cap = self.cap - head_cap;
        if rest.len() >= tail_cap {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - tail_cap..]);
        } else {
            self.tail.extend(rest);
            let excess = self.tail.len().saturating_sub(tail_cap);
            self.tail.drain(..excess);
        }
    }

    /// Bytes pushed so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The captured output; the log notes how much was not logged.
    pub fn finish(mut self) -> CapturedOutput {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let truncated = self.total > kept;
        if let Some((file, written)) = self.log.as_mut()
            && self.total > *written
        {
            let _ = writeln!(file, "\n[mlrb: {} more bytes not logged]", self.total - *written);
        }
        let mut bytes = std::mem::take(&mut self.head);
        if truncated {
            bytes.extend_from_slice(format!("\n[... {} bytes cut by mlrb ...]\n", self.total - kept).as_bytes());
        }
        bytes.extend(self.tail.iter());
        CapturedOutput {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            truncated,
            total_bytes: self.total,
        }
    }
}

/// A command's two output streams, drained in the background into head and
/// tail (and their log files) and counted against one flood limit.
pub struct Capture {
    stdout: tokio::task::JoinHandle<HeadTail>,
    stderr: tokio::task::JoinHandle<HeadTail>,
    flooded: Arc<tokio::sync::Notify>,
    flood_limit: u64,
}

impl Capture {
    /// Starts draining `stdout` and `stderr` under `limits`, logging to
    /// `<log_prefix>.stdout` and `.stderr`.
    pub fn start(
        stdout: impl AsyncRead + Unpin + Send + 'static,
        stderr: impl AsyncRead + Unpin + Send + 'static,
        limits: &CommandLimits,
        log_prefix: &Option<PathBuf>,
    ) -> Self {
        let total = Arc::new(AtomicU64::new(0));
        let flooded = Arc::new(tokio::sync::Notify::new());
        let sink = |stream| HeadTail::new(limits.output_cap, log_file(log_prefix, stream), limits.log_cap);
        let flood_limit = limits.output_kill_bytes;
        Self {
            stdout: tokio::spawn(drain(
                stdout,
                sink("stdout"),
                total.clone(),
                flood_limit,
                flooded.clone(),
            )),
            stderr: tokio::spawn(drain(stderr, sink("stderr"), total, flood_limit, flooded.clone())),
            flooded,
            flood_limit,
        }
    }

    /// What `done` gives, unless the command first runs past `timeout`,
    /// floods its output or is stopped by the host: then why, in words.
    pub async fn until<T>(
        &self,
        done: impl Future<Output = T>,
        timeout: Duration,
        stop: &Stopper,
    ) -> Result<T, (Termination, String)> {
        tokio::select! {
            value = done => Ok(value),
            _ = tokio::time::sleep(timeout) => Err(timed_out(timeout)),
            _ = self.flooded.notified() => Err(flooded(self.flood_limit)),
            why = stop.stopped() => Err((Termination::Killed, format!("killed: {why}"))),
        }
    }

    /// Both outputs once every writer of the streams is gone; `None` while
    /// one is still open after `grace` (the caller may end the writers and
    /// ask again).
    pub async fn outputs(&mut self, grace: Duration) -> Option<Result<(CapturedOutput, CapturedOutput)>> {
        let both = async {
            let stdout = (&mut self.stdout).await?;
            let stderr = (&mut self.stderr).await?;
            Ok((stdout.finish(), stderr.finish()))
        };
        tokio::time::timeout(grace, both).await.ok()
    }
}

/// Why a command that ran past `timeout` was ended.
pub fn timed_out(timeout: Duration) -> (Termination, String) {
    (
        Termination::TimedOut,
        format!("timed out after {:.0} s", timeout.as_secs_f64()),
    )
}

/// Why a command that printed more than `limit` bytes was ended.
pub fn flooded(limit: u64) -> (Termination, String) {
    (Termination::Killed, format!("killed: printed more than {limit} bytes"))
}

/// Reads `stream` into `sink` until it closes, adding to the output `total`
/// of the command and notifying `flooded` once that passes `flood_limit`.
async fn drain(
    mut stream: impl AsyncRead + Unpin,
    mut sink: HeadTail,
    total: Arc<AtomicU64>,
    flood_limit: u64,
    flooded: Arc<tokio::sync::Notify>,
) -> HeadTail {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return sink,
            Ok(n) => {
                sink.push(&buf[..n]);
                if total.fetch_add(n as u64, Ordering::Relaxed) + n as u64 > flood_limit {
                    flooded.notify_one();
                }
            }
        }
    }
}

/// The log file of one stream of a command, `<prefix>.<stream>`.
pub fn log_file(prefix: &Option<PathBuf>, stream: &str) -> Option<std::fs::File> {
    let prefix = prefix.as_ref()?;
    std::fs::File::create(prefix.with_extension(stream)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_and_flags_truncation() {
        let mut out = HeadTail::new(8, None, 0);
        out.push(b"abcdef");
        out.push(b"ghijkl");
        let captured = out.finish();
        assert!(captured.truncated);
        assert_eq!(captured.total_bytes, 12);
        assert!(captured.text.starts_with("abcd"));
        assert!(captured.text.ends_with("ijkl"));
        assert!(captured.text.contains("4 bytes cut"));
    }

    #[test]
    fn short_output_is_whole() {
        let mut out = HeadTail::new(64, None, 0);
        out.push(b"hello\n");
        let captured = out.finish();
        assert!(!captured.truncated);
        assert_eq!(captured.text, "hello\n");
    }
}
