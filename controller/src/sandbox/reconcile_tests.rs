//! Tests of the reconcile driver with an in-memory store and a scripted platform.

use std::sync::Mutex;

use futures::StreamExt;
use kube::ResourceExt;
use rouse_shared::api::{Sandbox, ShutdownPolicy};
use rouse_shared::store::{
    DeleteParams, Deletion, ListParams, ObjectKey, ObjectList, Patch, Result as StoreResult, Store,
    StoreError, WatchStream,
};
use serde_json::{Map, Value};

use super::fixtures::{SandboxBuilder, at, now};
use super::*;
use crate::platform::{Platform, PlatformError, Result as PlatformResult};

/// One sandbox in memory; records every write.
struct MemStore {
    object: Mutex<Option<Sandbox>>,
    writes: Mutex<Vec<(&'static str, Value)>>,
}

impl MemStore {
    fn new(sandbox: &Sandbox) -> Self {
        Self {
            object: Mutex::new(Some(sandbox.clone())),
            writes: Mutex::new(Vec::new()),
        }
    }

    fn writes(&self) -> Vec<(&'static str, Value)> {
        self.writes.lock().expect("lock").clone()
    }

    fn current(&self) -> Option<Sandbox> {
        self.object.lock().expect("lock").clone()
    }

    fn apply(&self, kind: &'static str, patch: &Patch, part: &str) -> StoreResult<Sandbox> {
        let Patch::Merge(map) = patch;
        self.writes
            .lock()
            .expect("lock")
            .push((kind, Value::Object(map.clone())));
        let mut guard = self.object.lock().expect("lock");
        let current = guard.as_mut().ok_or_else(not_found)?;
        if let Some(rv) = patch.resource_version()
            && current.resource_version().as_deref() != Some(rv)
        {
            return Err(StoreError::Conflict {
                kind: "Sandbox".into(),
                key: ObjectKey::of(current),
                message: "stale".into(),
            });
        }
        let mut value = serde_json::to_value(&*current).expect("serialize");
        if let Some(section) = map.get(part) {
            merge(&mut value[part], section);
        }
        *current = serde_json::from_value(value).expect("deserialize");
        Ok(current.clone())
    }
}

fn not_found() -> StoreError {
    StoreError::NotFound {
        kind: "Sandbox".into(),
        key: ObjectKey::new("team-a", "alice"),
    }
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

impl Store<Sandbox> for MemStore {
    async fn get(&self, _key: &ObjectKey) -> StoreResult<Sandbox> {
        self.current().ok_or_else(not_found)
    }
    async fn list(&self, _params: &ListParams) -> StoreResult<ObjectList<Sandbox>> {
        Ok(ObjectList {
            items: self.current().into_iter().collect(),
            resource_version: "1".into(),
        })
    }
    async fn create(&self, object: &Sandbox) -> StoreResult<Sandbox> {
        Ok(object.clone())
    }
    async fn patch(&self, _key: &ObjectKey, patch: &Patch) -> StoreResult<Sandbox> {
        self.apply("patch", patch, "spec")
    }
    async fn patch_status(&self, _key: &ObjectKey, patch: &Patch) -> StoreResult<Sandbox> {
        self.apply("patch_status", patch, "status")
    }
    async fn delete(
        &self,
        _key: &ObjectKey,
        params: &DeleteParams,
    ) -> StoreResult<Deletion<Sandbox>> {
        let mut map = Map::new();
        map.insert(
            "uid".into(),
            params.uid.clone().map_or(Value::Null, Value::String),
        );
        self.writes
            .lock()
            .expect("lock")
            .push(("delete", Value::Object(map)));
        let gone = self
            .object
            .lock()
            .expect("lock")
            .take()
            .ok_or_else(not_found)?;
        Ok(Deletion::Deleted(gone))
    }
    async fn watch(&self, _params: &ListParams, _rv: &str) -> StoreResult<WatchStream<Sandbox>> {
        Ok(futures::stream::empty().boxed())
    }
}

/// Reports a fixed observation; fails actions with the given label.
struct Scripted {
    observed: Observed,
    fail: Option<&'static str>,
    applied: Mutex<Vec<String>>,
}

impl Scripted {
    fn new(observed: Observed) -> Self {
        Self {
            observed,
            fail: None,
            applied: Mutex::new(Vec::new()),
        }
    }
}

impl Platform for Scripted {
    async fn observe(&self, _sandbox: &Sandbox) -> PlatformResult<Observed> {
        Ok(self.observed.clone())
    }
    async fn apply(&self, _sandbox: &Sandbox, action: &Action) -> PlatformResult<()> {
        if self.fail == Some(action.metric_label()) {
            return Err(PlatformError::Invalid {
                what: action.metric_label().into(),
                message: "quota exceeded".into(),
            });
        }
        self.applied
            .lock()
            .expect("lock")
            .push(action.metric_label().to_owned());
        Ok(())
    }
}

fn ready_reason(store: &MemStore) -> String {
    let sandbox = store.current().expect("sandbox");
    let status = sandbox.status.expect("status");
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    format!("{}/{}", ready.status, ready.reason)
}

#[tokio::test]
async fn writes_status_once_then_nothing_when_converged() {
    let sandbox = Sandbox::test("alice");
    let store = MemStore::new(&sandbox);
    let platform = Scripted::new(Observed::nothing().workload(Workload::ready("alice")));
    let outcome = reconcile_sandbox(&store, &platform, &sandbox, now())
        .await
        .expect("reconcile");
    assert_eq!(store.writes().len(), 1);
    assert_eq!(ready_reason(&store), "True/DependenciesReady");
    let types: Vec<_> = outcome
        .transitions
        .iter()
        .map(|t| t.type_.as_str())
        .collect();
    assert_eq!(types, ["Ready", "Suspended", "PodScheduled"]);

    let stored = store.current().expect("sandbox");
    let again = reconcile_sandbox(&store, &platform, &stored, at(10))
        .await
        .expect("reconcile");
    assert_eq!(store.writes().len(), 1, "no write when nothing changed");
    assert!(again.transitions.is_empty());
}

#[tokio::test]
async fn status_patch_touches_only_changed_fields_and_clears_removed_ones() {
    let sandbox = Sandbox::test("alice");
    let store = MemStore::new(&sandbox);
    let running = Scripted::new(Observed::nothing().workload(Workload::ready("alice")));
    reconcile_sandbox(&store, &running, &sandbox, now())
        .await
        .expect("reconcile");
    let stored = store
        .current()
        .expect("sandbox")
        .last_activity(at(-5))
        .suspended();
    let gone = Scripted::new(Observed::nothing());
    reconcile_sandbox(&store, &gone, &stored, now())
        .await
        .expect("reconcile");
    let (kind, patch) = store.writes().pop().expect("a write");
    assert_eq!(kind, "patch_status");
    let status = &patch["status"];
    assert_eq!(status["podIPs"], Value::Null);
    assert_eq!(status["nodeName"], Value::Null);
    assert_eq!(status["endpoint"], Value::Null);
    assert!(
        status.get("lastActivityTime").is_none(),
        "never rewrites activity: {status}"
    );
    assert!(
        status.get("selector").is_none(),
        "unchanged fields stay out: {status}"
    );
}

#[tokio::test]
async fn a_failed_action_is_reported_in_ready() {
    let sandbox = Sandbox::test("alice");
    let store = MemStore::new(&sandbox);
    let mut platform = Scripted::new(Observed::nothing());
    platform.fail = Some("create_workload");
    let err = reconcile_sandbox(&store, &platform, &sandbox, now())
        .await
        .expect_err("the create fails");
    assert_eq!(err.metric_label(), "apply");
    assert_eq!(ready_reason(&store), "False/ReconcilerError");
    let message = store
        .current()
        .and_then(|s| s.status)
        .map(|s| s.conditions[0].message.clone());
    assert!(message.is_some_and(|m| m.contains("quota exceeded")));
}

#[tokio::test]
async fn idle_suspend_patches_the_spec_conditionally() {
    let sandbox = Sandbox::test("alice")
        .idle_after(60)
        .condition("Suspended", "False", "NotSuspended", at(-600))
        .last_activity(at(-120));
    let store = MemStore::new(&sandbox);
    let platform = Scripted::new(Observed::nothing().workload(Workload::ready("alice")));
    reconcile_sandbox(&store, &platform, &sandbox, now())
        .await
        .expect("reconcile");
    let writes = store.writes();
    assert_eq!(writes[0].0, "patch");
    assert_eq!(writes[0].1["spec"]["operatingMode"], "Suspended");
    assert_eq!(writes[0].1["metadata"]["resourceVersion"], "7");
    assert_eq!(*platform.applied.lock().expect("lock"), ["delete_workload"]);
    assert_eq!(ready_reason(&store), "False/SandboxSuspended");

    // A wake that landed first (another resourceVersion) wins: the suspend conflicts.
    let mut stale = sandbox.clone();
    stale.metadata.resource_version = Some("6".into());
    let store = MemStore::new(&sandbox);
    let err = reconcile_sandbox(&store, &platform, &stale, now())
        .await
        .expect_err("conflict");
    assert_eq!(err.metric_label(), "suspend");
}

#[tokio::test]
async fn delete_policy_deletes_the_object_by_uid() {
    let sandbox = Sandbox::test("alice").shutdown_at(at(-1), Some(ShutdownPolicy::Delete));
    let store = MemStore::new(&sandbox);
    let platform = Scripted::new(Observed::nothing().workload(Workload::ready("alice")));
    let outcome = reconcile_sandbox(&store, &platform, &sandbox, now())
        .await
        .expect("reconcile");
    assert!(outcome.deleted);
    assert_eq!(
        store.writes(),
        [("delete", serde_json::json!({"uid": "uid-alice"}))]
    );
    assert!(store.current().is_none());
}
