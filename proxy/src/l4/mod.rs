//! Layer 4: TLS passthrough routed by SNI ([`passthrough`]) and static TCP listeners ([`tcp`]),
//! both holding the client while the sandbox wakes and then splicing bytes
//! ([`crate::splice`]) without looking at them. HTTP CONNECT tunnels start as HTTP requests and
//! live in `l7`; they share the splice.
//!
//! Per connection: accept → admit (connection limit, rate limit) → classify (peek the
//! ClientHello for passthrough) → route → hold/wake and dial ([`Router::connect`]) → splice →
//! account (bytes into the connection guard). While held, a client that hangs up is noticed and
//! its hold given up, so a storm of abandoned connections does not keep sandbox slots busy.

mod listeners;
pub mod passthrough;
pub mod sni;
pub mod tcp;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::Interest;
use tokio::net::TcpStream;

pub use listeners::{ListenerAddrs, Listeners, ListenersError};

use crate::error::ProxyError;
use crate::kind::ConnKind;
use crate::route::{RouteTarget, Router, Upstream};

/// Most bytes of a ClientHello the passthrough listener waits for before giving up; enough for
/// post-quantum key shares and large session tickets, small enough to bound memory.
pub const MAX_CLIENT_HELLO_BYTES: usize = 16 * 1024;

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
