//! The bytes of one exchange's connection: the meter that counts them (and
//! keeps why a cap cut the connection), and the stream that counts into it
//! and into the episode's tally against the grant's caps.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::network::Tally;

/// Bytes of one exchange's connection, and why a cap cut it (if it did).
#[derive(Default)]
pub(super) struct Meter {
    pub(super) out: AtomicU64,
    pub(super) into: AtomicU64,
    cut: Mutex<Option<String>>,
}

impl Meter {
    pub(super) fn cut(&self) -> Option<String> {
        self.cut.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn cut_for(&self, why: String) -> std::io::Error {
        self.cut
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(why.clone());
        std::io::Error::other(why)
    }
}

/// A connection whose bytes are counted, for the exchange and against the
/// grant's caps over all the agent's requests (past one, it fails).
pub(super) struct Metered<S> {
    pub(super) inner: S,
    pub(super) meter: Arc<Meter>,
    /// The episode's bytes sent and received, its scripts' included.
    pub(super) tally: Arc<Tally>,
    /// Egress and ingress caps, in bytes.
    pub(super) caps: (u64, u64),
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let read = (buf.filled().len() - before) as u64;
        self.meter.into.fetch_add(read, Ordering::Relaxed);
        let total = self.tally.into.fetch_add(read, Ordering::Relaxed) + read;
        if total > self.caps.1 {
            let why = format!("the grant's ingress cap of {} MiB was reached", self.caps.1 >> 20);
            return Poll::Ready(Err(self.meter.cut_for(why)));
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.tally.out.load(Ordering::Relaxed) + buf.len() as u64 > self.caps.0 {
            let why = format!("the grant's egress cap of {} MiB was reached", self.caps.0 >> 20);
            return Poll::Ready(Err(self.meter.cut_for(why)));
        }
        let written = ready!(Pin::new(&mut self.inner).poll_write(cx, buf))? as u64;
        self.meter.out.fetch_add(written, Ordering::Relaxed);
        self.tally.out.fetch_add(written, Ordering::Relaxed);
        Poll::Ready(Ok(written as usize))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
