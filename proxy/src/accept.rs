//! The accept phase every listener shares: accept until the drain signal, admit the
//! connection (connection limits in total and per client address, and the per-IP rate limit where the protocol has no way to
//! answer "slow down"), then hand it to the listener's handler in a tracked task.

use std::future::Future;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tracing::Instrument;

use crate::kind::ConnKind;
use crate::route::Router;

/// Where a listener applies the per-IP rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RateLimit {
    /// Refuse the connection itself (L4: the bytes cannot carry a 429).
    AtAccept,
    /// Answer each request with 429 instead (L7), so one client's connection is not refused
    /// for the requests of another.
    PerRequest,
}

/// Accepts connections until the drain signal and runs `handle` for each in a task of the
/// router's tracker, once the connection limit (and, with [`RateLimit::AtAccept`], the per-IP
/// rate limit) admitted it.
pub(crate) async fn accept_loop<F, Fut>(
    router: Router,
    listener: TcpListener,
    kind: ConnKind,
    rate: RateLimit,
    handle: F,
) where
    F: Fn(Router, TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let drain = router.drain_signal();
    let tasks = router.tasks();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = drain.cancelled() => return,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(err) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %err, listener.kind = kind.as_str(), "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let admission = match router.admit(peer.ip()) {
            Ok(admission) => admission,
            Err(err) => {
                tracing::debug!(client.addr = %peer, error = %err, "connection refused");
                continue;
            }
        };
        if rate == RateLimit::AtAccept
            && let Err(err) = router.check_rate(peer.ip())
        {
            tracing::debug!(client.addr = %peer, error = %err, "connection refused");
            continue;
        }
        let _ = stream.set_nodelay(true);
        let span = tracing::debug_span!("conn", kind = kind.as_str(), client.addr = %peer);
        let work = handle(router.clone(), stream, peer);
        tasks.spawn(
            async move {
                work.await;
                drop(admission);
            }
            .instrument(span),
        );
    }
}

/// Waits until the client sent its first byte (or closed), at most `timeout`; false when it
/// stayed silent. hyper's header timeout starts only once bytes arrive (its protocol
/// detection waits before it), so without this a silent connection is held until the idle
/// timeout: the header timeout runs from accept.
pub(crate) async fn first_byte(stream: &TcpStream, timeout: std::time::Duration) -> bool {
    let mut byte = [0_u8; 1];
    matches!(
        tokio::time::timeout(timeout, stream.peek(&mut byte)).await,
        Ok(Ok(_))
    )
}
