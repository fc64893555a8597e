//! HTTP/2 to the sandbox (h2c, prior knowledge) for requests of HTTP/2 clients that need it —
//! gRPC above all, whose status travels in trailers that HTTP/1.1 cannot carry — so such
//! requests work end to end through the proxy. `[upstream] http2` picks which requests
//! (docs/proxy-config.md).
//!
//! One multiplexed connection per sandbox port and address (epoch), dialled through the
//! router's hold/wake and connect phases like every other connection. hyper-util's pooled
//! client is not used for these: it would send its pool key (the internal
//! `{epoch}.{name}.{namespace}` authority) as `:authority`, where the sandbox must see the
//! client's own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response, Uri, Version};
use hyper::body::Incoming;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use super::body::UpstreamBody;
use crate::config::UpstreamHttp2;
use crate::directory::SandboxKey;
use crate::error::ProxyError;
use crate::route::{RouteTarget, Router};

/// A connection nobody sent a request on for this long leaves the pool; it closes once its
/// last stream ends. As for the HTTP/1.1 pool: shorter than common backend idle timeouts.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether a request goes to the sandbox over HTTP/2 under `mode`.
pub(crate) fn wanted(mode: UpstreamHttp2, version: Version, headers: &HeaderMap) -> bool {
    if version != Version::HTTP_2 {
        return false;
    }
    match mode {
        UpstreamHttp2::Never => false,
        UpstreamHttp2::Always => true,
        UpstreamHttp2::Grpc => headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/grpc")),
    }
}

/// Whether the client said it accepts trailers (`TE: trailers`), read before the hop-by-hop
/// headers go: gRPC servers may insist on seeing it.
pub(crate) fn accepts_trailers(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("trailers"))
}

/// Turns the head of a request made for the HTTP/1.1 path into its HTTP/2 form: the client's
/// host as `:authority` (no `Host` header), `TE: trailers` when the client sent it.
pub(crate) fn prepare(
    parts: &mut http::request::Parts,
    host: &str,
    path_and_query: &str,
    trailers: bool,
) -> Result<(), ProxyError> {
    parts.uri = Uri::builder()
        .scheme("http")
        .authority(host)
        .path_and_query(path_and_query)
        .build()
        .map_err(|err| ProxyError::BadRequest(format!("request target: {err}")))?;
    parts.version = Version::HTTP_2;
    parts.headers.remove(header::HOST);
    if trailers {
        parts
            .headers
            .insert(header::TE, HeaderValue::from_static("trailers"));
    }
    Ok(())
}

/// Which connection a request may share: the sandbox port at one address.
type PoolKey = (SandboxKey, Option<u16>, u64);

/// A pooled connection's handle.
struct Entry {
    id: u64,
    sender: http2::SendRequest<UpstreamBody>,
    last_used: Instant,
}

/// The HTTP/2 connections to sandboxes.
#[derive(Default)]
pub(crate) struct H2Pool {
    conns: Arc<Mutex<HashMap<PoolKey, Entry>>>,
    ids: AtomicU64,
}

impl H2Pool {
    /// Sends `req` to `target` (at address `epoch`) over a pooled HTTP/2 connection, dialling
    /// one through hold/wake when there is none.
    pub(crate) async fn send(
        &self,
        router: &Router,
        target: &RouteTarget,
        epoch: u64,
        req: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, ProxyError> {
        let key: PoolKey = (target.key.clone(), target.port, epoch);
        let pooled = self.checkout(&key);
        let mut sender = match pooled {
            Some(sender) => sender,
            None => self.connect(router, target, key).await?,
        };
        let protocol = |err: hyper::Error| ProxyError::UpstreamProtocol {
            key: target.key.clone(),
            message: format!("HTTP/2 to the sandbox: {err}"),
        };
        sender.ready().await.map_err(protocol)?;
        sender.send_request(req).await.map_err(protocol)
    }

    /// A live pooled connection for `key`, marked used.
    fn checkout(&self, key: &PoolKey) -> Option<http2::SendRequest<UpstreamBody>> {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        match conns.get_mut(key) {
            Some(entry) if !entry.sender.is_closed() => {
                entry.last_used = Instant::now();
                Some(entry.sender.clone())
            }
            Some(_) => {
                conns.remove(key);
                None
            }
            None => None,
        }
    }

    /// Dials `target` through hold/wake, performs the h2c handshake and pools the connection;
    /// its driver task runs until the connection ends or the proxy stops.
    async fn connect(
        &self,
        router: &Router,
        target: &RouteTarget,
        key: PoolKey,
    ) -> Result<http2::SendRequest<UpstreamBody>, ProxyError> {
        let (stream, _addr, _slot) = router.connect_stream(target).await?;
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|err| ProxyError::UpstreamProtocol {
                key: target.key.clone(),
                message: format!("HTTP/2 handshake with the sandbox: {err}"),
            })?;
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).insert(
            key.clone(),
            Entry {
                id,
                sender: sender.clone(),
                last_used: Instant::now(),
            },
        );
        let conns = Arc::downgrade(&self.conns);
        let stop = router.hard_stop();
        let span = tracing::debug_span!("h2_upstream", sandbox.key = %target.key);
        router
            .background_tasks()
            .spawn(tracing::Instrument::instrument(
                drive(conn, conns, key, id, stop),
                span,
            ));
        Ok(sender)
    }
}

/// Drives one connection until it ends (or the proxy stops), taking it out of the pool once
/// it has been idle for [`IDLE_TIMEOUT`] (it then closes when its last stream ends) and when
/// it ends.
async fn drive(
    conn: http2::Connection<TokioIo<tokio::net::TcpStream>, UpstreamBody, TokioExecutor>,
    conns: Weak<Mutex<HashMap<PoolKey, Entry>>>,
    key: PoolKey,
    id: u64,
    stop: tokio_util::sync::CancellationToken,
) {
    let forget = |only_if_idle: bool| {
        let Some(conns) = conns.upgrade() else {
            return;
        };
        let mut conns = conns.lock().unwrap_or_else(|e| e.into_inner());
        let ours = conns.get(&key).is_some_and(|entry| {
            entry.id == id && (!only_if_idle || entry.last_used.elapsed() >= IDLE_TIMEOUT)
        });
        if ours {
            conns.remove(&key);
        }
    };
    tokio::pin!(conn);
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "HTTP/2 connection to the sandbox ended");
                }
                break;
            }
            () = stop.cancelled() => break,
            () = tokio::time::sleep(IDLE_TIMEOUT) => forget(true),
        }
    }
    forget(false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_requests_go_over_http2() {
        let mut grpc = HeaderMap::new();
        grpc.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc+proto"),
        );
        let plain = HeaderMap::new();
        let cases = [
            (UpstreamHttp2::Grpc, Version::HTTP_2, &grpc, true),
            (UpstreamHttp2::Grpc, Version::HTTP_2, &plain, false),
            (UpstreamHttp2::Grpc, Version::HTTP_11, &grpc, false),
            (UpstreamHttp2::Always, Version::HTTP_2, &plain, true),
            (UpstreamHttp2::Always, Version::HTTP_11, &plain, false),
            (UpstreamHttp2::Never, Version::HTTP_2, &grpc, false),
        ];
        for (mode, version, headers, want) in cases {
            assert_eq!(
                wanted(mode, version, headers),
                want,
                "{mode:?} {version:?} {headers:?}"
            );
        }
    }

    #[test]
    fn te_trailers_is_recognised_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(header::TE, HeaderValue::from_static("gzip, Trailers"));
        assert!(accepts_trailers(&headers));
        assert!(!accepts_trailers(&HeaderMap::new()));
    }
}
