//! L7: the HTTP listeners' request path (HTTP/1.1 and HTTP/2: h2c prior knowledge here, ALPN
//! h2 after the TLS module's handshake).
//!
//! # The phases of one request
//!
//! Every request goes through the same phases once, whichever codec carries it; what one
//! phase decides travels to the next in the request's `Exchange` (target, address
//! epoch, activity guard and, after a compact hold, the connection it dialled):
//!
//! 1. **accept** — `crate::accept`: admission (connection caps), then `serve_plain` (plain
//!    HTTP) or `tls` (HTTPS).
//! 2. **classify** — which codec: the compact hold reads the first HTTP/1 head (`park.rs`);
//!    the byte relay takes what it covers (`relay/request.rs`); hyper takes the rest (HTTP/2,
//!    bodies it does not cover, upgrades, `CONNECT` in `connect.rs`).
//! 3. **route** — per-IP rate limit, host or router headers → [`crate::route::RouteTarget`],
//!    slot, activity guard: the `Exchange` is made here (`park.rs` for a first
//!    head read compactly, else `route.rs` for hyper and `Conn::route` in the relay).
//! 4. **hold/wake** — `crate::route` drives the hold machine once: in the compact hold for a
//!    first request whose sandbox must be woken (it dials there too), else inside the dial.
//! 5. **connect** — the relay's upstream (`relay/upstream.rs`), hyper's sticky connection
//!    (`sticky.rs`) or its pool (`client.rs`, `h2_upstream.rs`): each takes the connection the
//!    hold dialled, or dials through `Router::connect_stream` (retrying dial errors only).
//! 6. **forward** — the two codecs: bytes rewritten in one pass (`relay/`), or hyper
//!    (`service.rs`, `headers.rs`, `body.rs`, `upgrade.rs`).
//! 7. **account** — the exchange's guard counts the request open and its bytes (activity);
//!    `requests_total{code}`, downstream errors and logs as the response is written.
//!
//! A codec that cannot carry a request hands the connection on with a `Handover`:
//! the bytes read and, if the request was routed already, its exchange.
//!
//! Also here: `conn_state.rs` and `route_cache.rs` (what one client connection's requests
//! share), `router_headers.rs` (the `X-Sandbox-*` headers), `failure.rs` (upstream errors by
//! cause), `response.rs` (the proxy's own answers), `rewind.rs` (bytes read put back in front
//! of a socket), `connect.rs` (`CONNECT` tunnels).

mod account;
pub(crate) mod body;
pub(crate) mod client;
mod conn_state;
mod connect;
mod exchange;
mod failure;
mod h2_upstream;
mod handover;
pub mod headers;
mod park;
pub mod relay;
mod response;
mod rewind;
mod route;
mod route_cache;
mod router_headers;
mod service;
mod sticky;
mod upgrade;

use std::net::SocketAddr;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};

pub use self::client::UpstreamClient;
use self::handover::Handover;
pub use self::headers::Scheme;
pub use self::response::ProxyBody;
pub use self::route::target_of;
use crate::limits::{IdleControl, IdleTimeout};
use crate::metrics as m;
use crate::route::Router;

/// Most concurrent HTTP/2 streams per client connection.
const H2_MAX_CONCURRENT_STREAMS: u32 = 256;

/// Serves HTTP/1.1 and HTTP/2 on one accepted (or TLS-terminated) client connection until it
/// closes, the proxy drains (finish in-flight requests, then close) or the drain deadline
/// passes.
///
/// # Example
/// ```no_run
/// # async fn demo(router: rouse_proxy::Router, stream: tokio::net::TcpStream, peer: std::net::SocketAddr) {
/// let client = std::sync::Arc::new(rouse_proxy::l7::UpstreamClient::new(router.clone()));
/// rouse_proxy::serve_http_connection(router, client, stream, peer, rouse_proxy::Scheme::Http).await;
/// # }
/// ```
pub async fn serve_http_connection<IO>(
    router: Router,
    client: Arc<UpstreamClient>,
    io: IO,
    peer: SocketAddr,
    scheme: Scheme,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    serve(router, client, io, peer, scheme, Handover::default()).await;
}

