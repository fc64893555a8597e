//! Creates, updates and patches: the write rules of the API server (generated names, uids,
//! resourceVersion preconditions, generation, the status subresource, no-op
//! writes that change nothing and send no event).

use serde_json::{Value, json};

use super::patch::{self, PatchKind};
use super::registry::ResourceType;
use super::rules;
use super::status::{ApiError, Result};
use super::storage::{Inner, Key, Storage, finalizers, meta_mut, meta_str, timestamp_in};

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource: everything but `status` where the kind has a status subresource.
    Main,
    /// The `/status` subresource: only `status`.
    Status,
}

/// Metadata the server owns; a write can never change these.
const SERVER_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
];

fn is_dns_subdomain(name: &str) -> bool {
    let bytes = name.as_bytes();
    !name.is_empty()
        && name.len() <= 253
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'.')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Checks `kind`/`apiVersion` of a body against the resource and fills them in when absent.
fn check_type(rt: &ResourceType, object: &mut Value) -> Result<()> {
    if !object.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    let api_version = rt.api_version();
    let kind_ok = object
        .get("kind")
        .and_then(Value::as_str)
        .is_none_or(|k| k == rt.kind);
    let version_ok = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_none_or(|v| v == api_version);
    if !kind_ok || !version_ok {
        return Err(ApiError::bad_request(format!(
            "the body is a {} {}, but the request is for {} {}",
            object["apiVersion"], object["kind"], api_version, rt.kind
        )));
    }
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(rt.kind);
    Ok(())
}

/// Everything the generation counts: the object without metadata and status.
fn spec_part(object: &Value) -> Value {
    let mut rest = object.clone();
    if let Some(map) = rest.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    rest
}

