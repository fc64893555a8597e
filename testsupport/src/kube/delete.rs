//! Deletion: preconditions, finalizers, graceful pod deletion and the garbage collector's
//! cascading through `ownerReferences` (background, foreground and orphan propagation).

use std::time::Duration;

use serde_json::{Value, json};

use super::registry::{self, ResourceType};
use super::status::{ApiError, Result};
use super::storage::{
    Inner, Key, Storage, finalizers, meta_mut, meta_str, owner_uids, timestamp_in,
};

/// Kubernetes `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Owner goes now, dependents right after.
    Background,
    /// Owner is marked with the `foregroundDeletion` finalizer until its dependents are gone.
    Foreground,
    /// Dependents lose their owner reference and stay.
    Orphan,
}

/// The parts of `DeleteOptions` the fake honours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `propagationPolicy`; background when unset.
    pub propagation: Option<Propagation>,
    /// `gracePeriodSeconds`; only pods use it.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
}

impl DeleteOptions {
    /// Parses a `DeleteOptions` body (may be empty) merged with query parameters.
    pub fn parse(body: &[u8], query: &[(String, String)]) -> Result<Self> {
        let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions body: {e}")))?
        };
        let query_value = |name: &str| {
            query
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let policy = body
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| query_value("propagationPolicy"));
        let propagation = match policy.as_deref() {
            None => None,
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some("Orphan") => Some(Propagation::Orphan),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy {other:?} is not one of Background, Foreground, Orphan"
                )));
            }
        };
        let grace = match body.get("gracePeriodSeconds").and_then(Value::as_i64) {
            Some(g) => Some(g),
            None => match query_value("gracePeriodSeconds") {
                Some(g) => Some(g.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(format!("gracePeriodSeconds {g:?} is not an integer"))
                })?),
                None => None,
            },
        };
        let precondition = |field: &str| {
            body.pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Ok(Self {
            propagation,
            grace_period_seconds: grace,
            uid: precondition("uid"),
            resource_version: precondition("resourceVersion"),
        })
    }
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object is gone; its last state.
    Gone(Value),
    /// Finalizers or a grace period hold it; its state with `deletionTimestamp`.
    Pending(Value),
}

/// Upper bound of objects one cascading delete walks, so a reference cycle cannot loop.
const MAX_CASCADE: usize = 100_000;

