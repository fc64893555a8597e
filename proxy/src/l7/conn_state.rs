//! [`ConnState`]: what the requests of one client connection share — its upstream connection,
//! its idle limit, its `X-Forwarded-For` value and the route its last request resolved — so a
//! keep-alive request does not redo work that only changes per connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http::HeaderValue;

use super::headers::Scheme;
use super::sticky::StickyUpstream;
use crate::error::ProxyError;
use crate::limits::IdleControl;
use crate::route::{RouteTarget, Router, Slot, Snapshot};

/// Per client connection state of the L7 path.
pub(crate) struct ConnState {
    /// The client's address.
    pub(crate) peer: SocketAddr,
    /// How the client reached the proxy.
    pub(crate) scheme: Scheme,
    /// The connection's idle limit, switched when the connection is upgraded.
    pub(crate) idle: IdleControl,
    /// The upstream connection its HTTP/1.1 requests reuse.
    pub(crate) sticky: StickyUpstream,
    /// The client's IP address as a header value (`X-Forwarded-For`).
    pub(crate) forwarded_for: HeaderValue,
    /// The route of the last request resolved by its host.
    route: Mutex<Option<CachedRoute>>,
}

/// A host's route, valid while the config generation and the routing table's version stay.
struct CachedRoute {
    host: HeaderValue,
    generation: u64,
    target: Arc<RouteTarget>,
    /// The target's slot, when one was looked up at `table_version`.
    slot: Option<(u64, Arc<Slot>)>,
}

impl ConnState {
    /// The state of a new connection from `peer`.
    pub(crate) fn new(peer: SocketAddr, scheme: Scheme, idle: IdleControl) -> Self {
        // An IP address's text is always a valid header value; the fallback is never taken.
        let forwarded_for = HeaderValue::from_str(&peer.ip().to_string())
            .unwrap_or_else(|_| HeaderValue::from_static("unknown"));
        Self {
            peer,
            scheme,
            idle,
            sticky: StickyUpstream::default(),
            forwarded_for,
            route: Mutex::new(None),
        }
    }

    /// The target `host` names under `snapshot`: the last request's when it named the same
    /// host under the same config, else resolved anew (and kept for the next request).
    pub(crate) fn target_by_host(
        &self,
        snapshot: &Snapshot,
        host: &HeaderValue,
        host_text: &str,
    ) -> Result<Arc<RouteTarget>, ProxyError> {
        let mut cached = self.route.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(route) = &*cached
            && route.generation == snapshot.generation
            && route.host == host
        {
            return Ok(Arc::clone(&route.target));
        }
        let target = Arc::new(Router::resolve_host_in(snapshot, host_text)?);
        *cached = Some(CachedRoute {
            host: host.clone(),
            generation: snapshot.generation,
            target: Arc::clone(&target),
            slot: None,
        });
        Ok(target)
    }

    /// The routing table's slot of `target`: the cached one while the table's slots stay the
    /// same, else looked up (and kept when `target` is the cached route's).
    pub(crate) fn slot(&self, router: &Router, target: &Arc<RouteTarget>) -> Option<Arc<Slot>> {
        // Read before the lookup: a slot replaced after this read changes the version again.
        let version = router.table_version();
        let mut cached = self.route.lock().unwrap_or_else(|e| e.into_inner());
        let route = cached
            .as_mut()
            .filter(|route| Arc::ptr_eq(&route.target, target));
        let Some(route) = route else {
            drop(cached);
            return router.slot(&target.key);
        };
        if let Some((at, slot)) = &route.slot
            && *at == version
        {
            return Some(Arc::clone(slot));
        }
        let slot = router.slot(&target.key)?;
        route.slot = Some((version, Arc::clone(&slot)));
        Some(slot)
    }
}
