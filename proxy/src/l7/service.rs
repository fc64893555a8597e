//! The hyper codec: the phases of one request on the full HTTP path (the list is in
//! `l7/mod.rs`) — classify (CONNECT, upgrade, HTTP/2 upstream), route (Host or router
//! headers, unless the compact hold routed it: its [`Exchange`]), hold/wake and connect
//! (inside the sticky connection's dial or the pooled client's connector), forward (streamed
//! bodies, hop-by-hop rules, `X-Forwarded-*`), account (activity, `requests_total{code}`).

use std::error::Error as StdError;
use std::sync::Arc;

use http::header;
use http::uri::PathAndQuery;
use http::{Method, Request, Response, Version};
use http_body_util::{BodyExt, Either};
use hyper::body::Incoming;

use super::body::{self, CountingBody, Direction};
use super::client::{self, UpstreamClient};
use super::conn_state::ConnState;
use super::exchange::{Exchange, Routed};
use super::failure::{chain, classify, connection_lost};
use super::h2_upstream;
use super::headers;
use super::response::{self, ProxyBody};
use super::route::{not_ascii, request_host, route};
use super::router_headers::{self, RequestBound};
use super::sticky::StickyUpstream;
use super::{account, connect, upgrade};
use crate::activity::ConnectionGuard;
use crate::directory::SandboxKey;
use crate::error::ProxyError;
use crate::metrics as m;
use crate::route::{RouteTarget, Router};

/// What a request's service knows of its client connection.
pub(crate) struct ConnInfo {
    /// What the connection's requests share.
    pub(crate) state: Arc<ConnState>,
    /// The request's exchange when the compact hold routed it (the connection's first).
    pub(crate) first: Option<Routed>,
}

/// Answers one request; never fails (errors become responses).
pub(crate) async fn handle(
    router: Router,
    client: Arc<UpstreamClient>,
    req: Request<Incoming>,
    mut conn: ConnInfo,
) -> Result<Response<ProxyBody>, std::convert::Infallible> {
    let response = if req.method() == Method::CONNECT {
        // A CONNECT tunnel is an upgraded stream: its own idle limit applies.
        conn.state
            .idle
            .set(router.config().limits.upgraded_idle_timeout);
        connect::handle(router, req, conn.state.peer).await
    } else {
        let first = conn.first.take();
        match proxy(&router, &client, req, &conn, first).await {
            Ok(response) => response,
            Err(err) => {
                tracing::debug!(error = %err, error.side = err.side().as_str(), "request refused");
                response::error(&err)
            }
        }
    };
    account::answered(response.status().as_u16());
    Ok(response)
}

