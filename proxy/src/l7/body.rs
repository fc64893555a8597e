//! [`CountingBody`]: a streamed body that counts its bytes as the sandbox's activity and keeps
//! the request's [`ConnectionGuard`] alive until the body ends; [`peek`] looks at a response
//! body's first frame before its head goes to the client.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

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

/// The client's request body failed while it was sent to the sandbox (malformed chunked
/// framing, a hang-up): marked so that the request's error is the client's (400), not the
/// sandbox's.
#[derive(Debug, thiserror::Error)]
#[error("the client's request body failed: {0}")]
pub(crate) struct ClientBodyError(#[source] pub(crate) hyper::Error);

/// The client's body as sent upstream, its errors marked as the client's.
pub(crate) type ClientBody =
    http_body_util::combinators::MapErr<hyper::body::Incoming, fn(hyper::Error) -> ClientBodyError>;

/// The body type sent upstream: the client's body, or nothing when a bodiless request is sent
/// again (see `service::replayable`).
pub(crate) type UpstreamBody =
    CountingBody<http_body_util::Either<ClientBody, http_body_util::Empty<bytes::Bytes>>>;

/// A body whose first frame (or end) was taken already by [`peek`]: given back first.
pub(crate) struct Peeked<B: Body> {
    /// `Some(Some(frame))`: a frame to give first; `Some(None)`: the body ended.
    first: Option<Option<Frame<B::Data>>>,
    inner: B,
}

/// Takes the first frame of `body` when it is there already, without waiting: an error then
/// is one before any byte of the response went to the client.
pub(crate) fn peek<B: Body + Unpin>(mut body: B) -> Result<Peeked<B>, B::Error> {
    let mut cx = Context::from_waker(Waker::noop());
    // A pending body keeps this waker only until the server polls it with its own.
    let first = match Pin::new(&mut body).poll_frame(&mut cx) {
        Poll::Ready(Some(Err(err))) => return Err(err),
        Poll::Ready(Some(Ok(frame))) => Some(Some(frame)),
        Poll::Ready(None) => Some(None),
        Poll::Pending => None,
    };
    Ok(Peeked { first, inner: body })
}

impl<B> Body for Peeked<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(first.map(Ok));
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        match &self.first {
            Some(first) => first.is_none(),
            None => self.inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.first {
            Some(None) => SizeHint::with_exact(0),
            Some(Some(frame)) => {
                // The inner body's hint no longer counts the frame taken out of it.
                let taken = frame.data_ref().map_or(0, |data| data.len() as u64);
                let inner = self.inner.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(inner.lower().saturating_add(taken));
                if let Some(upper) = inner.upper() {
                    hint.set_upper(upper.saturating_add(taken));
                }
                hint
            }
            None => self.inner.size_hint(),
        }
    }
}