impl Inner {
    /// Creates `object` in `namespace`.
    pub(super) fn create(
        &mut self,
        rt: &'static ResourceType,
        namespace: &str,
        mut object: Value,
    ) -> Result<Value> {
        check_type(rt, &mut object)?;
        let meta = meta_mut(&mut object);
        if let Some(ns) = meta.get("namespace").and_then(Value::as_str)
            && rt.namespaced
            && ns != namespace
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        if meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let name = match meta.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => {
                let Some(prefix) = meta.get("generateName").and_then(Value::as_str) else {
                    return Err(ApiError::invalid(
                        rt,
                        "",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    ));
                };
                let prefix = prefix.to_owned();
                loop {
                    let candidate = self.generated_name(&prefix);
                    if !self
                        .objects
                        .contains_key(&Key::new(rt, namespace, &candidate))
                    {
                        break candidate;
                    }
                }
            }
        };
        if !is_dns_subdomain(&name) {
            return Err(ApiError::invalid(
                rt,
                &name,
                "metadata.name",
                &format!(
                    "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower \
                     case alphanumeric characters, '-' or '.', and must start and end with an \
                     alphanumeric character"
                ),
            ));
        }
        let key = Key::new(rt, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(rt, &name));
        }
        rules::check_sandbox(rt, &name, None, &object)?;
        let uid = self.new_uid();
        let meta = meta_mut(&mut object);
        meta.insert("name".into(), json!(name));
        if rt.namespaced {
            meta.insert("namespace".into(), json!(namespace));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), json!(uid));
        meta.insert(
            "creationTimestamp".into(),
            json!(timestamp_in(Default::default())),
        );
        meta.insert("generation".into(), json!(1));
        for field in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
        ] {
            meta.remove(field);
        }
        self.defaults_on_create(rt, &mut object);
        Ok(self.put(rt, key, object, None))
    }

    /// What the API server fills in on create for the built-in kinds it knows.
    fn defaults_on_create(&mut self, rt: &ResourceType, object: &mut Value) {
        match (rt.group, rt.plural) {
            ("", "pods") | ("", "persistentvolumeclaims") => {
                object["status"] = json!({"phase": "Pending"});
            }
            ("", "namespaces") => object["status"] = json!({"phase": "Active"}),
            ("", "services") => {
                object["status"] = json!({"loadBalancer": {}});
                let spec = &mut object["spec"];
                if !spec.is_object() {
                    *spec = json!({});
                }
                let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
                match spec.get("clusterIP").cloned() {
                    None if !external => {
                        let ip = self.next_cluster_ip();
                        spec["clusterIP"] = json!(ip);
                        spec["clusterIPs"] = json!([ip]);
                    }
                    Some(ip) if spec.get("clusterIPs").is_none() => {
                        spec["clusterIPs"] = json!([ip])
                    }
                    _ => {}
                }
            }
            _ if rt.custom && rt.status => {
                if let Some(map) = object.as_object_mut() {
                    map.remove("status");
                }
            }
            _ => {}
        }
    }

    /// Replaces the object (or its status) with `object`, checking its resourceVersion.
    pub(super) fn update(
        &mut self,
        rt: &'static ResourceType,
        namespace: &str,
        name: &str,
        mut object: Value,
        part: Part,
    ) -> Result<Value> {
        check_type(rt, &mut object)?;
        let key = Key::new(rt, namespace, name);
        let old = self.get(rt, &key)?.clone();
        if let Some(body_name) = meta_str(&object, "name")
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let old_rv = meta_str(&old, "resourceVersion").unwrap_or_default();
        match meta_str(&object, "resourceVersion").filter(|rv| !rv.is_empty()) {
            Some(rv) if rv != old_rv => return Err(ApiError::stale(rt, name)),
            None if rt.custom => {
                return Err(ApiError::invalid(
                    rt,
                    name,
                    "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update",
                ));
            }
            _ => {}
        }
        let next = match part {
            Part::Main => {
                let mut next = object;
                let meta = meta_mut(&mut next);
                meta.remove("managedFields");
                for field in SERVER_META {
                    match old.get("metadata").and_then(|m| m.get(*field)) {
                        Some(value) => meta.insert((*field).to_owned(), value.clone()),
                        None => meta.remove(*field),
                    };
                }
                if rt.status {
                    match old.get("status") {
                        Some(status) => next["status"] = status.clone(),
                        None => {
                            next.as_object_mut().map(|m| m.remove("status"));
                        }
                    }
                }
                rules::check_update(rt, name, &old, &mut next)?;
                rules::check_sandbox(rt, name, Some(&old), &next)?;
                if spec_part(&next) != spec_part(&old) {
                    let generation = old.pointer("/metadata/generation").and_then(Value::as_i64);
                    meta_mut(&mut next)
                        .insert("generation".into(), json!(generation.unwrap_or(0) + 1));
                }
                next
            }
            Part::Status => {
                let mut next = old.clone();
                match object.get("status") {
                    Some(status) => next["status"] = status.clone(),
                    None => {
                        next.as_object_mut().map(|m| m.remove("status"));
                    }
                }
                next
            }
        };
        if next == old {
            return Ok(old);
        }
        let deleting = next.pointer("/metadata/deletionTimestamp").is_some();
        let stored = self.put(rt, key.clone(), next.clone(), Some(old));
        if deleting
            && finalizers(&stored).is_empty()
            && let Some(last) = self.remove(rt, &key)
        {
            self.collect_garbage_of(&last);
            return Ok(last);
        }
        Ok(stored)
    }

    /// Applies a patch to the object (or its status); server-side apply creates it if absent.
    pub(super) fn patch(
        &mut self,
        rt: &'static ResourceType,
        namespace: &str,
        name: &str,
        kind: PatchKind,
        body: &[u8],
        part: Part,
    ) -> Result<Value> {
        let key = Key::new(rt, namespace, name);
        let Some(current) = self.objects.get(&key) else {
            if kind == PatchKind::Apply && part == Part::Main {
                let mut object = patch::apply(rt, name, kind, &json!({}), body)?;
                meta_mut(&mut object).insert("name".into(), json!(name));
                return self.create(rt, namespace, object);
            }
            return Err(ApiError::not_found(rt, name));
        };
        let patched = patch::apply(rt, name, kind, current, body)?;
        if meta_str(&patched, "name") != Some(name) {
            return Err(ApiError::bad_request("a patch cannot change metadata.name"));
        }
        self.update(rt, namespace, name, patched, part)
    }
}

impl Storage {
    /// Creates an object (POST).
    pub fn create(
        &self,
        rt: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value> {
        self.with(|inner| inner.create(rt, namespace, object))
    }

    /// Replaces an object or its status (PUT).
    pub fn update(
        &self,
        rt: &'static ResourceType,
        namespace: &str,
        name: &str,
        object: Value,
        part: Part,
    ) -> Result<Value> {
        self.with(|inner| inner.update(rt, namespace, name, object, part))
    }

    /// Patches an object or its status (PATCH).
    pub fn patch(
        &self,
        rt: &'static ResourceType,
        namespace: &str,
        name: &str,
        kind: PatchKind,
        body: &[u8],
        part: Part,
    ) -> Result<Value> {
        self.with(|inner| inner.patch(rt, namespace, name, kind, body, part))
    }

    /// Changes an object in place, bypassing the write rules, as a controller of the cluster
    /// itself would (the kubelet binding a pod and writing its status). `None` if the object
    /// is gone or its uid is no longer `uid`.
    pub fn modify(
        &self,
        rt: &'static ResourceType,
        namespace: &str,
        name: &str,
        uid: &str,
        change: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        self.with(|inner| {
            let key = Key::new(rt, namespace, name);
            let old = inner.objects.get(&key)?;
            if meta_str(old, "uid") != Some(uid) {
                return None;
            }
            let old = old.clone();
            let mut next = old.clone();
            change(&mut next);
            if next == old {
                return Some(old);
            }
            Some(inner.put(rt, key, next, Some(old)))
        })
    }
}
