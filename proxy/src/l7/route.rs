//! The route phase of an HTTP request (the phase list is in `l7/mod.rs`): which sandbox port
//! it goes to — by the upstream router headers when enabled and present, else by its host —
//! and, for the hyper codec, its `Exchange`. The compact hold routes a first head with
//! [`target_of`] too; the relay routes by host through its connection's route cache.

use std::sync::Arc;

use http::Request;
use http::header::{self, HeaderValue};
use hyper::body::Incoming;

use super::conn_state::ConnState;
use super::exchange::Exchange;
use super::headers::{X_SANDBOX_ID, X_SANDBOX_NAMESPACE, X_SANDBOX_PORT};
use crate::directory::SandboxKey;
use crate::error::ProxyError;
use crate::route::{RouteTarget, Router, Snapshot};

/// The route phase of a request the compact hold did not route: its target (by router
/// headers, or by host through the connection's route cache), its slot once the routes are
/// loaded, counted as open.
pub(super) async fn route(
    router: &Router,
    state: &ConnState,
    snapshot: &Snapshot,
    req: &Request<Incoming>,
    host_text: &str,
) -> Result<Exchange, ProxyError> {
    let by_headers =
        snapshot.config.routing.upstream_headers && req.headers().contains_key(&X_SANDBOX_ID);
    let target = if by_headers {
        Arc::new(target_of(router, req.headers(), host_text)?)
    } else {
        state.target_by_host(snapshot, host_text)?
    };
    router.wait_synced().await;
    let slot = state
        .slot(router, &target)
        .ok_or_else(|| ProxyError::UnknownSandbox {
            key: target.key.clone(),
        })?;
    Ok(Exchange::open(router, target, &slot))
}

/// The request's host, and whether it came from the URI: the URI authority (HTTP/2,
/// absolute-form) or the one `Host` header. Two `Host` headers or one that is not visible
/// ASCII are a bad request (RFC 9112 §3.2), never a guess at which one to route by.
pub(super) fn request_host(req: &Request<Incoming>) -> Result<(HeaderValue, bool), ProxyError> {
    if let Some(authority) = req.uri().authority() {
        let value = HeaderValue::from_str(authority.as_str()).map_err(|_| not_ascii())?;
        return Ok((value, true));
    }
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let host = hosts.next().ok_or(ProxyError::NoHost)?;
    if hosts.next().is_some() {
        return Err(ProxyError::BadRequest(
            "more than one Host header".to_owned(),
        ));
    }
    Ok((host.clone(), false))
}

/// A host that is not visible ASCII.
pub(super) fn not_ascii() -> ProxyError {
    ProxyError::BadRequest(
        "the Host header is not ASCII: use the punycode (xn--) form of the name".to_owned(),
    )
}

/// The target of a request with these headers and host: the upstream router headers when
/// enabled and present, else the host. Errors name the header or host that is wrong.
pub fn target_of(
    router: &Router,
    headers: &http::HeaderMap,
    host: &str,
) -> Result<RouteTarget, ProxyError> {
    let config = router.config();
    if config.routing.upstream_headers
        && let Some(id) = single(headers, &X_SANDBOX_ID)?
    {
        let text = |name: &http::HeaderName, value: &HeaderValue| {
            value
                .to_str()
                .map(str::trim)
                .map_err(|_| ProxyError::BadRequest(format!("{name} is not text")))
                .map(str::to_owned)
        };
        let name = text(&X_SANDBOX_ID, id)?;
        let namespace = match single(headers, &X_SANDBOX_NAMESPACE)? {
            Some(v) => text(&X_SANDBOX_NAMESPACE, v)?,
            None if !config.routing.default_namespace.is_empty() => {
                config.routing.default_namespace.clone()
            }
            None => {
                return Err(ProxyError::BadRequest(format!(
                    "{X_SANDBOX_ID} without {X_SANDBOX_NAMESPACE} and no default namespace"
                )));
            }
        };
        for (header, value) in [(&X_SANDBOX_ID, &name), (&X_SANDBOX_NAMESPACE, &namespace)] {
            rouse_shared::names::validate_dns1123_label(value)
                .map_err(|err| ProxyError::BadRequest(format!("{header}: {err}")))?;
        }
        let port = match single(headers, &X_SANDBOX_PORT)? {
            Some(v) => Some(
                text(&X_SANDBOX_PORT, v)?
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| {
                        ProxyError::BadRequest(format!(
                            "{X_SANDBOX_PORT} is not a port in 1..=65535"
                        ))
                    })?,
            ),
            None => None,
        };
        return Ok(RouteTarget {
            key: SandboxKey::new(namespace, name),
            port,
        });
    }
    router.resolve_host(host)
}

/// The one value of router header `name`, if any. Two or more are a bad request, never a
/// guess at which one routes (as for `Host`).
fn single<'h>(
    headers: &'h http::HeaderMap,
    name: &http::HeaderName,
) -> Result<Option<&'h HeaderValue>, ProxyError> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(ProxyError::BadRequest(format!(
            "more than one {name} header"
        )));
    }
    Ok(first)
}
