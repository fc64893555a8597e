//! [`MemStore`]: an in-memory `Store<Sandbox>` double with resource versions, merge patches and
//! a watch that the test can break with `Expired`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use futures::stream;
use rouse_shared::api::Sandbox;
use rouse_shared::store::{
    DeleteParams, Deletion, ListParams, ObjectKey, ObjectList, Patch, Result, Store, StoreError,
    WatchEvent, WatchStream,
};
use tokio::sync::mpsc;

#[derive(Default)]
struct State {
    objects: BTreeMap<ObjectKey, Sandbox>,
    version: u64,
    watchers: Vec<mpsc::Sender<Result<WatchEvent<Sandbox>>>>,
}

/// The store double; clones share state.
#[derive(Clone, Default)]
pub struct MemStore {
    state: Arc<Mutex<State>>,
}

impl MemStore {
    /// Stores an object (created or replaced) and tells watchers.
    pub fn put(&self, mut sandbox: Sandbox) {
        let mut state = self.state.lock().expect("store lock");
        state.version += 1;
        sandbox.metadata.resource_version = Some(state.version.to_string());
        sandbox
            .metadata
            .namespace
            .get_or_insert_with(|| "default".to_owned());
        let key = ObjectKey::of(&sandbox);
        let existed = state.objects.insert(key, sandbox.clone()).is_some();
        let event = if existed {
            WatchEvent::Modified(sandbox)
        } else {
            WatchEvent::Added(sandbox)
        };
        state
            .watchers
            .retain(|w| w.try_send(Ok(event.clone())).is_ok());
    }

    /// Reads an object.
    pub fn object(&self, key: &ObjectKey) -> Option<Sandbox> {
        self.state
            .lock()
            .expect("store lock")
            .objects
            .get(key)
            .cloned()
    }

    /// Removes an object without telling watchers, then breaks every watch with `Expired`:
    /// only a relist can notice the removal.
    pub fn remove_unseen_and_expire(&self, key: &ObjectKey) {
        let mut state = self.state.lock().expect("store lock");
        state.objects.remove(key);
        state.version += 1;
        let expired = || StoreError::Expired {
            resource_version: "0".to_owned(),
        };
        for watcher in state.watchers.drain(..) {
            let _ = watcher.try_send(Err(expired()));
        }
    }

    fn patch_json(&self, key: &ObjectKey, patch: &Patch, field: &str) -> Result<Sandbox> {
        let Patch::Merge(map) = patch;
        let current = self.object(key).ok_or_else(|| StoreError::NotFound {
            kind: "Sandbox".to_owned(),
            key: key.clone(),
        })?;
        let mut doc = serde_json::to_value(&current).expect("sandbox to json");
        let part = map.get(field).cloned().unwrap_or_default();
        let target = doc
            .as_object_mut()
            .expect("object")
            .entry(field.to_owned())
            .or_insert_with(|| serde_json::json!({}));
        json_patch::merge(target, &part);
        let patched: Sandbox = serde_json::from_value(doc).map_err(|err| StoreError::Invalid {
            kind: "Sandbox".to_owned(),
            key: key.clone(),
            message: err.to_string(),
        })?;
        self.put(patched.clone());
        Ok(patched)
    }
}

impl Store<Sandbox> for MemStore {
    async fn get(&self, key: &ObjectKey) -> Result<Sandbox> {
        self.object(key).ok_or_else(|| StoreError::NotFound {
            kind: "Sandbox".to_owned(),
            key: key.clone(),
        })
    }

    async fn list(&self, _params: &ListParams) -> Result<ObjectList<Sandbox>> {
        let state = self.state.lock().expect("store lock");
        Ok(ObjectList {
            items: state.objects.values().cloned().collect(),
            resource_version: state.version.to_string(),
        })
    }

    async fn create(&self, object: &Sandbox) -> Result<Sandbox> {
        self.put(object.clone());
        self.get(&ObjectKey::of(object)).await
    }

    async fn patch(&self, key: &ObjectKey, patch: &Patch) -> Result<Sandbox> {
        self.patch_json(key, patch, "spec")
    }

    async fn patch_status(&self, key: &ObjectKey, patch: &Patch) -> Result<Sandbox> {
        self.patch_json(key, patch, "status")
    }

    async fn delete(&self, key: &ObjectKey, _params: &DeleteParams) -> Result<Deletion<Sandbox>> {
        let mut state = self.state.lock().expect("store lock");
        let gone = state
            .objects
            .remove(key)
            .ok_or_else(|| StoreError::NotFound {
                kind: "Sandbox".to_owned(),
                key: key.clone(),
            })?;
        state
            .watchers
            .retain(|w| w.try_send(Ok(WatchEvent::Deleted(gone.clone()))).is_ok());
        Ok(Deletion::Deleted(gone))
    }

    async fn watch(
        &self,
        _params: &ListParams,
        _resource_version: &str,
    ) -> Result<WatchStream<Sandbox>> {
        let (tx, rx) = mpsc::channel(256);
        self.state.lock().expect("store lock").watchers.push(tx);
        Ok(stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) }).boxed())
    }
}
