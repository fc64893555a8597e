//! [`RouteCache`]: the route of a client connection's last request by host, and its routing
//! table slot, so a keep-alive request to the same host does not resolve it again.

use std::sync::Arc;

use crate::error::ProxyError;
use crate::route::{RouteTarget, Router, Slot, Snapshot};

/// The last route of one client connection.
#[derive(Default)]
pub(crate) struct RouteCache {
    cached: Option<CachedRoute>,
}

/// A host's route, valid while the config generation and the routing table's version stay.
struct CachedRoute {
    host: Box<[u8]>,
    generation: u64,
    target: Arc<RouteTarget>,
    /// The target's slot, when one was looked up at `table_version`.
    slot: Option<(u64, Arc<Slot>)>,
}

impl RouteCache {
    /// The target `host` names under `snapshot`: the last request's when it named the same
    /// host under the same config, else resolved anew (and kept for the next request).
    pub(crate) fn target(
        &mut self,
        snapshot: &Snapshot,
        host: &str,
    ) -> Result<Arc<RouteTarget>, ProxyError> {
        if let Some(route) = &self.cached
            && route.generation == snapshot.generation
            && *route.host == *host.as_bytes()
        {
            return Ok(Arc::clone(&route.target));
        }
        let target = Arc::new(Router::resolve_host_in(snapshot, host)?);
        self.cached = Some(CachedRoute {
            host: host.as_bytes().into(),
            generation: snapshot.generation,
            target: Arc::clone(&target),
            slot: None,
        });
        Ok(target)
    }

    /// The routing table's slot of `target`: the cached one while the table's slots stay the
    /// same, else looked up (and kept when `target` is the cached route's).
    pub(crate) fn slot(&mut self, router: &Router, target: &Arc<RouteTarget>) -> Option<Arc<Slot>> {
        // Read before the lookup: a slot replaced after this read changes the version again.
        let version = router.table_version();
        let Some(route) = self
            .cached
            .as_mut()
            .filter(|route| Arc::ptr_eq(&route.target, target))
        else {
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
