//! The `Store` port: get, list, create, patch, patch-status, delete and watch of the Rouse
//! objects with Kubernetes semantics (resourceVersion, optimistic concurrency, watch events,
//! label selectors).
//!
//! The controller and the proxy are written against this trait only; the Kubernetes
//! implementation (kube-rs `Api` and `watcher`) and the embedded one (redb with an in-process
//! watch) live behind it, so both modes run the same reconcile and routing code.

mod error;
mod follow;
mod kube;
mod types;

use std::fmt::Debug;
use std::future::Future;

use ::kube::core::NamespaceResourceScope;
use futures::stream::BoxStream;
use serde::Serialize;
use serde::de::DeserializeOwned;

pub use self::kube::KubeStore;
pub use error::{Result, StoreError};
pub use follow::{Backoff, Seen, list_watch};
pub use types::{
    DeleteParams, Deletion, ListParams, ObjectKey, ObjectList, Patch, Propagation, WatchEvent,
};

/// An object a store can hold: any namespaced Rouse kind.
pub trait StoreObject:
    ::kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> StoreObject for K where
    K: ::kube::Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// A stream of watch events; it ends when the store closes it, and yields
/// [`StoreError::Expired`] when the caller must list again.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>>>;

/// Storage of objects of kind `K` with Kubernetes API semantics.
///
/// Every write returns the object as stored, with its new `metadata.resourceVersion`. Writes
/// that carry a resourceVersion (a created object never does; a merge patch may, see
/// [`Patch::with_resource_version`]) fail with [`StoreError::Conflict`] when it is stale.
pub trait Store<K: StoreObject>: Send + Sync {
    /// Reads one object.
    fn get(&self, key: &ObjectKey) -> impl Future<Output = Result<K>> + Send;

    /// Lists objects, in one namespace or all, filtered by label selector; the list's
    /// resourceVersion is where a following [`Store::watch`] starts.
    fn list(&self, params: &ListParams) -> impl Future<Output = Result<ObjectList<K>>> + Send;

    /// Creates an object; its name must be set, or `generateName` to let the store pick one.
    fn create(&self, object: &K) -> impl Future<Output = Result<K>> + Send;

    /// Patches the object's metadata and spec; `status` in the patch is ignored.
    fn patch(&self, key: &ObjectKey, patch: &Patch) -> impl Future<Output = Result<K>> + Send;

    /// Patches the object's status only (the status subresource).
    fn patch_status(
        &self,
        key: &ObjectKey,
        patch: &Patch,
    ) -> impl Future<Output = Result<K>> + Send;

    /// Deletes an object; with finalizers present it is only marked for deletion.
    fn delete(
        &self,
        key: &ObjectKey,
        params: &DeleteParams,
    ) -> impl Future<Output = Result<Deletion<K>>> + Send;

    /// Watches changes after `resource_version` (from a list or a previous event).
    fn watch(
        &self,
        params: &ListParams,
        resource_version: &str,
    ) -> impl Future<Output = Result<WatchStream<K>>> + Send;
}

#[cfg(test)]
mod tests;
