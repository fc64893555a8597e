//! Static TCP listeners: every connection to a configured address goes to one sandbox port,
//! holding while the sandbox wakes, then spliced byte for byte.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};

use super::connect_unless_closed;
use crate::accept::{RateLimit, accept_loop};
use crate::kind::ConnKind;
use crate::route::{RouteTarget, Router};
use crate::splice::{SpliceOptions, splice_tcp};

/// Serves one static TCP listener, every connection going to `target`, until the router's
/// drain signal.
pub async fn serve(router: Router, listener: TcpListener, target: RouteTarget) {
    accept_loop(
        router,
        listener,
        ConnKind::Tcp,
        RateLimit::AtAccept,
        move |router, stream, peer| handle(router, stream, peer, target.clone()),
    )
    .await;
}

async fn handle(router: Router, client: TcpStream, peer: SocketAddr, target: RouteTarget) {
    let (mut client, upstream) = match connect_unless_closed(
        &router,
        &target,
        ConnKind::Tcp,
        client,
        true,
    )
    .await
    {
        Some((client, Ok(upstream))) => (client, upstream),
        Some((_, Err(err))) => {
            tracing::debug!(sandbox.key = %target.key, client.addr = %peer, error = %err, "tcp connection refused");
            return;
        }
        None => return,
    };
    let mut stream = upstream.stream;
    let guard = upstream.guard;
    let options = SpliceOptions {
        idle_timeout: router.config().limits.upgraded_idle_timeout,
        zero_copy: router.config().upstream.zero_copy,
        ..SpliceOptions::default()
    };
    let hard_stop = router.hard_stop();
    tokio::select! {
        result = splice_tcp(&mut client, &mut stream, options, |up, down| guard.record_bytes(up, down)) => {
            if let Err(err) = result {
                tracing::debug!(sandbox.key = %target.key, error = %err, "tcp connection ended");
            }
        }
        () = hard_stop.cancelled() => {}
    }
}
