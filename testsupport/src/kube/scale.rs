//! The `/scale` subresource: an `autoscaling/v1` Scale read from `.spec.replicas`,
//! `.status.replicas` and `.status.selector`, and written back to `.spec.replicas`.

use serde_json::{Value, json};

use super::patch::{self, PatchKind};
use super::registry::ResourceType;
use super::status::{ApiError, Result};
use super::storage::{Inner, Key, Storage, meta_mut, meta_str};
use super::write::Part;

impl Inner {
    /// The `autoscaling/v1` Scale of an object with a scale subresource.
    pub(super) fn scale(&self, rt: &'static ResourceType, key: &Key) -> Result<Value> {
        let object = self.get(rt, key)?;
        let meta = object.get("metadata").cloned().unwrap_or_default();
        let mut scale_meta = json!({});
        for field in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            if let Some(v) = meta.get(field) {
                scale_meta[field] = v.clone();
            }
        }
        let mut status = json!({
            "replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
        });
        if let Some(selector) = object.pointer("/status/selector") {
            status["selector"] = selector.clone();
        }
        Ok(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": scale_meta,
            "spec": {"replicas": object.pointer("/spec/replicas").cloned().unwrap_or(json!(0))},
            "status": status,
        }))
    }

    /// Writes `spec.replicas` from a Scale (PUT) or a patch of the Scale.
    pub(super) fn update_scale(
        &mut self,
        rt: &'static ResourceType,
        key: &Key,
        new_scale: Value,
    ) -> Result<Value> {
        let replicas = new_scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .filter(|r| *r >= 0)
            .ok_or_else(|| {
                ApiError::invalid(
                    rt,
                    &key.name,
                    "spec.replicas",
                    "Invalid value: must be a non-negative integer",
                )
            })?;
        let mut object = self.get(rt, key)?.clone();
        if let Some(rv) = meta_str(&new_scale, "resourceVersion").filter(|rv| !rv.is_empty()) {
            meta_mut(&mut object).insert("resourceVersion".into(), json!(rv));
        }
        if !object.get("spec").is_some_and(Value::is_object) {
            object["spec"] = json!({});
        }
        object["spec"]["replicas"] = json!(replicas);
        self.update(rt, &key.namespace, &key.name, object, Part::Main)?;
        self.scale(rt, key)
    }
}

impl Storage {
    /// Reads the Scale of an object.
    pub fn scale(&self, rt: &'static ResourceType, namespace: &str, name: &str) -> Result<Value> {
        self.with(|inner| inner.scale(rt, &Key::new(rt, namespace, name)))
    }

    /// Replaces the Scale (PUT `/scale`).
    pub fn update_scale(
        &self,
        rt: &'static ResourceType,
        namespace: &str,
        name: &str,
        scale: Value,
    ) -> Result<Value> {
        self.with(|inner| inner.update_scale(rt, &Key::new(rt, namespace, name), scale))
    }

    /// Patches the Scale (PATCH `/scale`).
    pub fn patch_scale(
        &self,
        rt: &'static ResourceType,
        namespace: &str,
        name: &str,
        kind: PatchKind,
        body: &[u8],
    ) -> Result<Value> {
        self.with(|inner| {
            let key = Key::new(rt, namespace, name);
            let current = inner.scale(rt, &key)?;
            let scale_type = &super::registry::ResourceType {
                custom: false,
                ..*rt
            };
            let patched = patch::apply(scale_type, name, kind, &current, body)?;
            inner.update_scale(rt, &key, patched)
        })
    }
}
