//! Upgraded connections (WebSocket and any other `Upgrade`): after the sandbox answers 101, the
//! two upgraded streams are copied both ways with byte accounting, an optional idle timeout
//! and the proxy's hard stop.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::route::{ConnKind, ConnectionGuard, RouteTarget, Router};

/// Spawns the copy between the client's and the sandbox's upgraded connections.
pub(crate) fn spawn_tunnel(
    router: &Router,
    target: RouteTarget,
    downstream: OnUpgrade,
    upstream: OnUpgrade,
) {
    let Some(guard) = router.guard(&target.key, ConnKind::Upgrade) else {
        return;
    };
    let hard_stop = router.hard_stop();
    let span = tracing::debug_span!("upgraded", sandbox.key = %target.key);
    router.tasks().spawn(tracing::Instrument::instrument(async move {
        let (down, up) = match tokio::try_join!(downstream, upstream) {
            Ok(pair) => pair,
            Err(err) => {
                tracing::debug!(sandbox.key = %target.key, error = %err, "upgrade failed");
                return;
            }
        };
        let guard = Arc::new(guard);
        // The client side keeps its connection's idle limit, switched to the upgraded one.
        let mut client = Counting {
            inner: TokioIo::new(down),
            guard: Arc::clone(&guard),
        };
        let mut sandbox = TokioIo::new(up);
        tokio::select! {
            result = tokio::io::copy_bidirectional(&mut client, &mut sandbox) => {
                if let Err(err) = result {
                    tracing::debug!(sandbox.key = %target.key, error = %err, "upgraded stream ended");
                }
            }
            () = hard_stop.cancelled() => {}
        }
    }, span));
}

/// The client side of a tunnel: bytes read go to the sandbox, bytes written come from it.
struct Counting<T> {
    inner: T,
    guard: Arc<ConnectionGuard>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Counting<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        if n > 0 {
            self.guard.record_bytes(n, 0);
        }
        result
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counting<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = result {
            self.guard.record_bytes(0, n as u64);
        }
        result
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
