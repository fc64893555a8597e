//! The store the Kubernetes claim controller reconciles through: the API server, with pools
//! and templates read from watch caches.
//!
//! Every claim reconcile reads its pool and the pool's template; over the API server that was
//! two GETs per reconcile, about nine per claim at scale (a claim is reconciled again on each
//! of its own writes), and two round trips on the path of every claim. Pools and templates
//! change rarely, so they come from caches, as upstream's controller reads them: a claim is
//! checked against its template's policies as the controller last saw the template (a change
//! made milliseconds before the claim may not be seen yet). A name the cache does not hold yet
//! (created a moment ago) is read from the API server. Sandboxes and claims, whose versions
//! matter to the writes, are always read from the API server, and so is everything a pool
//! reconcile reads: a pool must not miss a template change that triggered it.

use kube::runtime::reflector::{ObjectRef, Store as Cache};
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::{
    DeleteParams, Deletion, KubeStore, ListParams, ObjectKey, ObjectList, Patch, Result, Store,
    StoreObject, WatchStream,
};

/// [`KubeStore`] with pools and templates read from watch caches; cheap to clone.
#[derive(Clone)]
pub struct CachedStore {
    api: KubeStore,
    pools: Cache<SandboxWarmPool>,
    templates: Cache<SandboxTemplate>,
}

impl CachedStore {
    /// `api`, with pools and templates read from the caches reflectors feed.
    pub fn new(
        api: KubeStore,
        pools: Cache<SandboxWarmPool>,
        templates: Cache<SandboxTemplate>,
    ) -> Self {
        Self {
            api,
            pools,
            templates,
        }
    }
}

/// A kind this store may read from a cache.
pub trait Cached: StoreObject + kube::Resource<DynamicType = ()> + Clone {
    /// The cache of this kind, if it has one.
    fn cache(store: &CachedStore) -> Option<&Cache<Self>>;
}

impl Cached for SandboxWarmPool {
    fn cache(store: &CachedStore) -> Option<&Cache<Self>> {
        Some(&store.pools)
    }
}

impl Cached for SandboxTemplate {
    fn cache(store: &CachedStore) -> Option<&Cache<Self>> {
        Some(&store.templates)
    }
}

impl Cached for Sandbox {
    fn cache(_: &CachedStore) -> Option<&Cache<Self>> {
        None
    }
}

impl Cached for SandboxClaim {
    fn cache(_: &CachedStore) -> Option<&Cache<Self>> {
        None
    }
}

impl<K: Cached> Store<K> for CachedStore
where
    KubeStore: Store<K>,
{
    async fn get(&self, key: &ObjectKey) -> Result<K> {
        let Some(cache) = K::cache(self) else {
            return self.api.get(key).await;
        };
        if let Some(object) = cache.get(&ObjectRef::<K>::new(&key.name).within(&key.namespace)) {
            metrics::counter!("rouse_controller_extension_cached_reads_total", "source" => "cache")
                .increment(1);
            return Ok(K::clone(&object));
        }
        metrics::counter!("rouse_controller_extension_cached_reads_total", "source" => "api")
            .increment(1);
        self.api.get(key).await
    }

    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>> {
        self.api.list(params).await
    }

    async fn create(&self, object: &K) -> Result<K> {
        self.api.create(object).await
    }

    async fn patch(&self, key: &ObjectKey, patch: &Patch) -> Result<K> {
        self.api.patch(key, patch).await
    }

    async fn patch_status(&self, key: &ObjectKey, patch: &Patch) -> Result<K> {
        self.api.patch_status(key, patch).await
    }

    async fn delete(&self, key: &ObjectKey, params: &DeleteParams) -> Result<Deletion<K>> {
        self.api.delete(key, params).await
    }

    async fn watch(&self, params: &ListParams, resource_version: &str) -> Result<WatchStream<K>> {
        self.api.watch(params, resource_version).await
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::{reflector, watcher};
    use rouse_testsupport::kube::FakeApiServer;

    use super::*;

    fn pool(name: &str) -> SandboxWarmPool {
        crate::extensions::fixtures::pool(name, "t", 1)
    }

    #[tokio::test]
    async fn a_cached_pool_is_read_from_the_cache_and_a_new_one_from_the_api_server() {
        let server = FakeApiServer::start().await.expect("fake api server");
        let api = KubeStore::new(server.client().expect("client"));
        let (pools, mut writer) = reflector::store::<SandboxWarmPool>();
        let (templates, _templates) = reflector::store::<SandboxTemplate>();
        // Only in the cache: found without asking the API server, which has no such pool.
        writer.apply_watcher_event(&watcher::Event::Apply(pool("cached")));
        // Only in the API server (created a moment ago): read from there.
        Store::<SandboxWarmPool>::create(&api, &pool("fresh"))
            .await
            .expect("create");
        let store = CachedStore::new(api, pools, templates);
        server.reset_requests();
        let cached: SandboxWarmPool = store
            .get(&ObjectKey::new(crate::extensions::fixtures::NS, "cached"))
            .await
            .expect("cached pool");
        assert_eq!(cached.metadata.name.as_deref(), Some("cached"));
        assert_eq!(server.requests().count("get", "sandboxwarmpools"), 0);
        let fresh: SandboxWarmPool = store
            .get(&ObjectKey::new(crate::extensions::fixtures::NS, "fresh"))
            .await
            .expect("fresh pool");
        assert_eq!(fresh.metadata.name.as_deref(), Some("fresh"));
        assert_eq!(server.requests().count("get", "sandboxwarmpools"), 1);
        let missing: Result<SandboxWarmPool> = store
            .get(&ObjectKey::new(crate::extensions::fixtures::NS, "gone"))
            .await;
        assert!(missing.is_err_and(|e| e.is_not_found()));
    }
}
