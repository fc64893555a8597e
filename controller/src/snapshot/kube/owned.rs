//! Reading and creating the objects a snapshot owns (`VolumeSnapshot`s, the pod snapshot
//! trigger), for both providers.
//!
//! Reads go to the cache of the snapshot controller's watch of them (the watch that also
//! triggers the snapshot's reconciles), so a snapshot waiting for its objects costs no API
//! call per reconcile. A miss asks the API server: the cache may not hold yet an object this
//! controller just created (and a create from a stale "missing" would fail a snapshot whose
//! sandbox was suspended meanwhile), and an object of that name that is not the snapshot's
//! own is not labelled, so never cached.

use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use rouse_shared::api::SandboxSnapshot;
use rouse_shared::store::ObjectKey;

use super::context::{Context, SnapshotError};

/// The object of `resource` named `name` in the snapshot's namespace, if it exists.
pub(super) async fn read_owned(
    ctx: &Context,
    snapshot: &SandboxSnapshot,
    resource: &ApiResource,
    name: &str,
) -> Result<Option<Arc<DynamicObject>>, SnapshotError> {
    let namespace = ObjectKey::of(snapshot).namespace;
    let key = ObjectRef::new_with(name, resource.clone()).within(&namespace);
    if let Some(object) = ctx.owned.as_ref().and_then(|cache| cache.get(&key)) {
        return Ok(Some(object));
    }
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &namespace, resource);
    api.get_opt(name)
        .await
        .map(|found| found.map(Arc::new))
        .map_err(|source| SnapshotError::Api {
            what: format!("read {} {name}", resource.kind),
            source,
        })
}

/// What creating an owned object came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Created {
    /// Created now, or by an earlier reconcile (the next one reads it).
    Exists,
    /// The cluster does not serve its kind.
    NotServed,
}

/// Creates `object` (of `resource`), counting it in `metric` when it is new.
pub(super) async fn create_owned(
    ctx: &Context,
    resource: &ApiResource,
    object: &DynamicObject,
    metric: &'static str,
) -> Result<Created, SnapshotError> {
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &namespace, resource);
    match api.create(&PostParams::default(), object).await {
        Ok(_) => {
            metrics::counter!(metric).increment(1);
            Ok(Created::Exists)
        }
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(Created::Exists),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Created::NotServed),
        Err(source) => Err(SnapshotError::Api {
            what: format!("create {} {}", resource.kind, object.name_any()),
            source,
        }),
    }
}

/// The `Failed` message of a snapshot whose provider's kind `resource` the cluster does not
/// serve; `remedy` says what to install or enable.
pub(super) fn not_served(resource: &ApiResource, remedy: &str) -> String {
    format!(
        "this cluster does not serve {}/{} {}: {remedy}, or choose another snapshot provider",
        resource.group, resource.version, resource.kind
    )
}
