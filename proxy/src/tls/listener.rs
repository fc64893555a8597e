//! The HTTPS listener: accept, TLS handshake within the header read timeout, then the same
//! HTTP service as the plain listener (HTTP/2 when ALPN chose `h2`).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::accept::{RateLimit, accept_loop};
use crate::kind::ConnKind;
use crate::l7::{Scheme, UpstreamClient, serve_http_connection};
use crate::route::Router;

/// Failed TLS handshakes, by `reason` (`timeout`, `tls`).
pub const TLS_HANDSHAKE_ERRORS_TOTAL: &str = "rouse_proxy_tls_handshake_errors_total";

/// Serves HTTPS on `listener` with `acceptor` until the router's drain signal.
pub async fn serve(
    router: Router,
    client: Arc<UpstreamClient>,
    listener: TcpListener,
    acceptor: Arc<TlsAcceptor>,
) {
    accept_loop(
        router,
        listener,
        ConnKind::Http,
        RateLimit::PerRequest,
        move |router, stream, peer| {
            handle(
                router,
                Arc::clone(&client),
                stream,
                peer,
                Arc::clone(&acceptor),
            )
        },
    )
    .await;
}

async fn handle(
    router: Router,
    client: Arc<UpstreamClient>,
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: Arc<TlsAcceptor>,
) {
    // The handshake and the first request head share the header read timeout from accept:
    // a client that never finishes either must not hold a slot longer than one that never
    // finishes its request head.
    let head_by = tokio::time::Instant::now() + router.config().limits.header_read_timeout;
    let tls = match tokio::time::timeout_at(head_by, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(err)) => {
            metrics::counter!(TLS_HANDSHAKE_ERRORS_TOTAL, "reason" => "tls").increment(1);
            tracing::debug!(client.addr = %peer, error = %err, "tls handshake failed");
            return;
        }
        Err(_) => {
            metrics::counter!(TLS_HANDSHAKE_ERRORS_TOTAL, "reason" => "timeout").increment(1);
            tracing::debug!(client.addr = %peer, "tls handshake timed out");
            return;
        }
    };
    // HTTP/2 takes the full path; HTTP/1.1 (negotiated, or no ALPN) the relay.
    if tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice()) {
        serve_http_connection(router, client, tls, peer, Scheme::Https).await;
    } else {
        crate::l7::serve_http1_tls(router, client, tls, peer, head_by).await;
    }
}
