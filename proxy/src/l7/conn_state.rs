//! [`ConnState`]: what the requests of one client connection share — its upstream connection,
//! its idle limit, its `X-Forwarded-For` value and the route its last request resolved — so a
//! keep-alive request does not redo work that only changes per connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http::HeaderValue;

use super::headers::{Scheme, forwarded_for_value};
use super::route_cache::RouteCache;
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
    route: Mutex<RouteCache>,
}

impl ConnState {
    /// The state of a new connection from `peer`.
    pub(crate) fn new(peer: SocketAddr, scheme: Scheme, idle: IdleControl) -> Self {
        let forwarded_for = forwarded_for_value(peer.ip());
        Self {
            peer,
            scheme,
            idle,
            sticky: StickyUpstream::default(),
            forwarded_for,
            route: Mutex::new(RouteCache::default()),
        }
    }

    /// The target `host` names under `snapshot` (see [`RouteCache::target`]).
    pub(crate) fn target_by_host(
        &self,
        snapshot: &Snapshot,
        host_text: &str,
    ) -> Result<Arc<RouteTarget>, ProxyError> {
        self.route
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .target(snapshot, host_text)
    }

    /// The routing table's slot of `target` (see [`RouteCache::slot`]).
    pub(crate) fn slot(&self, router: &Router, target: &Arc<RouteTarget>) -> Option<Arc<Slot>> {
        self.route
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .slot(router, target)
    }
}
