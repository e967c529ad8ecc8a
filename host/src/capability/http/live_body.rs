//! A live response body as the agent reads it: what it reads is recorded,
//! cut at the response cap, and ended when no byte comes for the idle time.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use hyper::body::{Frame, Incoming};
use wasmtime_wasi_http::Error;

use super::failure::Failure;
use super::record::Record;

/// A live response body: what the agent reads of it is recorded, cut at
/// the response cap, and ended when no byte comes for the idle time.
pub(super) struct LiveBody {
    pub(super) incoming: Incoming,
    pub(super) idle: tokio::time::Interval,
    pub(super) cap: u64,
    pub(super) received: u64,
    /// An error to end the body with, after the data before it.
    pub(super) pending: Option<Failure>,
    pub(super) done: bool,
    pub(super) record: Record,
}

impl LiveBody {
    fn end(&mut self, failure: Option<Failure>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        self.done = true;
        self.record.exchange.complete = true;
        match failure {
            None => Poll::Ready(None),
            Some(failure) => {
                self.record.fail(&failure);
                let error = failure.to_error();
                self.record.exchange.body_error = Some(failure);
                Poll::Ready(Some(Err(error)))
            }
        }
    }
}

impl hyper::body::Body for LiveBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(failure) = this.pending.take() {
            return this.end(Some(failure));
        }
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(None) => this.end(None),
            Poll::Ready(Some(Err(e))) => {
                let failure = Failure::of_hyper(&e, &this.record.meter);
                this.end(Some(failure))
            }
            Poll::Ready(Some(Ok(frame))) => {
                this.idle.reset();
                let Ok(mut data) = frame.into_data() else {
                    // Trailers: not the agent's to see in a replay either.
                    return this.end(None);
                };
                let room = this.cap - this.received;
                if data.len() as u64 > room {
                    data.truncate(room as usize);
                    this.pending = Some(Failure::HttpResponseBodySize(this.cap));
                    if data.is_empty() {
                        let failure = this.pending.take();
                        return this.end(failure);
                    }
                }
                this.received += data.len() as u64;
                this.record.response_body.extend_from_slice(&data);
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Pending => {
                ready!(this.idle.poll_tick(cx));
                let idle = this.idle.period().as_secs();
                this.end(Some(Failure::ConnectionReadTimeout(format!("no byte for {idle} s"))))
            }
        }
    }
}
