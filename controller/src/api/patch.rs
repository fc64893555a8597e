//! What every write shares besides its body — the `dryRun`, `fieldManager` and `force` query
//! parameters — and JSON patches (RFC 6902).

use std::collections::HashMap;

use axum::response::Response;
use rouse_shared::store::{ObjectKey, Store, StoreError, StoreObject};
use serde_json::{Value, json};

use super::bounds::{apply_json_patch, check_object_size};
use super::check::{check_patch_identity, resource_version, to_object};
use super::merge::diff;
use super::update::{PATCH_ATTEMPTS, Part, kept_changing, patch_object};
use super::{ApiState, Failure, Kind, Reply};

/// The write options of a create, replace or patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Options {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldManager`: who writes (server-side apply needs one).
    pub field_manager: Option<String>,
    /// `force=true`: server-side apply takes fields other managers own.
    pub force: bool,
}

impl Options {
    /// The options in a query string, or 400 for values Kubernetes rejects too.
    pub(super) fn from_query(q: &HashMap<String, String>) -> Reply<Self> {
        let dry_run = match q.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(Failure::bad_request(format!(
                    "dryRun must be All, got {other:?}"
                )));
            }
        };
        let field_manager = q.get("fieldManager").filter(|m| !m.is_empty()).cloned();
        if field_manager.as_ref().is_some_and(|m| m.len() > 128) {
            return Err(Failure::bad_request(
                "fieldManager must be at most 128 characters",
            ));
        }
        Ok(Self {
            dry_run,
            field_manager,
            force: super::routes::flag(q, "force")?,
        })
    }
}

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
    use std::collections::HashMap;

    #[test]
    fn options_from_query() {
        let q: HashMap<String, String> = [
            ("dryRun", "All"),
            ("fieldManager", "kubectl"),
            ("force", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let options = super::Options::from_query(&q).expect("valid");
        assert!(options.dry_run && options.force);
        assert_eq!(options.field_manager.as_deref(), Some("kubectl"));
        let bad: HashMap<String, String> = [("dryRun".to_owned(), "Some".to_owned())].into();
        assert!(super::Options::from_query(&bad).is_err());
        assert!(super::parse_json_patch(b"[{\"op\":\"add\",\"path\":\"/a\",\"value\":1}]").is_ok());
        assert!(super::parse_json_patch(b"{}").is_err());
    }
}