async fn proxy(
    router: &Router,
    client: &UpstreamClient,
    mut req: Request<Incoming>,
    conn: &ConnInfo,
    first: Option<Routed>,
) -> Result<Response<ProxyBody>, ProxyError> {
    let state = &*conn.state;
    let (peer, scheme) = (state.peer, state.scheme);
    // The config in force, read once for the whole request.
    let snapshot = router.snapshot();
    let config = &snapshot.config;
    // Route: the rate limit first (a request routed before counted it then).
    if first.is_none() {
        router.check_rate_under(config, peer.ip())?;
    }
    let first = first.transpose()?;
    let (host, host_from_uri) = request_host(&req)?;
    let host_text = host.to_str().map_err(|_| not_ascii())?;
    let bound = config
        .routing
        .upstream_headers
        .then(|| RequestBound::of(req.headers()))
        .flatten();
    let exchange = match first {
        Some(exchange) => exchange,
        None => route(router, state, &snapshot, &req, host_text).await?,
    };
    let Exchange {
        target,
        epoch,
        guard,
        upstream: dialled,
    } = exchange;
    let guard = Arc::new(guard);
    let upgrade = if req.version() == Version::HTTP_11 {
        headers::upgrade_protocol(req.headers())
    } else {
        None
    };
    // HTTP/1 clients send one request at a time: their requests reuse one upstream connection.
    // HTTP/2 clients multiplex, and upgrades take their connection away: both use the pool.
    let sticky = (req.version() <= Version::HTTP_11 && upgrade.is_none()).then_some(&state.sticky);
    let downstream_upgrade = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut req));
    let h2 = h2_upstream::wanted(config.upstream.http2, req.version(), req.headers())
        .then(|| h2_upstream::accepts_trailers(req.headers()));
    // Connect: a connection the hold dialled already carries the request when it goes on a
    // connection of its own (the compact hold dials none for requests that go pooled).
    if let (Some(sticky), None, Some(stream)) = (sticky, h2, dialled) {
        sticky.offer(&target, epoch, stream);
    }
    let (mut parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    parts.uri = upstream_uri(sticky.is_some(), &target, epoch, &path)?;
    parts.version = Version::HTTP_11;
    headers::strip_hop_by_hop(&mut parts.headers, upgrade.clone());
    headers::set_forwarded_values(
        &mut parts.headers,
        &state.forwarded_for,
        peer.ip(),
        scheme.as_str(),
        Some(&host),
    );
    // The sandbox always gets the host the request was routed by: from the URI, or the one
    // `Host`, which a `Connection` option naming it must not take away (HTTP/1.1 requires it,
    // RFC 9112 §3.2; it is no hop-by-hop header).
    if host_from_uri || !parts.headers.contains_key(header::HOST) {
        parts.headers.insert(header::HOST, host.clone());
    }
    if let Some(trailers) = h2 {
        h2_upstream::prepare(&mut parts, host_text, path.as_str(), trailers)?;
    }
    let replay = (h2.is_none() && replayable(&parts.method, &body, upgrade.is_some()))
        .then(|| (parts.method.clone(), parts.headers.clone()));
    let body = CountingBody::new(
        Either::Left(body.map_err(body::ClientBodyError as fn(_) -> _)),
        Arc::clone(&guard),
        Direction::ToUpstream,
    );
    let upstream_req = Request::from_parts(parts, body);
    if h2.is_some() {
        let pool = client.h2();
        let exchange = pool.send(router, &target, epoch, upstream_req);
        let upstream_resp = router_headers::bounded(&target.key, bound, exchange).await??;
        return to_client(upstream_resp, guard, &target.key);
    }
    let exchange = send(router, client, sticky, &target, epoch, upstream_req);
    // Without a bound of its own the exchange is awaited here, not moved into `bounded`.
    let sent = match bound {
        None => exchange.await,
        Some(_) => router_headers::bounded(&target.key, bound, exchange).await?,
    };
    let lost = matches!(&sent, Err(err) if connection_lost(&**err));
    if lost && let Some(slot) = router.slot(&target.key) {
        // The workload went away under the request (a suspend the proxy has not seen yet):
        // its address refusing now is no closed port.
        slot.note_lost();
    }
    let mut upstream_resp = match (sent, replay) {
        (Ok(resp), _) => resp,
        (Err(err), Some((method, headers))) if lost => {
            // Send it once more, through hold-and-wake, at the sandbox's current address.
            metrics::counter!(m::REQUEST_RETRIES_TOTAL).increment(1);
            tracing::debug!(sandbox.key = %target.key, error = %chain(&*err), "request sent again");
            let epoch = router.slot(&target.key).map_or(0, |slot| slot.epoch());
            let empty = Either::Right(http_body_util::Empty::new());
            let mut again = Request::new(CountingBody::new(
                empty,
                Arc::clone(&guard),
                Direction::ToUpstream,
            ));
            *again.method_mut() = method;
            *again.headers_mut() = headers;
            *again.uri_mut() = upstream_uri(sticky.is_some(), &target, epoch, &path)?;
            let exchange = send(router, client, sticky, &target, epoch, again);
            router_headers::bounded(&target.key, bound, exchange)
                .await?
                .map_err(|err| classify(&target.key, &*err))?
        }
        (Err(err), _) => return Err(classify(&target.key, &*err)),
    };
    let status = upstream_resp.status();
    if status == http::StatusCode::SWITCHING_PROTOCOLS {
        let Some(downstream) = downstream_upgrade else {
            return Err(ProxyError::UpstreamProtocol {
                key: target.key.clone(),
                message: "101 Switching Protocols to a request that asked for no upgrade".into(),
            });
        };
        let protocol = upstream_resp.headers().get(header::UPGRADE).cloned();
        let upstream = hyper::upgrade::on(&mut upstream_resp);
        conn.state
            .idle
            .set(router.config().limits.upgraded_idle_timeout);
        upgrade::spawn_tunnel(router, RouteTarget::clone(&target), downstream, upstream);
        let (mut parts, _) = upstream_resp.into_parts();
        headers::strip_hop_by_hop(&mut parts.headers, protocol.or(upgrade));
        let empty = http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed();
        return Ok(Response::from_parts(parts, empty));
    }
    to_client(upstream_resp, guard, &target.key)
}

/// The sandbox's response as the client gets it: hop-by-hop headers removed, the body (and
/// its trailers) streamed and counted. A body that failed already (a malformed chunk size
/// right after the head) is a 502 naming why: nothing of the response went to the client.
fn to_client(
    upstream_resp: Response<Incoming>,
    guard: Arc<ConnectionGuard>,
    key: &SandboxKey,
) -> Result<Response<ProxyBody>, ProxyError> {
    let (mut parts, body) = upstream_resp.into_parts();
    let body = body::peek(body).map_err(|err| ProxyError::UpstreamProtocol {
        key: key.clone(),
        message: format!("the response body failed: {}", chain(&err)),
    })?;
    headers::strip_hop_by_hop(&mut parts.headers, None);
    let body = CountingBody::new(body, guard, Direction::ToClient)
        .map_err(|err| Box::new(err) as Box<dyn StdError + Send + Sync>)
        .boxed();
    Ok(Response::from_parts(parts, body))
}

/// The URI of a request sent upstream: origin-form on a sticky connection, else the pool's
/// internal URI naming target and epoch.
fn upstream_uri(
    sticky: bool,
    target: &RouteTarget,
    epoch: u64,
    path: &PathAndQuery,
) -> Result<http::Uri, ProxyError> {
    let uri = if sticky {
        Ok(http::Uri::from(path.clone()))
    } else {
        client::target_uri(target, epoch, path.as_str())
    };
    uri.map_err(|err| ProxyError::BadRequest(format!("request target: {err}")))
}

/// Sends a request on the client connection's sticky upstream connection, or through the pool.
async fn send(
    router: &Router,
    client: &UpstreamClient,
    sticky: Option<&StickyUpstream>,
    target: &RouteTarget,
    epoch: u64,
    req: Request<client::UpstreamBody>,
) -> Result<Response<Incoming>, Box<dyn StdError + Send + Sync>> {
    match sticky {
        Some(sticky) => Ok(sticky.send(router, target, epoch, req).await?),
        None => Ok(client.request(req).await?),
    }
}

/// Whether a request may be sent again after its upstream connection was lost: a safe method
/// (RFC 9110 §9.2.1) with no body and no upgrade, so a second send cannot repeat an effect or
/// need a body that was already consumed.
fn replayable(method: &Method, body: &Incoming, upgrade: bool) -> bool {
    use hyper::body::Body as _;
    !upgrade
        && body.is_end_stream()
        && matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}