/// [`serve_http_connection`], after a compact hold handed the connection over.
async fn serve<IO>(
    router: Router,
    client: Arc<UpstreamClient>,
    io: IO,
    peer: SocketAddr,
    scheme: Scheme,
    handover: Handover,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let config = router.config();
    let limits = &config.limits;
    let idle = IdleControl::new(limits.idle_timeout);
    let io = TokioIo::new(IdleTimeout::new(io, idle.clone()));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes)
        // A client may shut down its write side once its request is sent (`nc -N`, many
        // scripts); it still waits for the response.
        .half_close(true)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .max_concurrent_streams(H2_MAX_CONCURRENT_STREAMS);
    let drain = router.drain_signal();
    let hard_stop = router.hard_stop();
    let svc_router = router.clone();
    let state = Arc::new(conn_state::ConnState::new(peer, scheme, idle));
    // The first request's exchange when an earlier stage routed it; taken by that request
    // (the flag spares later requests the lock).
    let has_first = AtomicBool::new(handover.first.is_some());
    let first = Mutex::new(handover.first);
    // hyper's header timeout starts anew here; a connection that was read from before (the
    // compact path, a TLS handshake) still has to send its first head by `head_by`.
    let head_by = handover.head_by;
    let head_arrived = head_by.map(|_| Arc::new(AtomicBool::new(false)));
    let arrived = head_arrived.clone();
    let service = service_fn(move |req| {
        if let Some(arrived) = &arrived {
            arrived.store(true, Ordering::Relaxed);
        }
        let conn = service::ConnInfo {
            state: Arc::clone(&state),
            first: if has_first.swap(false, Ordering::Relaxed) {
                first.lock().unwrap_or_else(|e| e.into_inner()).take()
            } else {
                None
            },
        };
        service::handle(svc_router.clone(), Arc::clone(&client), req, conn)
    });
    let conn = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(conn);
    // Polled only when the drain signal itself wakes the task, not on every socket event.
    let mut drained = crate::on_wake::OnWake::new(drain.cancelled_owned());
    let head_late = head_deadline(head_by, head_arrived);
    tokio::pin!(head_late);
    let result = tokio::select! {
        biased;
        result = conn.as_mut() => result,
        () = &mut head_late, if head_by.is_some() => {
            silent(peer);
            return;
        }
        () = &mut drained => {
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                result = conn.as_mut() => result,
                () = hard_stop.cancelled() => Ok(()),
            }
        }
    };
    if let Err(err) = result {
        let reason = downstream_reason(err.as_ref());
        metrics::counter!(m::DOWNSTREAM_ERRORS_TOTAL, "reason" => reason).increment(1);
        tracing::debug!(client.addr = %peer, error = %err, reason, "client connection ended with an error");
    }
}

/// Completes at `head_by` if the first request head has not arrived by then; never otherwise.
async fn head_deadline(head_by: Option<tokio::time::Instant>, arrived: Option<Arc<AtomicBool>>) {
    if let (Some(due), Some(arrived)) = (head_by, arrived) {
        tokio::time::sleep_until(due).await;
        if !arrived.load(Ordering::Relaxed) {
            return;
        }
    }
    std::future::pending::<()>().await;
}

