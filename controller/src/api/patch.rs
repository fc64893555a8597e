//! JSON patches (RFC 6902): parsing one, and applying it to the current object as a
//! conditional merge patch through the write engine ([`super::write`]).

use axum::response::Response;
use rouse_shared::store::{ObjectKey, Store, StoreError, StoreObject};
use serde_json::{Value, json};

use super::bounds::{apply_json_patch, check_object_size};
use super::check::{check_patch_identity, resource_version, to_object};
use super::kinds::Kind;
use super::merge::diff;
use super::query::Options;
use super::state::ApiState;
use super::status::{Failure, Reply};
use super::write::{PATCH_ATTEMPTS, Part, kept_changing, patch_object};

/// Applies a JSON patch (RFC 6902) to the current object and writes the difference as a merge
/// patch pinned to the version it was computed from, reading again when the object moved.
pub(super) async fn json_patch_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    ops: &json_patch::Patch,
    part: Part,
    options: &Options,
) -> Reply<Response> {
    let fail = |e: StoreError| Failure::from_store(kind, &e);
    for attempt in 1..=PATCH_ATTEMPTS {
        let current: K = state.store.get(key).await.map_err(fail)?;
        let current = to_object(&current)?;
        let mut patched = Value::Object(current.clone());
        apply_json_patch(&mut patched, ops, &state.config)?;
        check_object_size(kind, &key.name, &patched, &state.config)?;
        let Value::Object(patched) = patched else {
            return Err(Failure::invalid_patch(
                "the JSON patch must leave an object",
            ));
        };
        check_patch_identity(
            kind,
            &Value::Object(patched.clone()),
            &key.namespace,
            &key.name,
        )?;
        let mut merge = diff(&current, &patched);
        merge
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|m| {
                m.insert(
                    "resourceVersion".to_owned(),
                    json!(resource_version(&current)),
                )
            });
        match patch_object::<K, S>(
            state,
            kind,
            key,
            Value::Object(merge),
            part,
            options.dry_run,
        )
        .await
        {
            Err(f) if f.code == axum::http::StatusCode::CONFLICT && attempt < PATCH_ATTEMPTS => {}
            other => return other,
        }
    }
    Err(kept_changing(kind, key))
}

/// A JSON patch document, or 400.
pub(super) fn parse_json_patch(bytes: &[u8]) -> Reply<json_patch::Patch> {
    serde_json::from_slice(bytes)
        .map_err(|e| Failure::bad_request(format!("the request body is not a JSON patch: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parse_json_patch_takes_an_array_of_operations() {
        assert!(super::parse_json_patch(b"[{\"op\":\"add\",\"path\":\"/a\",\"value\":1}]").is_ok());
        assert!(super::parse_json_patch(b"{}").is_err());
    }
}
