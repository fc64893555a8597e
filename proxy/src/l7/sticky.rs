//! [`StickyUpstream`]: per client connection, the upstream HTTP/1.1 connection its last request
//! used, reused by the next request to the same sandbox port at the same address.
//!
//! An HTTP/1.1 client sends its requests one after another, so one upstream connection serves
//! it without a pool checkout, a pool key or an absolute URI per request. The connection is
//! dropped when the sandbox's address epoch changes (suspended, moved) or the request goes
//! elsewhere; the next request then goes through hold/wake and dials anew. HTTP/2 clients
//! and upgrade requests use the shared pool (`client.rs`) instead.

use std::sync::Mutex;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use super::client::UpstreamBody;
use crate::error::ProxyError;
use crate::route::{RouteTarget, Router};

/// Why a request on the sticky connection failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StickyError {
    /// Hold/wake or the dial failed: nothing was sent.
    #[error(transparent)]
    Connect(#[from] ProxyError),
    /// The HTTP/1.1 handshake or exchange failed.
    #[error("upstream http/1.1: {0}")]
    Http(#[source] hyper::Error),
}

/// The upstream connection of one client connection.
#[derive(Default)]
pub(crate) struct StickyUpstream {
    /// Only one request of an HTTP/1.1 client is in flight, so the lock is never contended;
    /// it is held only to take the connection out and put it back, never across an await.
    conn: Mutex<Option<Upstream>>,
    /// A connection the compact hold dialled for the first request (with its target and
    /// address epoch): the next dial to that target at that epoch takes it.
    offered: Mutex<Option<(RouteTarget, u64, tokio::net::TcpStream)>>,
}

/// A failed exchange: the request back when it was never sent, else the error.
// Lives on the stack for one exchange; boxing the request would cost an allocation per request.
#[allow(clippy::large_enum_variant)]
enum Unsent {
    Back(Request<UpstreamBody>),
    Failed(hyper::Error),
}

/// Sends `req` once the connection is ready (at once in practice: the previous response was
/// read to its end before the client could send this request).
async fn exchange(
    sender: &mut http1::SendRequest<UpstreamBody>,
    req: Request<UpstreamBody>,
) -> Result<Response<Incoming>, Unsent> {
    if sender.ready().await.is_err() {
        return Err(Unsent::Back(req));
    }
    sender
        .try_send_request(req)
        .await
        .map_err(|mut err| match err.take_message() {
            Some(req) => Unsent::Back(req),
            None => Unsent::Failed(err.into_error()),
        })
}

/// A connection, and the target and address epoch it was dialled for.
struct Upstream {
    target: RouteTarget,
    epoch: u64,
    sender: http1::SendRequest<UpstreamBody>,
}

impl StickyUpstream {
    /// Sends `req` (origin-form URI) to `target` at address `epoch`: on the kept connection
    /// when it fits, else on a new one dialled through hold/wake. The connection is kept for
    /// the next request once the response head arrived.
    pub(crate) async fn send(
        &self,
        router: &Router,
        target: &RouteTarget,
        epoch: u64,
        req: Request<UpstreamBody>,
    ) -> Result<Response<Incoming>, StickyError> {
        let kept = self
            .conn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .filter(|up| up.epoch == epoch && up.target == *target && !up.sender.is_closed());
        let (mut upstream, req) = match kept {
            Some(mut upstream) => match exchange(&mut upstream.sender, req).await {
                Ok(response) => {
                    self.keep(upstream);
                    return Ok(response);
                }
                // The kept connection closed before the request went out (the sandbox ended
                // an idle keep-alive connection): send it on a new one, like a pool would.
                Err(Unsent::Back(req)) => (Box::pin(self.dial(router, target)).await?, req),
                Err(Unsent::Failed(err)) => return Err(StickyError::Http(err)),
            },
            // Boxed: hold/wake and the dial are a large future that a request on a kept
            // connection should not carry (and copy) through its await points.
            None => (Box::pin(self.dial(router, target)).await?, req),
        };
        match exchange(&mut upstream.sender, req).await {
            Ok(response) => {
                self.keep(upstream);
                Ok(response)
            }
            Err(Unsent::Back(_)) => Err(StickyError::Connect(ProxyError::UpstreamProtocol {
                key: target.key.clone(),
                message: "a new upstream connection closed before the request was sent".into(),
            })),
            Err(Unsent::Failed(err)) => Err(StickyError::Http(err)),
        }
    }

    /// Offers `stream`, dialled to `target` at address `epoch` by the hold/wake phase, to the
    /// next dial: a request held while its sandbox woke is sent on the connection its hold
    /// dialled, not on a second one.
    pub(crate) fn offer(&self, target: &RouteTarget, epoch: u64, stream: tokio::net::TcpStream) {
        *self.offered.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((target.clone(), epoch, stream));
    }

    /// Keeps `upstream` for the next request. Its epoch stays the one it was dialled at, so
    /// an address change while the request was out is seen by the next one.
    fn keep(&self, upstream: Upstream) {
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = Some(upstream);
    }

    /// Hold/wake and dial (or take the connection the hold offered), then handshake a new
    /// connection; its driver runs in the router's tracker until the sender is dropped (the
    /// client connection ended) or the upstream closes.
    async fn dial(&self, router: &Router, target: &RouteTarget) -> Result<Upstream, StickyError> {
        let offered = self
            .offered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .filter(|(to, _, _)| to == target);
        let (stream, epoch) = match offered {
            Some((_, epoch, stream)) => (stream, epoch),
            None => {
                let (stream, _addr, slot) = router.connect_stream(target).await?;
                (stream, slot.epoch())
            }
        };
        // Reset like pooled connections when the sandbox is checkpointed (see `quiesce`).
        let stream = router.quiescer().wrap(&target.key, stream);
        let (sender, conn) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(StickyError::Http)?;
        router.tasks().spawn(async move {
            if let Err(err) = conn.await {
                tracing::trace!(error = %err, "upstream connection ended");
            }
        });
        Ok(Upstream {
            target: target.clone(),
            epoch,
            sender,
        })
    }
}
