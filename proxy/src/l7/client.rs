//! The pooled upstream HTTP client: hyper-util's client with a connector that dials through
//! [`Router`]'s hold/wake and connect phases, so pooled requests wait for a waking sandbox and
//! dial errors are retried like any other connection.
//!
//! The pool is keyed by URI authority, which encodes the target as
//! `{epoch}.{name}.{namespace}[:port]` (namespaces are DNS labels and never contain a dot; the
//! epoch changes with the sandbox's address), so each sandbox port has its own pool and pooled
//! connections never outlive the address they were dialled at.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use http::uri::{Authority, Scheme};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use crate::directory::SandboxKey;
use crate::error::ProxyError;
use crate::quiesce::QuiesceStream;
use crate::route::{RouteTarget, Router};

/// Idle pooled connections are closed after this long; shorter than common backend keep-alive
/// timeouts (60 s and more) so the proxy closes first.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Most idle connections kept per sandbox port.
const POOL_MAX_IDLE_PER_TARGET: usize = 64;

pub(crate) use super::body::UpstreamBody;

/// The pooled client of one HTTP listener (plain and HTTPS share one); its connector dials
/// through the router, which knows nothing of it.
pub struct UpstreamClient {
    client: Client<RouterConnector, UpstreamBody>,
    /// HTTP/2 connections, for the requests `h2_upstream::wanted` picks.
    h2: super::h2_upstream::H2Pool,
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient").finish_non_exhaustive()
    }
}

impl UpstreamClient {
    /// A client dialling through `router`'s hold/wake and connect phases.
    pub fn new(router: Router) -> Self {
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .pool_max_idle_per_host(POOL_MAX_IDLE_PER_TARGET)
            .set_host(false)
            .build(RouterConnector { router });
        Self {
            client,
            h2: super::h2_upstream::H2Pool::default(),
        }
    }

    /// The HTTP/2 connections to sandboxes.
    pub(crate) fn h2(&self) -> &super::h2_upstream::H2Pool {
        &self.h2
    }

    /// Sends a request whose URI came from [`target_uri`].
    pub(crate) async fn request(
        &self,
        req: http::Request<UpstreamBody>,
    ) -> Result<http::Response<Incoming>, hyper_util::client::legacy::Error> {
        self.client.request(req).await
    }
}

/// The internal URI of a request to `target` while its slot is at address `epoch`: the pool
/// key encodes epoch, sandbox and port, so each sandbox port has its own pool and a pooled
/// connection is only reused while the sandbox is still at the address it was dialled at (a
/// suspended or moved sandbox never gets a request on a stale connection; it goes through the
/// connector's hold/wake instead).
pub(crate) fn target_uri(
    target: &RouteTarget,
    epoch: u64,
    path_and_query: &str,
) -> Result<Uri, http::Error> {
    let (name, namespace) = (&target.key.name, &target.key.namespace);
    let authority = match target.port {
        Some(port) => format!("{epoch}.{name}.{namespace}:{port}"),
        None => format!("{epoch}.{name}.{namespace}"),
    };
    Uri::builder()
        .scheme(Scheme::HTTP)
        .authority(authority)
        .path_and_query(path_and_query)
        .build()
}

/// The target a [`target_uri`] encodes.
fn target_of(uri: &Uri) -> Option<RouteTarget> {
    let authority: &Authority = uri.authority()?;
    let (_epoch, rest) = authority.host().split_once('.')?;
    let (name, namespace) = rest.rsplit_once('.')?;
    Some(RouteTarget {
        key: SandboxKey::new(namespace, name),
        port: authority.port_u16(),
    })
}

/// Dials through the router for the pooled client.
#[derive(Clone)]
struct RouterConnector {
    router: Router,
}

impl tower_service::Service<Uri> for RouterConnector {
    type Response = TokioIo<QuiesceStream>;
    type Error = ProxyError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let router = self.router.clone();
        Box::pin(async move {
            let target = target_of(&uri).ok_or_else(|| {
                ProxyError::BadRequest("internal upstream URI names no sandbox".to_owned())
            })?;
            let (stream, _addr, _slot) = router.connect_stream(&target).await?;
            Ok(TokioIo::new(router.quiescer().wrap(&target.key, stream)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_uri_round_trips() {
        for port in [None, Some(8080)] {
            let target = RouteTarget {
                key: SandboxKey::new("team-a", "alice"),
                port,
            };
            let uri = target_uri(&target, 7, "/x?y=1").expect("valid uri");
            assert!(
                uri.to_string().starts_with("http://7.alice.team-a"),
                "{uri}"
            );
            assert_eq!(target_of(&uri), Some(target));
        }
    }
}
