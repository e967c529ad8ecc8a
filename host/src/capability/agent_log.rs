//! The agent's stdout and stderr: written to `agent.log`, cut at a cap.
//!
//! wasmtime's `MemoryOutputPipe` traps a guest that writes past its capacity;
//! an agent that prints too much must instead lose the excess, visibly.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// One capped log file shared by the agent's stdout and stderr.
#[derive(Clone)]
pub struct AgentLog {
    inner: Arc<Mutex<LogState>>,
}

struct LogState {
    file: Option<File>,
    written: u64,
    dropped: u64,
    cap: u64,
}

impl AgentLog {
    /// Creates the log at `path`, keeping at most `cap` bytes of output.
    pub fn create(path: &Path, cap: u64) -> std::io::Result<Self> {
        let file = File::create(path)?;
        Ok(Self {
            inner: Arc::new(Mutex::new(LogState {
                file: Some(file),
                written: 0,
                dropped: 0,
                cap,
            })),
        })
    }

    /// Accepts every byte; keeps those under the cap.
    fn write(&self, bytes: &[u8]) {
        let mut state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = state.cap.saturating_sub(state.written) as usize;
        let kept = bytes.len().min(room);
        if kept > 0 {
            if let Some(file) = state.file.as_mut() {
                // A failing log disk must not fail the agent; it is reported at close.
                if file.write_all(&bytes[..kept]).is_err() {
                    state.file = None;
                }
            }
            state.written += kept as u64;
        }
        state.dropped += (bytes.len() - kept) as u64;
    }

    /// Bytes the agent printed that were not kept.
    pub fn dropped(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).dropped
    }

    /// Writes the truncation marker, if any, and flushes.
    pub fn close(&self) {
        let mut state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let dropped = state.dropped;
        if let Some(file) = state.file.as_mut() {
            if dropped > 0 {
                let _ = writeln!(
                    file,
                    "\n[mlrb: {dropped} more bytes of agent output were dropped at the log cap]"
                );
            }
            let _ = file.flush();
        }
    }
}

impl IsTerminal for AgentLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for AgentLog {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for AgentLog {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        AgentLog::write(self, &bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always ready: what is over the cap is dropped, never blocked on.
        Ok(1 << 20)
    }
}

#[async_trait::async_trait]
impl Pollable for AgentLog {
    async fn ready(&mut self) {}
}

impl AsyncWrite for AgentLog {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        AgentLog::write(&self, buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
