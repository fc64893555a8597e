//! The HTTP/1.1 relay: keep-alive requests forwarded as bytes (plain HTTP, and HTTPS without
//! `h2` negotiated).
//!
//! A request head is parsed in place and rewritten for the sandbox in one pass (hop-by-hop
//! headers dropped, `X-Forwarded-*` set), written on the client connection's own upstream
//! connection together with its body, and the response head comes back the same way; the
//! response body passes through unchanged, its end found from its framing. No header map,
//! no second HTTP state machine, no pool: per request, one read and one write on each side.
//!
//! The relay covers what most HTTP/1.1 traffic is: origin-form requests with a `Host`, no
//! body or a `Content-Length` body of at most 64 KiB, and no upgrade or `Expect`. The first
//! request it does not cover hands the connection, with every byte read, to the full HTTP
//! path (hyper), which serves it to its end; so every answer the full path gives (400, 431,
//! WebSocket, chunked uploads, ...) stays the same.
//!
//! The relay is one of the two codecs behind the request phases listed in `l7/mod.rs`: it
//! takes a first request's `Exchange` from the compact hold, or routes a request itself
//! (`Conn::route`), and forwards it. Here: `request.rs` (classify and rewrite a request head),
//! `response.rs` (the response head and its framing), `chunked.rs` (chunked bodies followed
//! without decoding), `names.rs` (header names it acts on), `upstream.rs` (the connection to
//! the sandbox kept between requests).

pub mod chunked;
mod names;
pub mod request;
pub mod response;
mod upstream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use self::chunked::Chunked;
use self::request::{Forwarded, Parsed};
use self::response::Framing;
use self::upstream::Upstream;
use super::account;
use super::exchange::{Exchange, Routed};
use super::handover::Handover;
use super::headers::Scheme;
use super::route_cache::RouteCache;
use crate::activity::ConnectionGuard;
use crate::deadline::Deadline;
use crate::directory::SandboxKey;
use crate::error::ProxyError;
use crate::metrics as m;
use crate::on_wake::OnWake;
use crate::route::{RouteTarget, Router};

/// Room kept free in a buffer before a read.
const READ_ROOM: usize = 4096;
/// Most capacity the request buffers keep between requests.
const KEPT_BUF: usize = 8 * 1024;
/// Size of the buffer a response is read into, kept between requests.
const RESPONSE_BUF: usize = 8 * 1024;
/// Largest the response buffer grows to while a long body streams (each read that fills it
/// doubles it); it is shrunk back after the response.
const RESPONSE_BUF_MAX: usize = 256 * 1024;

/// How a relayed connection ended.
pub(super) enum Outcome<IO> {
    /// Closed (by either side, a limit or the drain).
    Closed,
    /// A request the relay does not cover: the full path serves the connection from here.
    HandOver {
        /// The bytes read and not yet served, from the start of that request.
        bytes: Vec<u8>,
        stream: IO,
        handover: Handover,
    },
}

/// Relays the requests of an HTTP/1.1 connection reached over `scheme`, whose first bytes
/// (read already) are `bytes`.
pub(super) async fn serve<IO>(
    router: Router,
    stream: IO,
    peer: SocketAddr,
    scheme: Scheme,
    bytes: Vec<u8>,
    handover: Handover,
) -> Outcome<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let mut conn = Conn::new(router, stream, peer, scheme, bytes, handover);
    let hard_stop = conn.router.hard_stop();
    let ended = tokio::select! {
        biased;
        ended = conn.run() => ended,
        () = hard_stop.cancelled() => End::Close,
    };
    match ended {
        End::Close => {
            // Best effort: the client may be gone already.
            let _ = conn.stream.shutdown().await;
            Outcome::Closed
        }
        End::HandOver(reason) => {
            metrics::counter!(m::HTTP_RELAY_HANDOVERS_TOTAL, "reason" => reason).increment(1);
            Outcome::HandOver {
                bytes: conn.inbuf,
                stream: conn.stream,
                // Every hand-over is at a whole head, or one already over the size limit.
                handover: Handover {
                    first: conn.first,
                    head_by: None,
                },
            }
        }
    }
}

