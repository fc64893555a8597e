//! HTTP `CONNECT host:port` tunnels to sandboxes: the L7 service hands CONNECT requests here,
//! and the tunnel is spliced like any L4 connection.
//!
//! Only hosts under the sandbox domains are tunnelled (anything else gets 403: the proxy is not
//! an open forward proxy). The authority's port is the sandbox's container port. The sandbox is
//! woken and dialled before the answer, so the client gets a real status (404, 502, 503 +
//! `Retry-After`) rather than a 200 followed by a closed tunnel; after `200` the upgraded
//! connection is spliced both ways.

use std::net::SocketAddr;

use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rouse_shared::names::split_host_port;

use super::response::{self, ProxyBody};
use crate::error::ProxyError;
use crate::kind::ConnKind;
use crate::route::{RouteTarget, Router};
use crate::splice::{SpliceOptions, splice};

/// Answers a CONNECT request: `200` and a spliced tunnel, or the reason there is none.
pub(crate) async fn handle(
    router: Router,
    mut req: Request<Incoming>,
    peer: SocketAddr,
) -> Response<ProxyBody> {
    if let Err(err) = router.check_rate(peer.ip()) {
        return response::error(&err);
    }
    let target = match target(&router, &req) {
        Ok(target) => target,
        Err(refusal) => return refusal.response(),
    };
    let upstream = match router.connect(&target, ConnKind::Connect).await {
        Ok(upstream) => upstream,
        Err(err) => {
            tracing::debug!(sandbox.key = %target.key, error = %err, "connect refused");
            return response::error(&err);
        }
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let idle_timeout = router.config().limits.upgraded_idle_timeout;
    let hard_stop = router.hard_stop();
    router.tasks().spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(err) => {
                tracing::debug!(sandbox.key = %target.key, error = %err, "connect upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(upgraded);
        let mut stream = upstream.stream;
        let guard = upstream.guard;
        let options = SpliceOptions {
            idle_timeout,
            ..SpliceOptions::default()
        };
        tokio::select! {
            result = splice(&mut client, &mut stream, options, |up, down| guard.record_bytes(up, down)) => {
                if let Err(err) = result {
                    tracing::debug!(sandbox.key = %target.key, error = %err, "connect tunnel ended");
                }
            }
            () = hard_stop.cancelled() => {}
        }
    });
    // No body and no length headers: after a 2xx to CONNECT the connection is the tunnel.
    Response::new(Empty::new().map_err(|never| match never {}).boxed())
}

/// Why a CONNECT request is refused before any sandbox is contacted.
enum Refusal {
    /// Not a sandbox host: 403.
    Forbidden(String),
    /// A malformed target: 400.
    Bad(String),
}

impl Refusal {
    fn response(self) -> Response<ProxyBody> {
        match self {
            Refusal::Forbidden(message) => response::text(StatusCode::FORBIDDEN, message),
            Refusal::Bad(message) => response::error(&ProxyError::BadRequest(message)),
        }
    }
}

/// The sandbox and port of a CONNECT request.
fn target(router: &Router, req: &Request<Incoming>) -> Result<RouteTarget, Refusal> {
    let Some(authority) = req.uri().authority() else {
        return Err(Refusal::Bad("CONNECT needs a host:port target".to_owned()));
    };
    let (host, port) = split_host_port(authority.as_str())
        .map_err(|err| Refusal::Bad(format!("CONNECT target {authority}: {err}")))?;
    let Some(port) = port.filter(|p| *p > 0) else {
        return Err(Refusal::Bad(format!(
            "CONNECT target {authority} has no port"
        )));
    };
    let mut target = router.resolve_host(host).map_err(|err| {
        tracing::debug!(connect.host = %host, error = %err, "connect outside the sandbox domains");
        Refusal::Forbidden(format!("CONNECT is only allowed to sandbox hosts: {err}\n"))
    })?;
    match target.port {
        Some(prefixed) if prefixed != port => Err(Refusal::Bad(format!(
            "CONNECT target {authority} names port {prefixed} in the host and {port} after it"
        ))),
        _ => {
            target.port = Some(port);
            Ok(target)
        }
    }
}