/// A bounded label for why a client connection failed.
fn downstream_reason(err: &(dyn std::error::Error + 'static)) -> &'static str {
    let mut source = Some(err);
    while let Some(e) = source {
        if let Some(hyper_err) = e.downcast_ref::<hyper::Error>() {
            if hyper_err.is_timeout() {
                return "header_timeout";
            }
            if hyper_err.is_parse_too_large() {
                return "too_large";
            }
            if hyper_err.is_parse() {
                return "malformed";
            }
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return "idle";
        }
        source = e.source();
    }
    "other"
}

/// Accepts plain HTTP connections until the drain signal, each served by
/// [`serve_http_connection`] in a task of the router's tracker.
pub(crate) async fn accept_loop(
    router: Router,
    client: Arc<UpstreamClient>,
    listener: TcpListener,
) {
    crate::accept::accept_loop(
        router,
        listener,
        crate::kind::ConnKind::Http,
        crate::accept::RateLimit::PerRequest,
        move |router, stream, peer| serve_plain(router, Arc::clone(&client), stream, peer),
    )
    .await;
}

/// Serves one plain HTTP connection: its first request head is read compactly and, when its
/// sandbox must be woken, the request is held in that compact state (`park.rs`); then (or at
/// once) the full HTTP server takes the socket with the bytes read.
async fn serve_plain(
    router: Router,
    client: Arc<UpstreamClient>,
    stream: TcpStream,
    peer: SocketAddr,
) {
    let config = router.config();
    let timeout = config.limits.header_read_timeout;
    // The first head must be whole within the header timeout from accept, whatever reads it.
    let head_by = tokio::time::Instant::now() + timeout;
    if !config.http.compact_hold {
        if crate::accept::first_byte(&stream, timeout).await {
            let mut first = [0_u8; H2_PREFACE_START.len()];
            let peeked = stream.peek(&mut first).await.unwrap_or(0);
            let handover = Handover {
                head_by: http1_head_by(&first[..peeked], head_by),
                ..Handover::default()
            };
            // Boxed, here and below: the full path's future is large, and a connection
            // waiting in the compact hold must not carry its size.
            Box::pin(serve(router, client, stream, peer, Scheme::Http, handover)).await;
        } else {
            silent(peer);
        }
        return;
    }
    let limit = park::HEAD_LIMIT.min(config.limits.max_header_bytes);
    let relay_on = config.http.relay;
    drop(config);
    let (bytes, handover, complete) = match park::read_head(&stream, limit, head_by).await {
        park::Head::Silent | park::Head::Late => return silent(peer),
        park::Head::Partial(bytes) => {
            let handover = Handover {
                head_by: http1_head_by(&bytes, head_by),
                ..Handover::default()
            };
            (bytes, handover, false)
        }
        park::Head::Complete(mut bytes) => match park::park(&router, &stream, &mut bytes, peer)
            .await
        {
            park::Parked::NotRouted => (bytes, Handover::default(), true),
            park::Parked::Routed(first) => (
                bytes,
                Handover {
                    first: Some(first),
                    head_by: None,
                },
                true,
            ),
            park::Parked::Refused(err) => return Box::pin(park::refuse(stream, &err, peer)).await,
            park::Parked::Gone => {
                tracing::debug!(client.addr = %peer, "client left while held");
                return;
            }
        },
    };
    // The relay takes a whole first head; anything else starts on the full path.
    if complete && relay_on {
        relay_then_full(router, client, stream, peer, Scheme::Http, bytes, handover).await;
    } else {
        let mut bytes = bytes;
        bytes.shrink_to_fit();
        let io = rewind::Rewind::new(bytes, stream);
        Box::pin(serve(router, client, io, peer, Scheme::Http, handover)).await;
    }
}

/// Serves an HTTP/1.1 connection after TLS (no `h2` negotiated): through the relay when it is
/// on, else on the full path. Its first request head must be whole by `head_by`.
pub(crate) async fn serve_http1_tls<IO>(
    router: Router,
    client: Arc<UpstreamClient>,
    io: IO,
    peer: SocketAddr,
    head_by: tokio::time::Instant,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let handover = Handover {
        head_by: Some(head_by),
        ..Handover::default()
    };
    if router.config().http.relay {
        relay_then_full(
            router,
            client,
            io,
            peer,
            Scheme::Https,
            Vec::new(),
            handover,
        )
        .await;
    } else {
        serve(router, client, io, peer, Scheme::Https, handover).await;
    }
}

/// Relays the connection (its first bytes read already are `bytes`) until it closes or a
/// request the relay does not cover hands it, with the bytes read, to the full path.
async fn relay_then_full<IO>(
    router: Router,
    client: Arc<UpstreamClient>,
    io: IO,
    peer: SocketAddr,
    scheme: Scheme,
    bytes: Vec<u8>,
    handover: Handover,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let relayed = relay::serve(router.clone(), io, peer, scheme, bytes, handover);
    // Boxed: a connection in the compact hold must not carry the relay's or the full path's
    // state.
    if let relay::Outcome::HandOver {
        mut bytes,
        stream,
        handover,
    } = Box::pin(relayed).await
    {
        bytes.shrink_to_fit();
        let io = rewind::Rewind::new(bytes, stream);
        Box::pin(serve(router, client, io, peer, scheme, handover)).await;
    }
}

/// Counts a client that sent no whole request head within the header read timeout.
fn silent(peer: SocketAddr) {
    metrics::counter!(m::DOWNSTREAM_ERRORS_TOTAL, "reason" => "header_timeout").increment(1);
    tracing::debug!(client.addr = %peer, "client sent no request head within the header timeout");
}

/// The start of the HTTP/2 connection preface (`PRI * HTTP/2.0`): h2c with prior knowledge.
const H2_PREFACE_START: &[u8] = b"PRI ";

/// When the first head of a connection whose first bytes are `first` must be whole: `by`
/// for HTTP/1, none for HTTP/2 (hyper has no header timeout there, and an idle HTTP/2
/// connection waiting for its first stream is ordinary).
fn http1_head_by(first: &[u8], by: tokio::time::Instant) -> Option<tokio::time::Instant> {
    (!first.starts_with(H2_PREFACE_START)).then_some(by)
}

/// A short `text/plain` response the proxy makes itself.
pub fn text_response(status: http::StatusCode, body: String) -> http::Response<ProxyBody> {
    response::text(status, body)
}

/// The response for a proxy error: its status, `Retry-After` if retryable, and the reason.
pub fn error_response(err: &crate::error::ProxyError) -> http::Response<ProxyBody> {
    response::error(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The task of a connection in the compact hold is this future: it must not carry the
    /// full HTTP path's state (that is boxed, and allocated only at the hand-over).
    #[tokio::test]
    async fn a_connection_in_the_compact_hold_is_a_small_future() {
        let config = crate::Config::from_toml("[directory]\nkind = \"static\"\n").expect("config");
        let router = Router::new(config, crate::StaticDirectory::new(&[])).expect("router");
        let client = Arc::new(UpstreamClient::new(router.clone()));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _client_side = TcpStream::connect(addr).await.expect("connect");
        let (stream, peer) = listener.accept().await.expect("accept");
        let task = serve_plain(router, client, stream, peer);
        let size = std::mem::size_of_val(&task);
        assert!(size <= 2048, "{size} bytes");
    }
}
