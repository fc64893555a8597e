//! A minimal `Store<Sandbox>` on a kube `Api`, for scenarios until the shared kube store is
//! merged: only the calls the reconcile driver makes are implemented in full.

use futures::StreamExt;
use kube::api::{DeleteParams as KubeDeleteParams, Patch as KubePatch, PatchParams, PostParams};
use kube::{Api, Client};
use rouse_shared::api::Sandbox;
use rouse_shared::store::{
    DeleteParams, Deletion, ListParams, ObjectKey, ObjectList, Patch, Result, Store, StoreError,
    WatchStream,
};

#[derive(Clone)]
pub struct ApiStore {
    client: Client,
}

impl ApiStore {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn api(&self, namespace: &str) -> Api<Sandbox> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn error(key: &ObjectKey, e: kube::Error) -> StoreError {
    match e {
        kube::Error::Api(s) if s.is_not_found() => StoreError::NotFound {
            kind: "Sandbox".into(),
            key: key.clone(),
        },
        kube::Error::Api(s) if s.is_conflict() => StoreError::Conflict {
            kind: "Sandbox".into(),
            key: key.clone(),
            message: s.message.clone(),
        },
        e => StoreError::Unavailable {
            message: e.to_string(),
            source: None,
        },
    }
}

impl Store<Sandbox> for ApiStore {
    async fn get(&self, key: &ObjectKey) -> Result<Sandbox> {
        self.api(&key.namespace)
            .get(&key.name)
            .await
            .map_err(|e| error(key, e))
    }
    async fn list(&self, params: &ListParams) -> Result<ObjectList<Sandbox>> {
        let ns = params.namespace.clone().unwrap_or_default();
        let list = self
            .api(&ns)
            .list(&Default::default())
            .await
            .map_err(|e| error(&ObjectKey::new(ns, ""), e))?;
        Ok(ObjectList {
            resource_version: list.metadata.resource_version.unwrap_or_default(),
            items: list.items,
        })
    }
    async fn create(&self, object: &Sandbox) -> Result<Sandbox> {
        let key = ObjectKey::of(object);
        self.api(&key.namespace)
            .create(&PostParams::default(), object)
            .await
            .map_err(|e| error(&key, e))
    }
    async fn patch(&self, key: &ObjectKey, patch: &Patch) -> Result<Sandbox> {
        let Patch::Merge(map) = patch;
        self.api(&key.namespace)
            .patch(&key.name, &PatchParams::default(), &KubePatch::Merge(map))
            .await
            .map_err(|e| error(key, e))
    }
    async fn patch_status(&self, key: &ObjectKey, patch: &Patch) -> Result<Sandbox> {
        let Patch::Merge(map) = patch;
        self.api(&key.namespace)
            .patch_status(&key.name, &PatchParams::default(), &KubePatch::Merge(map))
            .await
            .map_err(|e| error(key, e))
    }
    async fn delete(&self, key: &ObjectKey, params: &DeleteParams) -> Result<Deletion<Sandbox>> {
        let mut dp = KubeDeleteParams::default();
        if let Some(uid) = &params.uid {
            dp = dp.preconditions(kube::api::Preconditions {
                uid: Some(uid.clone()),
                resource_version: params.resource_version.clone(),
            });
        }
        match self.api(&key.namespace).delete(&key.name, &dp).await {
            Ok(outcome) => Ok(match outcome.left() {
                Some(s) => Deletion::Pending(s),
                None => Deletion::Deleted(Sandbox::new(&key.name, Default::default())),
            }),
            Err(e) => Err(error(key, e)),
        }
    }
    async fn watch(&self, _params: &ListParams, _rv: &str) -> Result<WatchStream<Sandbox>> {
        Ok(futures::stream::empty().boxed())
    }
}