/// How the request loop ended.
enum End {
    Close,
    /// To the full path, for this reason (metric label).
    HandOver(&'static str),
}

/// Why an exchange failed before the client got a response head.
enum Failure {
    /// The client gets this error's response.
    Proxy(ProxyError),
    /// The connection cannot go on (a side closed or failed mid-response).
    Close,
}

/// One relayed client connection.
struct Conn<IO> {
    router: Router,
    stream: IO,
    peer: SocketAddr,
    forwarded: Forwarded,
    /// Client bytes read and not yet served, from the start of the current request.
    inbuf: Vec<u8>,
    /// The rewritten head (and body) on its way out.
    out: Vec<u8>,
    /// Bytes read from the sandbox.
    resp: Vec<u8>,
    upstream: Option<Upstream>,
    routes: RouteCache,
    /// Waiting for a request head: `limits.header_read_timeout` from when the wait began.
    head_deadline: Deadline,
    head_timeout: Duration,
    /// When the first head must be whole, if earlier than a whole timeout from now (the
    /// timeout ran from accept, through a TLS handshake).
    first_head_by: Option<Instant>,
    /// No byte either way for `limits.idle_timeout`.
    idle: Deadline,
    idle_timeout: Option<Duration>,
    max_head: usize,
    /// Polled only when the drain signal itself wakes the task.
    drained: OnWake<WaitForCancellationFutureOwned>,
    drain: CancellationToken,
    /// The proxy drains (seen once `drained` fired).
    drain_seen: bool,
    /// The first request's exchange when the compact hold routed it (and held and dialled
    /// it, when its sandbox had to be woken).
    first: Option<Routed>,
    /// The routes were loaded once; they stay loaded.
    synced: bool,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Conn<IO> {
    fn new(
        router: Router,
        stream: IO,
        peer: SocketAddr,
        scheme: Scheme,
        bytes: Vec<u8>,
        handover: Handover,
    ) -> Self {
        let config = router.config();
        let limits = &config.limits;
        let forwarded = Forwarded {
            client: peer.ip().to_string(),
            proto: scheme.as_str(),
            router_headers: config.routing.upstream_headers,
        };
        let drain = router.drain_signal();
        let drained = OnWake::new(drain.clone().cancelled_owned());
        Self {
            stream,
            peer,
            forwarded,
            inbuf: bytes,
            out: Vec::with_capacity(1024),
            resp: Vec::with_capacity(RESPONSE_BUF),
            upstream: None,
            routes: RouteCache::default(),
            head_deadline: Deadline::after(Some(limits.header_read_timeout)),
            head_timeout: limits.header_read_timeout,
            first_head_by: handover.head_by,
            idle: Deadline::after(limits.idle_timeout),
            idle_timeout: limits.idle_timeout,
            max_head: limits.max_header_bytes,
            drained,
            drain,
            drain_seen: false,
            first: handover.first,
            synced: false,
            router,
        }
    }

    /// Serves requests until the connection closes or one goes to the full path.
    async fn run(&mut self) -> End {
        loop {
            let head_by = self
                .first_head_by
                .take()
                .unwrap_or_else(|| Instant::now() + self.head_timeout);
            self.head_deadline.set(head_by);
            let head = loop {
                match request::prepare(&self.inbuf, &self.forwarded, &mut self.out) {
                    // A head over the limit that came in one read: the full path answers 431.
                    Parsed::Ready(head) if head.len > self.max_head => {
                        return End::HandOver("too_large");
                    }
                    Parsed::Ready(head) => break head,
                    Parsed::Unsupported(reason) => return End::HandOver(reason.label()),
                    // The full path answers 431 for it.
                    Parsed::Partial if self.inbuf.len() >= self.max_head => {
                        return End::HandOver("too_large");
                    }
                    Parsed::Partial => {
                        if !self.read_head_bytes().await {
                            return End::Close;
                        }
                    }
                }
            };
            // `body` is at most `request::BODY_LIMIT`.
            let total = head.len + head.body as usize;
            while self.inbuf.len() < total {
                if !self.read_client().await {
                    return End::Close;
                }
            }
            self.out.extend_from_slice(&self.inbuf[head.len..total]);
            let keep = self.exchange(&head).await;
            self.inbuf.drain(..total);
            // What a large head or body needed is not kept while the connection idles.
            for buf in [&mut self.inbuf, &mut self.out] {
                if buf.capacity() > KEPT_BUF {
                    buf.shrink_to(KEPT_BUF.max(buf.len()));
                }
            }
            if !keep || head.close || self.draining() {
                return End::Close;
            }
        }
    }

    /// Whether the proxy drains: the connection closes after the response in flight.
    fn draining(&mut self) -> bool {
        // The token is read (a lock) only when its waker fired, or before its first poll.
        if !self.drain_seen && self.drained.fired() {
            self.drain_seen = self.drain.is_cancelled();
        }
        self.drain_seen
    }

    /// Reads more of a request head: false when the client closed, the head timeout passed
    /// or the proxy drains while no request is in flight.
    async fn read_head_bytes(&mut self) -> bool {
        reserve(&mut self.inbuf);
        let waiting = self.inbuf.is_empty();
        // Bounded: a round either ends or drops the upstream connection, which ends the
        // second branch for good.
        let read = loop {
            let read = self
                .head_deadline
                .run(self.stream.read_buf(&mut self.inbuf));
            let upstream = self.upstream.as_mut();
            let has_upstream = upstream.is_some();
            let unusable = async move {
                if let Some(upstream) = upstream {
                    upstream.unusable().await;
                }
            };
            // The idle limit applies between requests too.
            tokio::select! {
                biased;
                () = &mut self.drained, if waiting => return false,
                () = unusable, if has_upstream => self.upstream = None,
                read = self.idle.run(read) => break read,
            }
        };
        match read {
            Some(Some(Ok(n))) if n > 0 => {
                self.idle_touch();
                true
            }
            Some(Some(Ok(_))) => false,
            Some(Some(Err(err))) => {
                tracing::debug!(client.addr = %self.peer, error = %err, "client connection failed");
                false
            }
            None => {
                metrics::counter!(m::DOWNSTREAM_ERRORS_TOTAL, "reason" => "idle").increment(1);
                false
            }
            Some(None) => {
                metrics::counter!(m::DOWNSTREAM_ERRORS_TOTAL, "reason" => "header_timeout")
                    .increment(1);
                false
            }
        }
    }

    /// Reads more of a request body: false when the client closed or went idle.
    async fn read_client(&mut self) -> bool {
        reserve(&mut self.inbuf);
        match self.idle.run(self.stream.read_buf(&mut self.inbuf)).await {
            Some(Ok(n)) if n > 0 => {
                self.idle_touch();
                true
            }
            None => {
                metrics::counter!(m::DOWNSTREAM_ERRORS_TOTAL, "reason" => "idle").increment(1);
                false
            }
            Some(_) => false,
        }
    }

    /// Moves the idle deadline: a byte moved now.
    fn idle_touch(&mut self) {
        if let Some(limit) = self.idle_timeout {
            self.idle.set(Instant::now() + limit);
        }
    }

    /// Forwards one request (its rewritten head and body in `out`) and its response: whether
    /// the client connection can carry another request.
    async fn exchange(&mut self, head: &request::Head) -> bool {
        let routed = match self.first.take() {
            Some(first) => first,
            None => self.route(head).await,
        };
        let Exchange {
            target,
            epoch,
            guard,
            upstream,
        } = match routed {
            Ok(exchange) => exchange,
            Err(err) => return self.refuse(&err, head.close).await,
        };
        // Connect: the compact hold dialled the sandbox for this request already.
        let dialled = upstream.map(|stream| Upstream::adopt(&self.router, &target, epoch, stream));
        guard.record_bytes(head.body, 0);
        let sent = self.send(head, &target, epoch, dialled).await;
        let relayed = match sent {
            Ok(response) => self.respond(head, response, &guard, &target.key).await,
            Err(failure) => Err(failure),
        };
        match relayed {
            Ok(keep) => keep,
            Err(Failure::Proxy(err)) => {
                self.upstream = None;
                self.refuse(&err, head.close).await
            }
            Err(Failure::Close) => false,
        }
    }

    /// The route phase of a request the compact hold did not route: rate limit, host, slot,
    /// counted as open.
    async fn route(&mut self, head: &request::Head) -> Result<Exchange, ProxyError> {
        // The relay checked that the host is visible ASCII.
        let host = std::str::from_utf8(&self.inbuf[head.host.clone()]).unwrap_or_default();
        let snapshot = self.router.snapshot();
        self.router
            .check_rate_under(&snapshot.config, self.peer.ip())?;
        let target = self.routes.target(&snapshot, host)?;
        if !self.synced {
            self.router.wait_synced().await;
            self.synced = true;
        }
        let slot =
            self.routes
                .slot(&self.router, &target)
                .ok_or_else(|| ProxyError::UnknownSandbox {
                    key: target.key.clone(),
                })?;
        Ok(Exchange::open(&self.router, target, &slot))
    }

    /// Sends the request on `dialled` (a connection its hold dialled), else on the kept
    /// connection when it fits, else on a new one; a request whose connection was lost before
    /// any response is sent once more when that is safe. Returns the response head, its bytes
    /// at the start of `resp`.
    async fn send(
        &mut self,
        head: &request::Head,
        target: &Arc<RouteTarget>,
        epoch: u64,
        dialled: Option<Upstream>,
    ) -> Result<response::Head, Failure> {
        let kept = self
            .upstream
            .take()
            .filter(|upstream| upstream.fits(target, epoch));
        // Only a connection kept from an earlier request may have been closed while idle; a
        // new one, dialled here or by the hold, is new.
        let (upstream, reused) = match (dialled, kept) {
            (Some(dialled), _) => (dialled, false),
            (None, Some(kept)) => (kept, true),
            (None, None) => (self.dial(target).await?, false),
        };
        self.upstream = Some(upstream);
        match self.send_once(head, &target.key).await {
            Ok(response) => return Ok(response),
            Err(Lost::Failed(failure)) => return Err(failure),
            // A kept connection the sandbox had closed while idle took no request: any
            // request goes on a new one.
            Err(Lost::Unsent) if reused => {}
            Err(Lost::Unsent | Lost::Unanswered) => {
                // Otherwise the workload went away under the request, as in a suspend the
                // proxy has not seen yet: its address refusing now is no closed port.
                if let Some(slot) = self.router.slot(&target.key) {
                    slot.note_lost();
                }
                // The sandbox may have seen the request: only one safe to repeat goes again.
                if !head.replayable {
                    return Err(Failure::Proxy(lost(&target.key)));
                }
                metrics::counter!(m::REQUEST_RETRIES_TOTAL).increment(1);
                tracing::debug!(sandbox.key = %target.key, "request sent again");
            }
        }
        self.upstream = Some(self.dial(target).await?);
        match self.send_once(head, &target.key).await {
            Ok(response) => Ok(response),
            Err(Lost::Failed(failure)) => Err(failure),
            Err(Lost::Unsent | Lost::Unanswered) => Err(Failure::Proxy(lost(&target.key))),
        }
    }

    /// Holds (waking the sandbox if needed) and dials `target`.
    async fn dial(&mut self, target: &Arc<RouteTarget>) -> Result<Upstream, Failure> {
        // Boxed: hold/wake and the dial are a large future that a request on a kept
        // connection should not carry.
        Box::pin(Upstream::dial(&self.router, target))
            .await
            .map_err(Failure::Proxy)
    }

    /// Writes `out` on the upstream connection and reads the response head, forwarding
    /// informational (1xx) responses on the way.
    async fn send_once(
        &mut self,
        head: &request::Head,
        key: &SandboxKey,
    ) -> Result<response::Head, Lost> {
        let Some(upstream) = self.upstream.as_mut() else {
            return Err(Lost::Unsent);
        };
        let written = self.idle.run(upstream.stream.write_all(&self.out)).await;
        match written {
            Some(Ok(())) => {}
            Some(Err(_)) => return Err(Lost::Unsent),
            None => return Err(Lost::Failed(idle())),
        }
        self.resp.clear();
        let mut answered = false;
        // Bounded: each round reads at least one byte or consumes an informational
        // response, and a head is at most `response::HEAD_LIMIT` bytes.
        loop {
            let close = head.close || self.draining();
            let parsed = if self.resp.is_empty() {
                Ok(None)
            } else {
                response::prepare(&self.resp, head.head_method, close, &mut self.out)
            };
            match parsed {
                Ok(Some(response)) if (100..200).contains(&response.status) => {
                    // An informational response (103 Early Hints): on to the client, then
                    // the next head.
                    if !self.write_client_out().await {
                        return Err(Lost::Failed(Failure::Close));
                    }
                    self.resp.drain(..response.len);
                    answered = true;
                    continue;
                }
                Ok(Some(response)) => return Ok(response),
                Ok(None) => {}
                Err(invalid) => {
                    return Err(Lost::Failed(Failure::Proxy(protocol(
                        key,
                        &invalid.to_string(),
                    ))));
                }
            }
            let read = self.read_upstream().await;
            let nothing_yet = self.resp.is_empty() && !answered;
            match read {
                Some(Ok(0)) | Some(Err(_)) if nothing_yet => return Err(Lost::Unanswered),
                Some(Ok(0)) => {
                    let message = "the connection closed in the middle of the response head";
                    return Err(Lost::Failed(Failure::Proxy(protocol(key, message))));
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => {
                    let message = format!("reading the response head: {err}");
                    return Err(Lost::Failed(Failure::Proxy(protocol(key, &message))));
                }
                None => return Err(Lost::Failed(idle())),
            }
        }
    }

    /// Sends the response head (rewritten in `out`) and body to the client: whether the
    /// client connection goes on.
    async fn respond(
        &mut self,
        head: &request::Head,
        response: response::Head,
        guard: &ConnectionGuard,
        key: &SandboxKey,
    ) -> Result<bool, Failure> {
        let mut body = Body::new(response.framing);
        let first = &self.resp[response.len..];
        // Nothing of this response went to the client yet: a body broken in the bytes that
        // came with the head is a 502 naming why, not a connection closed on the client.
        let taken = body
            .take(first)
            .map_err(|err| Failure::Proxy(protocol(key, &err.to_string())))?;
        account::answered(response.status);
        let mut clean = taken == first.len();
        self.out.extend_from_slice(&first[..taken]);
        guard.record_bytes(0, taken as u64);
        if !self.write_client_out().await {
            return Err(Failure::Close);
        }
        // Bounded by the body's framing; each round moves at least one byte or ends.
        while !body.done() {
            self.resp.clear();
            let n = match self.read_upstream().await {
                Some(Ok(n)) => n,
                Some(Err(_)) => return Err(Failure::Close),
                None => return Err(idle()),
            };
            if n == 0 {
                if body.framing == Framing::UntilClose {
                    break;
                }
                // The sandbox closed before the end of the body it announced: the client
                // must not take the truncated body for a whole one.
                return Err(Failure::Close);
            }
            // A read that filled the buffer: a long body is streaming, read more at a time.
            if n == self.resp.capacity() && n < RESPONSE_BUF_MAX {
                self.resp.reserve(n);
            }
            let taken = body.take(&self.resp).map_err(|_| Failure::Close)?;
            clean &= taken == self.resp.len();
            guard.record_bytes(0, taken as u64);
            let written = self
                .idle
                .run(self.stream.write_all(&self.resp[..taken]))
                .await;
            match written {
                Some(Ok(())) => self.idle_touch(),
                Some(Err(_)) => return Err(Failure::Close),
                None => return Err(idle()),
            }
        }
        if self.resp.capacity() > RESPONSE_BUF {
            self.resp = Vec::with_capacity(RESPONSE_BUF);
        }
        // A sandbox that sent more than the response, or will close, is not asked again.
        if response.upstream_closes || !clean {
            self.upstream = None;
        }
        Ok(response.framing != Framing::UntilClose && !head.close)
    }

    /// Reads the sandbox's next bytes onto `resp`: `None` past the idle limit.
    async fn read_upstream(&mut self) -> Option<std::io::Result<usize>> {
        if self.resp.capacity() - self.resp.len() < READ_ROOM {
            self.resp.reserve(RESPONSE_BUF);
        }
        let Some(upstream) = self.upstream.as_mut() else {
            return Some(Err(std::io::ErrorKind::NotConnected.into()));
        };
        self.idle
            .run(upstream.stream.read_buf(&mut self.resp))
            .await
    }

    /// Writes `out` to the client: false when the client is gone or idle.
    async fn write_client_out(&mut self) -> bool {
        let written = self.idle.run(self.stream.write_all(&self.out)).await;
        let ok = matches!(written, Some(Ok(())));
        if ok {
            self.idle_touch();
        }
        ok
    }

    /// Answers the request with the error's response: whether the connection goes on.
    async fn refuse(&mut self, err: &ProxyError, close: bool) -> bool {
        tracing::debug!(error = %err, error.side = err.side().as_str(), "request refused");
        account::answered(err.status_code().as_u16());
        let close = close || self.draining();
        self.out = super::response::error_bytes(err, close);
        self.write_client_out().await && !close
    }
}

/// A response body's progress through its framing.
struct Body {
    framing: Framing,
    left: u64,
    chunked: Chunked,
}

impl Body {
    fn new(framing: Framing) -> Self {
        let left = match framing {
            Framing::Length(n) => n,
            _ => 0,
        };
        Self {
            framing,
            left,
            chunked: Chunked::new(),
        }
    }

    /// How many of `bytes` (read next from the sandbox) belong to the body.
    fn take(&mut self, bytes: &[u8]) -> Result<usize, chunked::ChunkedError> {
        Ok(match self.framing {
            Framing::Empty => 0,
            Framing::Length(_) => {
                // At most `bytes.len()`, a `usize`.
                let n = self.left.min(bytes.len() as u64) as usize;
                self.left -= n as u64;
                n
            }
            Framing::Chunked => self.chunked.scan(bytes)?,
            Framing::UntilClose => bytes.len(),
        })
    }

    /// Whether the body ended (a body delimited by the close ends only then).
    fn done(&self) -> bool {
        match self.framing {
            Framing::Empty => true,
            Framing::Length(_) => self.left == 0,
            Framing::Chunked => self.chunked.is_done(),
            Framing::UntilClose => false,
        }
    }
}

/// Why a send on an upstream connection failed.
enum Lost {
    /// Writing the request failed: the connection was closed.
    Unsent,
    /// The request was written, and the connection closed or failed before any response.
    Unanswered,
    /// Anything else.
    Failed(Failure),
}

/// Keeps room for a read at the end of `buf`.
fn reserve(buf: &mut Vec<u8>) {
    if buf.capacity() - buf.len() < READ_ROOM {
        buf.reserve(READ_ROOM);
    }
}

/// A connection that saw no byte either way for the idle timeout: closed.
fn idle() -> Failure {
    metrics::counter!(m::DOWNSTREAM_ERRORS_TOTAL, "reason" => "idle").increment(1);
    Failure::Close
}

/// The error of a request whose upstream connection was lost before any response.
fn lost(key: &SandboxKey) -> ProxyError {
    protocol(key, "the connection closed before a response")
}

/// An upstream protocol error.
fn protocol(key: &SandboxKey, message: &str) -> ProxyError {
    ProxyError::UpstreamProtocol {
        key: key.clone(),
        message: message.to_owned(),
    }
}
