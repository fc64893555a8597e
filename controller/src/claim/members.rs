//! The warm pool members a claim may adopt, read from a watch-fed cache (Kubernetes mode) or
//! listed from the store.
//!
//! Listing a pool's members from the API server on every claim reconcile is what made a burst
//! of claims slow on a real API server: each list costs the server a consistent read of every
//! member, and the lists of concurrent claims went stale while they were in flight. The cache
//! costs nothing to read; its lag is covered twice: a member version this process has seen
//! taken is skipped (`Reservations::free`), and when the cache offers no Ready member the
//! claim lists from the API server before it starts cold, so a lagging watch never turns a
//! warm claim cold.

use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::Store as Cache;
use kube::runtime::watcher;
use rouse_shared::api::Sandbox;
use rouse_shared::api::keys::WARM_POOL_SANDBOX;
use rouse_shared::names::sandbox_name_hash;

/// How long a claim waits for the member cache's first list before listing itself.
const FIRST_SYNC_WAIT: Duration = Duration::from_secs(2);

/// A watch-fed copy of every warm pool member; cheap to clone.
#[derive(Clone)]
pub struct MemberCache {
    reader: Cache<Sandbox>,
}

impl std::fmt::Debug for MemberCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberCache")
            .field("members", &self.reader.len())
            .finish()
    }
}

impl MemberCache {
    /// A cache read from `reader`, which a reflector over [`MemberCache::watch_config`] feeds.
    pub fn new(reader: Cache<Sandbox>) -> Self {
        Self { reader }
    }

    /// The watch that feeds the cache: warm pool members only (the label a member loses when
    /// a claim adopts it), so the cache holds no more than the pools' replicas.
    pub fn watch_config() -> watcher::Config {
        watcher::Config::default().labels(WARM_POOL_SANDBOX)
    }

    /// The members of `pool` in `namespace`, or `None` while the cache has not synced.
    pub(super) async fn members(&self, namespace: &str, pool: &str) -> Option<Vec<Sandbox>> {
        tokio::time::timeout(FIRST_SYNC_WAIT, self.reader.wait_until_ready())
            .await
            .ok()?
            .ok()?;
        let hash = sandbox_name_hash(pool);
        Some(
            self.reader
                .state()
                .iter()
                .filter(|m| m.namespace().as_deref() == Some(namespace))
                .filter(|m| m.labels().get(WARM_POOL_SANDBOX) == Some(&hash))
                .map(|m| Sandbox::clone(m))
                .collect(),
        )
    }
}
