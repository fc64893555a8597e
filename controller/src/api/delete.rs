//! `DELETE .../{name}`: the delete route and its `DeleteOptions` (query parameters or a JSON
//! body), decoded as kube-apiserver decodes them: a field of the wrong type is a 400 naming the
//! field, and nothing is deleted.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rouse_shared::store::{DeleteParams, Deletion, ObjectKey, Propagation, Store, StoreObject};
use serde::Deserialize;

use super::body::{JSON, read_body};
use super::kinds::{Kind, dispatch};
use super::query::{QueryParams, query};
use super::state::{ApiState, ApiStore};
use super::status::{Failure, Reply, Subject};
use super::target::Named;

/// The fields of `DeleteOptions` (`meta.k8s.io/v1`) a delete reads; others are ignored, as
/// kube-apiserver ignores unknown fields of a DELETE body.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeleteOptions {
    kind: Option<String>,
    api_version: Option<String>,
    grace_period_seconds: Option<i64>,
    preconditions: Option<Preconditions>,
    orphan_dependents: Option<bool>,
    propagation_policy: Option<String>,
    dry_run: Option<Vec<String>>,
}

/// `DeleteOptions.preconditions`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Preconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

impl DeleteOptions {
    /// The options in a body (empty: none), or 400 naming the field of the wrong type.
    fn from_body(bytes: &[u8]) -> Reply<Self> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        let value = super::body::parse_object(bytes)?;
        let options: Self = serde_path_to_error::deserialize(value).map_err(|e| {
            let field = e.path().to_string();
            Failure::bad_request(format!(
                "invalid DeleteOptions: {field}: {}",
                e.into_inner()
            ))
        })?;
        if let Some(kind) = options.kind.as_deref()
            && kind != "DeleteOptions"
        {
            return Err(Failure::bad_request(format!(
                "invalid DeleteOptions: kind must be DeleteOptions, got {kind:?}"
            )));
        }
        if let Some(version) = options.api_version.as_deref()
            && !matches!(version, "v1" | "meta.k8s.io/v1")
        {
            return Err(Failure::bad_request(format!(
                "invalid DeleteOptions: apiVersion must be meta.k8s.io/v1 or v1, got {version:?}"
            )));
        }
        Ok(options)
    }
}

/// `DELETE .../{name}`: delete, with `?propagationPolicy=` or a `DeleteOptions` body
/// (`preconditions`, `propagationPolicy`, `orphanDependents`, `gracePeriodSeconds`, `dryRun`).
pub(super) async fn delete<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Named { kind, key }: Named,
    q: QueryParams,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    let q = query(q)?;
    let (_, bytes) = read_body(&headers, body, &state.config, JSON).await?;
    let options = DeleteOptions::from_body(&bytes)?;
    let policy = q
        .get("propagationPolicy")
        .cloned()
        .or(options.propagation_policy);
    let orphan = match q.get("orphanDependents") {
        Some(_) => Some(super::query::flag(&q, "orphanDependents")?),
        None => options.orphan_dependents,
    };
    let propagation = match (policy.as_deref(), orphan) {
        (Some(p), Some(_)) if !p.is_empty() => {
            // kube-apiserver's ValidateDeleteOptions: the deprecated flag and the policy
            // cannot both be set.
            return Err(Failure::invalid(
                Subject {
                    kind,
                    name: &key.name,
                },
                &[(
                    "propagationPolicy".to_owned(),
                    "orphanDependents and propagationPolicy cannot both be set".to_owned(),
                )],
            ));
        }
        (None | Some(""), Some(true)) => Some(Propagation::Orphan),
        (None | Some(""), _) => None,
        (Some("Background"), _) => Some(Propagation::Background),
        (Some("Foreground"), _) => Some(Propagation::Foreground),
        (Some("Orphan"), _) => Some(Propagation::Orphan),
        (Some(other), _) => {
            return Err(Failure::bad_request(format!(
                "propagationPolicy must be Background, Foreground or Orphan, got {other:?}"
            )));
        }
    };
    if options.grace_period_seconds.is_some_and(|g| g < 0) {
        return Err(Failure::bad_request(
            "gracePeriodSeconds must be a non-negative integer",
        ));
    }
    // Standalone workloads stop on delete at once; a grace period has nothing to wait for.
    let dry_run = match (q.get("dryRun"), &options.dry_run) {
        (Some(v), _) => v == "All",
        (None, Some(values)) => values.iter().any(|v| v == "All"),
        _ => false,
    };
    let preconditions = options.preconditions.unwrap_or_default();
    let params = DeleteParams {
        propagation,
        uid: preconditions.uid,
        resource_version: preconditions.resource_version,
    };
    dispatch!(kind, delete_object(&state, kind, &key, &params, dry_run))
}

async fn delete_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    params: &DeleteParams,
    dry_run: bool,
) -> Reply<Response> {
    if dry_run {
        let object: K = state
            .store
            .get(key)
            .await
            .map_err(|e| Failure::from_store(kind, &e))?;
        let uid = object.meta().uid.as_deref();
        let version = object.meta().resource_version.as_deref();
        if params.uid.as_deref().is_some_and(|u| Some(u) != uid)
            || params
                .resource_version
                .as_deref()
                .is_some_and(|v| Some(v) != version)
        {
            return Err(Failure::conflict(
                Subject {
                    kind,
                    name: &key.name,
                },
                "the preconditions do not match the stored object",
            ));
        }
        return Ok((StatusCode::OK, Json(object)).into_response());
    }
    let deletion: Deletion<K> = state
        .store
        .delete(key, params)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    Ok(match deletion {
        Deletion::Deleted(object) => (StatusCode::OK, Json(object)).into_response(),
        Deletion::Pending(object) => (StatusCode::ACCEPTED, Json(object)).into_response(),
    })
}
