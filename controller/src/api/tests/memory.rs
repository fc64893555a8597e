//! An in-memory `Store` for tests of the REST API and the CLI: Kubernetes semantics
//! (resourceVersion, conflicts, generateName, status subresource, finalizers, watch from a
//! version with `Expired` below a compaction floor) kept as JSON values under one lock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::core::SelectorExt;
use rouse_shared::store::{
    DeleteParams, Deletion, ListParams, ObjectKey, ObjectList, Patch, Result, Store, StoreError,
    StoreObject, WatchEvent, WatchStream,
};
use serde_json::{Value, json};
use tokio::sync::broadcast;

// The parent module provides the merge-patch function (the API crate's own, or its import).
use super::merge_patch;

/// A store for tests, holding every kind.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
    events: broadcast::Sender<Change>,
}

struct Inner {
    version: u64,
    floor: u64,
    next_name: u64,
    objects: BTreeMap<(String, String, String), Value>,
    history: Vec<Change>,
}

#[derive(Clone, Debug)]
struct Change {
    version: u64,
    kind: String,
    event: &'static str,
    object: Value,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                version: 1,
                floor: 0,
                next_name: 0,
                objects: BTreeMap::new(),
                history: Vec::new(),
            })),
            events: broadcast::channel(1024).0,
        }
    }
}

impl MemoryStore {
    /// Forgets the history up to now: watches from older versions get `Expired`.
    pub fn compact(&self) {
        let mut inner = self.inner.lock().expect("store lock");
        inner.floor = inner.version;
        inner.history.clear();
    }

    fn kind<K: StoreObject>() -> String {
        K::kind(&()).into_owned()
    }

    fn commit(&self, inner: &mut Inner, kind: &str, event: &'static str, object: &mut Value) {
        inner.version += 1;
        object["metadata"]["resourceVersion"] = json!(inner.version.to_string());
        let change = Change {
            version: inner.version,
            kind: kind.to_owned(),
            event,
            object: object.clone(),
        };
        inner.history.push(change.clone());
        // No receiver is fine: nobody watches.
        let _ = self.events.send(change);
    }
}

fn key_of(object: &Value) -> (String, String) {
    let text = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    (text("/metadata/namespace"), text("/metadata/name"))
}