impl Inner {
    /// Deletes the object under `key` as the API server and its garbage collector would.
    pub(super) fn delete(
        &mut self,
        rt: &'static ResourceType,
        key: &Key,
        options: &DeleteOptions,
    ) -> Result<Deleted> {
        let object = self.get(rt, key)?.clone();
        let name = &key.name;
        if let Some(uid) = &options.uid
            && meta_str(&object, "uid") != Some(uid.as_str())
        {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(&object, "uid").unwrap_or_default()
            );
            return Err(ApiError::conflict(rt, name, &why));
        }
        if let Some(rv) = &options.resource_version
            && meta_str(&object, "resourceVersion") != Some(rv.as_str())
        {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta_str(&object, "resourceVersion").unwrap_or_default()
            );
            return Err(ApiError::conflict(rt, name, &why));
        }
        let deleting = object.pointer("/metadata/deletionTimestamp").is_some();
        // Pods bound to a node are deleted gracefully: marked now, removed by the kubelet.
        let bound = rt.group.is_empty()
            && rt.plural == "pods"
            && object
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
        if bound && options.grace_period_seconds != Some(0) {
            if deleting {
                return Ok(Deleted::Pending(object));
            }
            let grace = options
                .grace_period_seconds
                .or_else(|| {
                    object
                        .pointer("/spec/terminationGracePeriodSeconds")
                        .and_then(Value::as_i64)
                })
                .unwrap_or(30)
                .max(1);
            let mut marked = object.clone();
            let meta = meta_mut(&mut marked);
            let at = timestamp_in(Duration::from_secs(grace.unsigned_abs()));
            meta.insert("deletionTimestamp".into(), json!(at));
            meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
            return Ok(Deleted::Pending(self.put(
                rt,
                key.clone(),
                marked,
                Some(object),
            )));
        }
        let propagation = options.propagation.unwrap_or(Propagation::Background);
        let uid = meta_str(&object, "uid").unwrap_or_default().to_owned();
        let mut object = object;
        match propagation {
            Propagation::Orphan => self.orphan_dependents(&uid),
            Propagation::Foreground if !self.dependents(&uid).is_empty() => {
                let mut marked = object.clone();
                let mut fins = finalizers(&marked);
                if !fins.iter().any(|f| f == "foregroundDeletion") {
                    fins.push("foregroundDeletion".to_owned());
                }
                let meta = meta_mut(&mut marked);
                meta.insert("finalizers".into(), json!(fins));
                if !deleting {
                    meta.insert(
                        "deletionTimestamp".into(),
                        json!(timestamp_in(Duration::ZERO)),
                    );
                    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                }
                let marked = self.put(rt, key.clone(), marked, Some(object));
                for dependent in self.dependents(&uid) {
                    self.delete_dependent(&dependent, &uid, Propagation::Foreground);
                }
                return Ok(Deleted::Pending(marked));
            }
            _ => {}
        }
        if !finalizers(&object).is_empty() {
            if deleting {
                return Ok(Deleted::Pending(object));
            }
            let previous = object.clone();
            let meta = meta_mut(&mut object);
            meta.insert(
                "deletionTimestamp".into(),
                json!(timestamp_in(Duration::ZERO)),
            );
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            return Ok(Deleted::Pending(self.put(
                rt,
                key.clone(),
                object,
                Some(previous),
            )));
        }
        let last = self
            .remove(rt, key)
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        self.collect_garbage_of(&last);
        Ok(Deleted::Gone(last))
    }

    fn resource_of(key: &Key) -> Option<&'static ResourceType> {
        registry::RESOURCES
            .iter()
            .find(|r| r.group == key.group && r.plural == key.plural)
    }

    /// Drops the owner reference to `uid` from every dependent.
    fn orphan_dependents(&mut self, uid: &str) {
        for key in self.dependents(uid) {
            let (Some(rt), Some(old)) = (Self::resource_of(&key), self.objects.get(&key).cloned())
            else {
                continue;
            };
            let mut next = old.clone();
            if let Some(refs) = next
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
            }
            self.put(rt, key, next, Some(old));
        }
    }

    /// Deletes one dependent of `owner` unless another of its owners still exists.
    fn delete_dependent(&mut self, key: &Key, owner: &str, propagation: Propagation) {
        let Some(rt) = Self::resource_of(key) else {
            return;
        };
        let Some(object) = self.objects.get(key) else {
            return;
        };
        let live_owner = owner_uids(object)
            .iter()
            .any(|u| u != owner && self.uids.contains_key(u));
        if live_owner {
            return;
        }
        let options = DeleteOptions {
            propagation: Some(propagation),
            ..DeleteOptions::default()
        };
        // A failure here (the dependent vanished meanwhile) leaves nothing to collect.
        let _ = self.delete(rt, key, &options);
    }

    /// After `removed` is gone: delete its dependents (background) and finish owners that
    /// waited in foreground deletion for it.
    pub(super) fn collect_garbage_of(&mut self, removed: &Value) {
        let mut work: Vec<Value> = vec![removed.clone()];
        let mut steps = 0;
        while let Some(gone) = work.pop() {
            steps += 1;
            if steps > MAX_CASCADE {
                tracing::warn!("fake api server: cascading delete stopped at its bound");
                return;
            }
            let uid = meta_str(&gone, "uid").unwrap_or_default().to_owned();
            for dependent in self.dependents(&uid) {
                self.delete_dependent(&dependent, &uid, Propagation::Background);
            }
            for owner_uid in owner_uids(&gone) {
                if let Some(last) = self.finish_foreground(&owner_uid) {
                    work.push(last);
                }
            }
        }
    }

    /// Removes the `foregroundDeletion` finalizer of `uid` once it has no dependents left;
    /// returns the owner's last state if that removed it.
    fn finish_foreground(&mut self, uid: &str) -> Option<Value> {
        let key = self.uids.get(uid)?.clone();
        let rt = Self::resource_of(&key)?;
        let owner = self.objects.get(&key)?.clone();
        let fins = finalizers(&owner);
        if !fins.iter().any(|f| f == "foregroundDeletion") || !self.dependents(uid).is_empty() {
            return None;
        }
        let rest: Vec<String> = fins
            .into_iter()
            .filter(|f| f != "foregroundDeletion")
            .collect();
        if rest.is_empty() {
            return self.remove(rt, &key);
        }
        let mut next = owner.clone();
        meta_mut(&mut next).insert("finalizers".into(), json!(rest));
        self.put(rt, key, next, Some(owner));
        None
    }
}

impl Storage {
    /// Deletes an object (DELETE).
    pub fn delete(
        &self,
        rt: &'static ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted> {
        self.with(|inner| inner.delete(rt, &Key::new(rt, namespace, name), options))
    }
}
