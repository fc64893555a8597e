//! The write engine under the handlers: a merge patch applied to the current object,
//! validated, and stored conditional on the version that was validated, read again and
//! retried when the object moved meanwhile. Replace, patch, apply and scale all end here.

use axum::Json;
use axum::response::{IntoResponse, Response};
use rouse_shared::store::{ObjectKey, Patch, Store, StoreError, StoreObject};
use serde_json::Value;

use super::bounds::check_object_size;
use super::check::{resource_version, to_object, validated};
use super::kinds::Kind;
use super::merge::merge_patch;
use super::state::ApiState;
use super::status::{Failure, Reply, Subject};

/// How often a patch is retried when the object changed between read and write; a client's
/// own resourceVersion precondition is never retried.
pub(super) const PATCH_ATTEMPTS: usize = 5;

/// Which part of an object a patch writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
    /// Metadata and spec (the main resource).
    Spec,
    /// The status subresource.
    Status,
}

/// Applies the patch to the current object, validates the result, then stores the patch
/// conditional on the version that was validated (retrying when the object moved meanwhile).
pub(super) async fn patch_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    patch: Value,
    part: Part,
    dry_run: bool,
) -> Reply<Response> {
    let fail = |e: StoreError| Failure::from_store(kind, &e);
    // What is stored is the patch: times past the representable end are clamped in it.
    let mut patch = patch;
    rouse_shared::validate::clamp_far_times(kind.kind(), &mut patch);
    let Some(store_patch) = Patch::merge(patch.clone()) else {
        return Err(Failure::bad_request("a merge patch must be a JSON object"));
    };
    let client_version = store_patch.resource_version().map(str::to_owned);
    for attempt in 1..=PATCH_ATTEMPTS {
        let current: K = state.store.get(key).await.map_err(fail)?;
        let current = Value::Object(to_object(&current)?);
        let mut patched = current.clone();
        merge_patch(&mut patched, &patch);
        check_object_size(kind, &key.name, &patched, &state.config)?;
        if patched.pointer("/metadata/uid") != current.pointer("/metadata/uid") {
            let was = current
                .pointer("/metadata/uid")
                .cloned()
                .unwrap_or(Value::Null);
            return Err(Failure::invalid(
                Subject {
                    kind,
                    name: &key.name,
                },
                &[(
                    "metadata.uid".to_owned(),
                    format!("field is immutable (is {was})"),
                )],
            ));
        }
        // Each route writes only its part; keep the other as stored, as the store will.
        let kept = match part {
            Part::Spec => "status",
            Part::Status => "spec",
        };
        if let (Some(obj), Some(old)) = (patched.as_object_mut(), current.get(kept)) {
            obj.insert(kept.to_owned(), old.clone());
        }
        let checked = validated::<K>(kind, patched)?;
        if dry_run {
            // dryRun=All: the answer of a write that is never stored.
            return Ok(Json(checked).into_response());
        }
        let version = client_version.clone().unwrap_or_else(|| {
            current
                .as_object()
                .map(resource_version)
                .unwrap_or_default()
        });
        let conditional = store_patch.clone().with_resource_version(&version);
        let result = match part {
            Part::Spec => state.store.patch(key, &conditional).await,
            Part::Status => state.store.patch_status(key, &conditional).await,
        };
        if let Some(reply) = settle(kind, key, client_version.is_some(), attempt, result) {
            return reply;
        }
    }
    Err(kept_changing(kind, key))
}

/// The reply to one conditional write, or `None` to read and try again: a conflict means the
/// object moved between the read and the write — unless the client pinned the version
/// (`pinned`), when the conflict is the client's answer.
pub(super) fn settle<K: serde::Serialize>(
    kind: Kind,
    key: &ObjectKey,
    pinned: bool,
    attempt: usize,
    result: Result<K, StoreError>,
) -> Option<Reply<Response>> {
    match result {
        Ok(stored) => Some(Ok(Json(stored).into_response())),
        Err(StoreError::Conflict { .. }) if !pinned && attempt < PATCH_ATTEMPTS => {
            tracing::debug!(object.key = %key, write.attempt = attempt, "object changed during the write; retrying");
            None
        }
        Err(e) => Some(Err(Failure::from_store(kind, &e))),
    }
}

/// The 409 after every attempt met a moving object.
pub(super) fn kept_changing(kind: Kind, key: &ObjectKey) -> Failure {
    Failure::conflict(
        Subject {
            kind,
            name: &key.name,
        },
        "the object kept changing; try again",
    )
}
