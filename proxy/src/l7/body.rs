//! [`CountingBody`]: a streamed body that counts its bytes as the sandbox's activity and keeps
//! the request's [`ConnectionGuard`] alive until the body ends.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::activity::ConnectionGuard;

/// Which way a body flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Client to sandbox.
    ToUpstream,
    /// Sandbox to client.
    ToClient,
}

/// A body passed through frame by frame, counting data bytes.
pub(crate) struct CountingBody<B> {
    inner: B,
    guard: Option<Arc<ConnectionGuard>>,
    direction: Direction,
}

impl<B> CountingBody<B> {
    pub(crate) fn new(inner: B, guard: Arc<ConnectionGuard>, direction: Direction) -> Self {
        Self {
            inner,
            guard: Some(guard),
            direction,
        }
    }
}

impl<B> Body for CountingBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(guard)) = (frame.data_ref(), &self.guard) {
                    let n = data.len() as u64;
                    match self.direction {
                        Direction::ToUpstream => guard.record_bytes(n, 0),
                        Direction::ToClient => guard.record_bytes(0, n),
                    }
                }
            }
            // The exchange is over: stop counting the connection as open.
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => self.guard = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The body type sent upstream: the client's body, or nothing when a bodiless request is sent
/// again (see `service::replayable`).
pub(crate) type UpstreamBody = CountingBody<
    http_body_util::Either<hyper::body::Incoming, http_body_util::Empty<bytes::Bytes>>,
>;
