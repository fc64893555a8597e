//! The compact hold of plain HTTP/1 requests: the classify, route and hold/wake phases of a
//! connection's first request, before any codec. Before a new client connection gets a
//! codec (the relay's buffers, or hyper's: about 25 KiB), its first request head is read with
//! a small bounded buffer and routed by its Host into an [`Exchange`]. When the sandbox must
//! be woken (or is starting), only the socket, the bytes read and one small future wait in the
//! hold machine, which also dials the sandbox once it is up; then the socket, those bytes and
//! the exchange (with its dialled connection) go to the codec, which forwards the request
//! without routing, holding or dialling it again.
//!
//! Anything else — a head larger than the buffer, a malformed head, HTTP/2 prior knowledge,
//! `CONNECT`, a request routed by `X-Sandbox-Timeout`, an unknown sandbox — goes to the codec
//! unrouted with the bytes read, so its answer (400, 431, 404, ...) is the same.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::exchange::{Exchange, Routed};
use super::router_headers::RequestBound;
use super::{account, headers, response, route};
use crate::error::ProxyError;
use crate::route::{RouteTarget, Router};

/// Largest request head the compact path reads; a larger one takes the full path.
pub(crate) const HEAD_LIMIT: usize = 4096;

/// Most bytes kept while parked: the head plus what the client sends after it (its body,
/// read only to notice a hang-up and handed over with the head). At the limit the socket is
/// left unread until the hand-over.
const PARKED_LIMIT: usize = 2 * HEAD_LIMIT;

/// Most headers of a request head the compact path parses.
const MAX_HEADERS: usize = 64;

/// How long a refused client gets to take the response before the socket is closed, and how
/// much of its unread request is discarded meanwhile (closing with unread bytes resets the
/// connection, which can destroy the response on the way).
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 64 * 1024;

/// The first bytes of a client connection.
#[derive(Debug)]
pub(crate) enum Head {
    /// A whole HTTP/1 request head (and what followed it in the same reads).
    Complete(Vec<u8>),
    /// Not a whole head within the limit (too large, malformed, HTTP/2, closed early): the
    /// full path reads on from these bytes.
    Partial(Vec<u8>),
    /// Bytes, but no whole head by the deadline: the connection is closed, as hyper closes
    /// one whose head times out (handing it over would restart the header timeout).
    Late,
    /// Nothing within the header read timeout.
    Silent,
}

