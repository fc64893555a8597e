//! Layer 4: TLS passthrough routed by SNI ([`passthrough`]), HTTP CONNECT tunnels ([`connect`])
//! and static TCP listeners ([`tcp`]), all holding the client while the sandbox wakes and then
//! splicing bytes ([`splice`]) without looking at them.
//!
//! Per connection: accept → admit (connection limit, rate limit) → classify (peek the
//! ClientHello for passthrough) → route → hold/wake and dial ([`Router::connect`]) → splice →
//! account (bytes into the connection guard). While held, a client that hangs up is noticed and
//! its hold given up, so a storm of abandoned connections does not keep sandbox slots busy.

pub mod connect;
mod listeners;
pub mod passthrough;
pub mod sni;
pub mod splice;
pub mod tcp;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::Interest;
use tokio::net::{TcpListener, TcpStream};
use tracing::Instrument;

pub use listeners::{ListenerAddrs, Listeners, ListenersError};

use crate::error::ProxyError;
use crate::route::{ConnKind, RouteTarget, Router, Upstream};

/// Most bytes of a ClientHello the passthrough listener waits for before giving up; enough for
/// post-quantum key shares and large session tickets, small enough to bound memory.
pub const MAX_CLIENT_HELLO_BYTES: usize = 16 * 1024;

/// Accepts connections until the drain signal and runs `handle` for each in a task of the
/// router's tracker, after the connection and per-IP rate limits admitted it.
pub(crate) async fn accept_loop<F, Fut>(
    router: Router,
    listener: TcpListener,
    kind: ConnKind,
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
        let Ok(admission) = router.admit() else {
            continue;
        };
        if let Err(err) = router.check_rate(peer.ip()) {
            tracing::debug!(client.addr = %peer, error = %err, "connection refused");
            continue;
        }
        let _ = stream.set_nodelay(true);
        let span = tracing::debug_span!("l4", kind = kind.as_str(), client.addr = %peer);
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

/// Resolves once the client has hung up (or its socket failed), without reading.
///
/// Bytes the client sends while held stay queued for the sandbox: readiness for them is
/// cleared (noted in `cleared`) and the wait goes on. A FIN normally means the client gave up;
/// with `half_close_with_data`, a FIN behind queued bytes is taken as a half-close (a request
/// sent in full, answer awaited) and the hold continues.
async fn client_closed(stream: &TcpStream, half_close_with_data: bool, cleared: &AtomicBool) {
    loop {
        match stream.ready(Interest::READABLE).await {
            Ok(ready) if ready.is_read_closed() => {
                let mut byte = [0u8; 1];
                match stream.peek(&mut byte).await {
                    Ok(n) if n > 0 && half_close_with_data => {
                        // Nothing more can be learnt without reading; hold to the deadline.
                        return std::future::pending().await;
                    }
                    _ => return,
                }
            }
            Ok(_) => {}
            Err(_) => return,
        }
        // Clear the readiness the queued bytes caused; a later arrival or FIN sets it again.
        cleared.store(true, Ordering::Relaxed);
        let _ = stream.try_io(Interest::READABLE, || {
            Err::<(), _>(io::ErrorKind::WouldBlock.into())
        });
    }
}

/// Holds until the sandbox takes a connection and dials it, unless the client hangs up first
/// (`None`; see [`client_closed`]) or the proxy stops. Returns the client stream ready to be
/// read from.
pub(crate) async fn connect_unless_closed(
    router: &Router,
    target: &RouteTarget,
    kind: ConnKind,
    client: TcpStream,
    half_close_with_data: bool,
) -> Option<(TcpStream, Result<Upstream, ProxyError>)> {
    let hard_stop = router.hard_stop();
    let cleared = AtomicBool::new(false);
    let upstream = tokio::select! {
        biased;
        upstream = router.connect(target, kind) => upstream,
        () = client_closed(&client, half_close_with_data, &cleared) => {
            tracing::debug!(sandbox.key = %target.key, "client left while held");
            return None;
        }
        () = hard_stop.cancelled() => return None,
    };
    if !cleared.load(Ordering::Relaxed) {
        return Some((client, upstream));
    }
    // The watch cleared the read readiness of bytes still queued, and the edge-triggered
    // reactor reports them only once: registering the socket anew reports them again.
    let rearmed = client
        .into_std()
        .and_then(TcpStream::from_std)
        .inspect_err(|err| tracing::debug!(error = %err, "re-registering the client failed"))
        .ok()?;
    Some((rearmed, upstream))
}
