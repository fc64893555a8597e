//! TLS passthrough: route a TLS connection by the SNI of its ClientHello, without terminating
//! it. The ClientHello is peeked, never read, so the sandbox receives the client's bytes as
//! sent and does the handshake itself with its own certificate.
//!
//! A connection whose first bytes are not a valid ClientHello, that names no server or names one
//! outside our domains is closed and counted in `rouse_proxy_tls_rejected_total{reason}`.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::sni::{ClientHelloError, peek_client_hello};
use super::{MAX_CLIENT_HELLO_BYTES, connect_unless_closed};
use crate::accept::{RateLimit, accept_loop};
use crate::kind::ConnKind;
use crate::route::Router;
use crate::splice::{SpliceOptions, splice_tcp};

/// Connections closed before routing, by `reason` (`not_tls`, `sslv2`, `malformed`,
/// `invalid_sni`, `missing_sni`, `unknown_host`, `too_large`, `timeout`, `closed`, `io`).
pub const TLS_REJECTED_TOTAL: &str = "rouse_proxy_tls_rejected_total";

/// Serves the passthrough listener until the router's drain signal.
pub async fn serve(router: Router, listener: TcpListener) {
    accept_loop(
        router,
        listener,
        ConnKind::TlsPassthrough,
        RateLimit::AtAccept,
        handle,
    )
    .await;
}

fn reject(reason: &'static str) {
    metrics::counter!(TLS_REJECTED_TOTAL, "reason" => reason).increment(1);
}

/// One passthrough connection: peek, route, hold/wake, splice.
pub(crate) async fn handle(router: Router, client: TcpStream, peer: SocketAddr) {
    let config = router.config();
    // The ClientHello is the request head of TLS: the same time budget applies.
    let deadline = Instant::now() + config.limits.header_read_timeout;
    let drain = router.drain_signal();
    let peeked = tokio::select! {
        peeked = peek_client_hello(&client, MAX_CLIENT_HELLO_BYTES, deadline) => peeked,
        () = drain.cancelled() => return,
    };
    let hello = match peeked {
        Ok(hello) => hello,
        Err(err) => {
            reject(err.metric_label());
            if !matches!(err, ClientHelloError::Closed) {
                tracing::debug!(client.addr = %peer, error = %err, "bad client hello");
            }
            return;
        }
    };
    let Some(sni) = hello.sni else {
        reject("missing_sni");
        tracing::debug!(client.addr = %peer, "client hello without a server name");
        return;
    };
    let target = match router.resolve_host(&sni) {
        Ok(target) => target,
        Err(err) => {
            reject("unknown_host");
            tracing::debug!(client.addr = %peer, tls.sni = %sni, error = %err, "no route for server name");
            return;
        }
    };
    let (mut client, upstream) = match connect_unless_closed(
        &router,
        &target,
        ConnKind::TlsPassthrough,
        client,
        false,
    )
    .await
    {
        Some((client, Ok(upstream))) => (client, upstream),
        Some((_, Err(err))) => {
            tracing::debug!(sandbox.key = %target.key, error = %err, "passthrough refused");
            return;
        }
        None => return,
    };
    let mut stream = upstream.stream;
    let guard = upstream.guard;
    let options = SpliceOptions {
        idle_timeout: config.limits.upgraded_idle_timeout,
        zero_copy: config.upstream.zero_copy,
        ..SpliceOptions::default()
    };
    let hard_stop = router.hard_stop();
    tokio::select! {
        result = splice_tcp(&mut client, &mut stream, options, |up, down| guard.record_bytes(up, down)) => {
            if let Err(err) = result {
                tracing::debug!(sandbox.key = %target.key, error = %err, "passthrough ended");
            }
        }
        () = hard_stop.cancelled() => {}
    }
}