/// Reads the first request head of a connection into a buffer of at most `limit` bytes,
/// by `deadline` (the header read timeout from accept).
pub(crate) async fn read_head(
    stream: &TcpStream,
    limit: usize,
    deadline: tokio::time::Instant,
) -> Head {
    let mut buf = vec![0_u8; limit.max(1)];
    let mut filled = 0;
    // Bounded: every round reads at least one byte or returns, and `buf` is finite.
    let outcome = loop {
        match tokio::time::timeout_at(deadline, stream.readable()).await {
            Err(_) if filled == 0 => return Head::Silent,
            Err(_) => return Head::Late,
            Ok(Err(_)) => break false,
            Ok(Ok(())) => {}
        }
        match stream.try_read(&mut buf[filled..]) {
            Ok(0) => break false,
            Ok(n) => filled += n,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => break false,
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match httparse::Request::new(&mut headers).parse(&buf[..filled]) {
            Ok(httparse::Status::Complete(_)) => break true,
            Ok(httparse::Status::Partial) if filled < buf.len() => {}
            Ok(httparse::Status::Partial) | Err(_) => break false,
        }
    };
    buf.truncate(filled);
    if outcome {
        buf.shrink_to_fit();
        Head::Complete(buf)
    } else {
        Head::Partial(buf)
    }
}

/// How a parked request ended.
#[derive(Debug)]
pub(crate) enum Parked {
    /// Not routed here (see the module doc): the codec routes it.
    NotRouted,
    /// Routed — and, when its sandbox had to be woken, held until it was up (and dialled,
    /// unless it is an upgrade, which the pooled client dials): the codec forwards it. An
    /// `Err` (the per-IP rate limit of a request that needed no hold) is answered by the
    /// codec as it answers its own errors.
    Routed(Routed),
    /// Refused while held (deadline, drain, held limit, rate limit, deleted...).
    Refused(ProxyError),
    /// The client reset the connection while held.
    Gone,
}

/// Routes a complete request head and, when its sandbox must be woken or is starting, holds
/// it compactly until the sandbox is up. Bytes the client sends while held are added to
/// `bytes` (up to a bound), so none are lost.
pub(crate) async fn park(
    router: &Router,
    stream: &TcpStream,
    bytes: &mut Vec<u8>,
    peer: SocketAddr,
) -> Parked {
    let Some(head) = holdable(router, bytes) else {
        return Parked::NotRouted;
    };
    // Before the routes are loaded the codec waits for them, as for any request.
    let Some(slot) = router.loaded_slot(&head.target.key) else {
        return Parked::NotRouted;
    };
    let held = slot.needs_hold();
    if let Err(err) = router.check_rate(peer.ip()) {
        // A request that would be held is refused at once, never held.
        return if held {
            Parked::Refused(err)
        } else {
            Parked::Routed(Err(err))
        };
    }
    // Counted as open (activity) from now on, held or not, until it is answered.
    let mut exchange = Exchange::open(router, Arc::new(head.target), &slot);
    if !held {
        return Parked::Routed(Ok(exchange));
    }
    let target = Arc::clone(&exchange.target);
    let hold = router.hold(&target, &slot, !head.upgrade);
    tokio::pin!(hold);
    let mut watching = true;
    // Bounded: every round either ends, or reads at least one byte towards `PARKED_LIMIT`,
    // or stops watching the socket; the hold itself ends by the wake deadline.
    loop {
        tokio::select! {
            result = &mut hold => {
                return match result {
                    Ok(dialled) => {
                        exchange.epoch = slot.epoch();
                        exchange.upstream = dialled.map(|(stream, _addr)| stream);
                        Parked::Routed(Ok(exchange))
                    }
                    Err(err) => Parked::Refused(err),
                };
            }
            ready = stream.readable(), if watching => {
                if ready.is_err() {
                    return Parked::Gone;
                }
                let mut chunk = [0_u8; 512];
                let room = PARKED_LIMIT.saturating_sub(bytes.len()).min(chunk.len());
                match stream.try_read(&mut chunk[..room]) {
                    // A half-close: the client may still wait for its response (as on the
                    // full path); nothing more can be learned from the socket.
                    Ok(0) => watching = false,
                    Ok(n) => {
                        bytes.extend_from_slice(&chunk[..n]);
                        watching = bytes.len() < PARKED_LIMIT;
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return Parked::Gone,
                }
            }
        }
    }
}

/// What the compact path learns from a request head.
struct Holdable {
    target: RouteTarget,
    /// It asks for an upgrade (the pooled client sends it, on a connection of its own).
    upgrade: bool,
}

/// The target of a request head when its request may be held compactly: an HTTP/1 request
/// other than `CONNECT`, with a routable host and no `X-Sandbox-Timeout` bound.
fn holdable(router: &Router, head: &[u8]) -> Option<Holdable> {
    let mut parsed = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut parsed);
    if !matches!(req.parse(head), Ok(httparse::Status::Complete(_))) {
        return None;
    }
    if req.method? == "CONNECT" {
        return None;
    }
    let mut headers = HeaderMap::with_capacity(req.headers.len());
    for header in req.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes()).ok()?;
        headers.append(name, HeaderValue::from_bytes(header.value).ok()?);
    }
    let host = match req.path?.parse::<http::Uri>().ok()?.authority() {
        Some(authority) => authority.as_str().to_owned(),
        None => {
            let mut hosts = headers.get_all(http::header::HOST).iter();
            let host = hosts.next()?.to_str().ok()?.to_owned();
            if hosts.next().is_some() {
                return None;
            }
            host
        }
    };
    let config = router.config();
    if config.routing.upstream_headers && RequestBound::of(&headers).is_some() {
        return None;
    }
    // As the full path decides: only HTTP/1.1 requests upgrade.
    let upgrade = req.version == Some(1) && headers::upgrade_protocol(&headers).is_some();
    let target = route::target_of(router, &headers, &host).ok()?;
    Some(Holdable { target, upgrade })
}

/// Answers a refused parked request (`Connection: close`) and closes the connection once
/// the client has taken the answer, at most [`LINGER`] later.
pub(crate) async fn refuse(mut stream: TcpStream, err: &ProxyError, peer: SocketAddr) {
    tracing::debug!(client.addr = %peer, error = %err, error.side = err.side().as_str(), "request refused");
    let status = err.status_code();
    account::answered(status.as_u16());
    let out = response::error_bytes(err, true);
    let written = tokio::time::timeout(LINGER, async {
        stream.write_all(&out).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return;
    }
    // Read what is left of the request until the client closes, bounded in bytes and time.
    let _ = tokio::time::timeout(LINGER, async {
        let mut discarded = 0;
        let mut chunk = [0_u8; 4096];
        while discarded < LINGER_BYTES {
            match tokio::io::AsyncReadExt::read(&mut stream, &mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => discarded += n,
            }
        }
    })
    .await;
}