fn selected(params: &ListParams, object: &Value) -> bool {
    let (ns, _) = key_of(object);
    let labels: BTreeMap<String, String> = object
        .pointer("/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    params.namespace.as_deref().is_none_or(|n| n == ns) && params.selector.matches(&labels)
}

fn decode<K: StoreObject>(value: &Value) -> Result<K> {
    serde_json::from_value(value.clone()).map_err(|e| StoreError::Unavailable {
        message: format!("stored object does not decode: {e}"),
        source: None,
    })
}

fn not_found<K: StoreObject>(key: &ObjectKey) -> StoreError {
    StoreError::NotFound {
        kind: MemoryStore::kind::<K>(),
        key: key.clone(),
    }
}

/// Seconds since the epoch as an RFC 3339 UTC time.
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

impl<K: StoreObject> Store<K> for MemoryStore {
    async fn get(&self, key: &ObjectKey) -> Result<K> {
        let inner = self.inner.lock().expect("store lock");
        let id = (Self::kind::<K>(), key.namespace.clone(), key.name.clone());
        inner
            .objects
            .get(&id)
            .map(decode)
            .unwrap_or_else(|| Err(not_found::<K>(key)))
    }

    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>> {
        let inner = self.inner.lock().expect("store lock");
        let kind = Self::kind::<K>();
        let items = inner
            .objects
            .iter()
            .filter(|((k, _, _), v)| *k == kind && selected(params, v))
            .map(|(_, v)| decode(v))
            .collect::<Result<Vec<K>>>()?;
        Ok(ObjectList {
            items,
            resource_version: inner.version.to_string(),
        })
    }

    async fn create(&self, object: &K) -> Result<K> {
        let mut value = serde_json::to_value(object).expect("object serializes");
        let mut inner = self.inner.lock().expect("store lock");
        let kind = Self::kind::<K>();
        let (mut ns, mut name) = key_of(&value);
        if ns.is_empty() {
            ns = "default".to_owned();
        }
        if name.is_empty() {
            let prefix = value
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            inner.next_name += 1;
            name = format!("{prefix}{:05x}", inner.next_name);
        }
        let id = (kind.clone(), ns.clone(), name.clone());
        if inner.objects.contains_key(&id) {
            return Err(StoreError::AlreadyExists {
                kind,
                key: ObjectKey::new(ns, name),
            });
        }
        let serial = inner.version;
        let meta = &mut value["metadata"];
        meta["namespace"] = json!(ns);
        meta["name"] = json!(name);
        meta["uid"] = json!(format!("00000000-0000-4000-8000-{serial:012x}"));
        meta["creationTimestamp"] = json!(now_rfc3339());
        meta["generation"] = json!(1);
        self.commit(&mut inner, &kind, "ADDED", &mut value);
        inner.objects.insert(id, value.clone());
        decode(&value)
    }

    async fn patch(&self, key: &ObjectKey, patch: &Patch) -> Result<K> {
        self.apply::<K>(key, patch, false)
    }

    async fn patch_status(&self, key: &ObjectKey, patch: &Patch) -> Result<K> {
        self.apply::<K>(key, patch, true)
    }

    async fn delete(&self, key: &ObjectKey, params: &DeleteParams) -> Result<Deletion<K>> {
        let mut inner = self.inner.lock().expect("store lock");
        let kind = Self::kind::<K>();
        let id = (kind.clone(), key.namespace.clone(), key.name.clone());
        let Some(mut value) = inner.objects.get(&id).cloned() else {
            return Err(not_found::<K>(key));
        };
        if let Some(rv) = &params.resource_version
            && value
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                != Some(rv)
        {
            return Err(StoreError::Conflict {
                kind,
                key: key.clone(),
                message: "resourceVersion differs".into(),
            });
        }
        let finalizers = value
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        if finalizers {
            value["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            self.commit(&mut inner, &kind, "MODIFIED", &mut value);
            inner.objects.insert(id, value.clone());
            return Ok(Deletion::Pending(decode(&value)?));
        }
        inner.objects.remove(&id);
        self.commit(&mut inner, &kind, "DELETED", &mut value);
        Ok(Deletion::Deleted(decode(&value)?))
    }

    async fn watch(&self, params: &ListParams, resource_version: &str) -> Result<WatchStream<K>> {
        let kind = Self::kind::<K>();
        let (backlog, mut receiver) = {
            let inner = self.inner.lock().expect("store lock");
            let from: u64 = resource_version.parse().map_err(|_| StoreError::Expired {
                resource_version: resource_version.to_owned(),
            })?;
            if from < inner.floor {
                return Err(StoreError::Expired {
                    resource_version: resource_version.to_owned(),
                });
            }
            let backlog: Vec<Change> = inner
                .history
                .iter()
                .filter(|c| c.version > from)
                .cloned()
                .collect();
            (backlog, (self.events.subscribe(), from))
        };
        let last = backlog.last().map_or(receiver.1, |c| c.version);
        receiver.1 = last;
        let params = params.clone();
        let live = futures::stream::unfold(receiver, |(mut rx, last)| async move {
            loop {
                match rx.recv().await {
                    Ok(change) if change.version > last => {
                        let version = change.version;
                        return Some((Ok(change), (rx, version)));
                    }
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let expired = StoreError::Expired {
                            resource_version: last.to_string(),
                        };
                        return Some((Err(expired), (rx, last)));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        });
        let stream = futures::stream::iter(backlog.into_iter().map(Ok))
            .chain(live)
            .filter_map(move |change| {
                let out = match change {
                    Err(e) => Some(Err(e)),
                    Ok(c) if c.kind == kind && selected(&params, &c.object) => {
                        Some(decode::<K>(&c.object).map(|o| match c.event {
                            "ADDED" => WatchEvent::Added(o),
                            "DELETED" => WatchEvent::Deleted(o),
                            _ => WatchEvent::Modified(o),
                        }))
                    }
                    Ok(_) => None,
                };
                futures::future::ready(out)
            });
        Ok(stream.boxed())
    }
}

impl MemoryStore {
    fn apply<K: StoreObject>(&self, key: &ObjectKey, patch: &Patch, status: bool) -> Result<K> {
        let mut inner = self.inner.lock().expect("store lock");
        let kind = Self::kind::<K>();
        let id = (kind.clone(), key.namespace.clone(), key.name.clone());
        let Some(current) = inner.objects.get(&id).cloned() else {
            return Err(not_found::<K>(key));
        };
        let stored_version = current
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(rv) = patch.resource_version()
            && rv != stored_version
        {
            return Err(StoreError::Conflict {
                kind,
                key: key.clone(),
                message: format!("resourceVersion {rv} is not {stored_version}"),
            });
        }
        let Patch::Merge(map) = patch;
        let mut next = current.clone();
        if status {
            if let Some(s) = map.get("status") {
                let target = next
                    .as_object_mut()
                    .expect("object")
                    .entry("status")
                    .or_insert(Value::Null);
                merge_patch(target, s);
            }
        } else {
            let mut body = Value::Object(map.clone());
            if let Some(b) = body.as_object_mut() {
                b.remove("status");
                if let Some(Value::Object(meta)) = b.get_mut("metadata") {
                    for server in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
                        meta.remove(server);
                    }
                }
            }
            merge_patch(&mut next, &body);
            if next.get("spec") != current.get("spec") {
                let generation = current
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                next["metadata"]["generation"] = json!(generation + 1);
            }
        }
        let typed: K = serde_json::from_value(next.clone()).map_err(|e| StoreError::Invalid {
            kind: kind.clone(),
            key: key.clone(),
            message: e.to_string(),
        })?;
        let mut next = serde_json::to_value(&typed).expect("object serializes");
        let deleting = next.pointer("/metadata/deletionTimestamp").is_some();
        let no_finalizers = next
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if deleting && no_finalizers {
            inner.objects.remove(&id);
            self.commit(&mut inner, &kind, "DELETED", &mut next);
        } else {
            self.commit(&mut inner, &kind, "MODIFIED", &mut next);
            inner.objects.insert(id, next.clone());
        }
        decode(&next)
    }
}
