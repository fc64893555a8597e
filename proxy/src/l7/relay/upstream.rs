//! [`Upstream`]: the relay's connection to a sandbox, kept from one request of a client
//! connection to the next while the sandbox stays at the same address.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::error::ProxyError;
use crate::quiesce::QuiesceStream;
use crate::route::{RouteTarget, Router};

/// A connection to a sandbox and what it was dialled for.
#[derive(Debug)]
pub(crate) struct Upstream {
    target: Arc<RouteTarget>,
    /// The sandbox's address epoch at the dial: a later epoch is another address.
    epoch: u64,
    pub(crate) stream: QuiesceStream,
}

impl Upstream {
    /// Holds (waking the sandbox if needed) and dials `target`.
    pub(crate) async fn dial(
        router: &Router,
        target: &Arc<RouteTarget>,
    ) -> Result<Self, ProxyError> {
        let (stream, _addr, slot) = router.connect_stream(target).await?;
        Ok(Self::adopt(router, target, slot.epoch(), stream))
    }

    /// A connection to `target` at address `epoch` dialled already (by a compact hold).
    pub(crate) fn adopt(
        router: &Router,
        target: &Arc<RouteTarget>,
        epoch: u64,
        stream: tokio::net::TcpStream,
    ) -> Self {
        Self {
            target: Arc::clone(target),
            epoch,
            // Reset like every upstream connection when the sandbox is checkpointed.
            stream: router.quiescer().wrap(&target.key, stream),
        }
    }

    /// Whether the connection can carry a request to `target` at address `epoch`: dialled
    /// for it, and not closed by the sandbox while it was idle.
    pub(crate) fn fits(&self, target: &RouteTarget, epoch: u64) -> bool {
        self.epoch == epoch && *self.target == *target && !self.closed_while_idle()
    }

    /// Completes once the idle connection cannot carry another request: the sandbox closed
    /// it, sent bytes nobody asked for, or a quiesce of the sandbox reset it. Watched while
    /// the client connection waits for its next request, so a checkpoint never waits for an
    /// idle client.
    pub(crate) async fn unusable(&mut self) {
        let mut byte = [0_u8; 1];
        // Every outcome of a read on an idle connection means it is done.
        let _ = tokio::io::AsyncReadExt::read(&mut self.stream, &mut byte).await;
    }

    /// Whether the sandbox closed the idle connection (or sent bytes nobody asked for).
    ///
    /// tokio keeps a socket's readiness from the reactor's last event, so an idle connection
    /// without any costs no system call here; one that became readable is read to tell.
    fn closed_while_idle(&self) -> bool {
        let tcp = self.stream.get_ref();
        let mut cx = Context::from_waker(Waker::noop());
        match tcp.poll_read_ready(&mut cx) {
            Poll::Pending => false,
            Poll::Ready(Err(_)) => true,
            Poll::Ready(Ok(())) => {
                let mut byte = [0_u8; 1];
                !matches!(tcp.try_read(&mut byte), Err(err) if err.kind() == std::io::ErrorKind::WouldBlock)
            }
        }
    }
}
