//! The update routes: replace, merge patch of spec or status, suspend and resume. Every write
//! is validated as the whole object it produces, then stored conditional on the version that
//! was validated.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use rouse_shared::store::{ObjectKey, Patch, Store, StoreError, StoreObject};
use serde_json::{Map, Value, json};

use super::body::{ANY_PATCH, JSON, parse_object, read_body, read_json};
use super::bounds::check_object_size;
use super::check::{check_patch_identity, prepare, resource_version, to_object, validated};
use super::kinds::{Kind, dispatch};
use super::merge::diff;
use super::patch::json_patch_object;
use super::query::{Options, QueryParams, query};
use super::state::{ApiState, ApiStore};
use super::status::{Failure, Reply, Subject};
use super::target::Named;
use super::write::{PATCH_ATTEMPTS, Part, kept_changing, patch_object, settle};

/// `PUT .../{name}`: replace metadata (labels, annotations, finalizers, owner references) and
/// spec; `metadata.resourceVersion` in the body is a precondition.
pub(super) async fn replace<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Named { kind, key }: Named,
    q: QueryParams,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    let options = Options::from_query(&query(q)?)?;
    let mut value = read_json(&headers, body, &state.config, JSON).await?;
    prepare(kind, &mut value, &key.namespace, Some(&key.name))?;
    dispatch!(
        kind,
        replace_object(&state, kind, &key, value, options.dry_run)
    )
}

/// Metadata fields a replace may change; the rest is the server's.
const REPLACEABLE_METADATA: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

async fn replace_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    value: Value,
    dry_run: bool,
) -> Reply<Response> {
    let fail = |e: StoreError| Failure::from_store(kind, &e);
    let desired = to_object(&validated::<K>(kind, value)?)?;
    let wanted_version = desired
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    for attempt in 1..=PATCH_ATTEMPTS {
        let current: K = state.store.get(key).await.map_err(fail)?;
        let current = to_object(&current)?;
        let target = replaced(&current, &desired);
        check_object_size(kind, &key.name, &target, &state.config)?;
        if dry_run {
            // dryRun=All: the object the replace would store, checked, never written.
            if let Some(version) = &wanted_version
                && *version != resource_version(&current)
            {
                return Err(Failure::conflict(
                    Subject {
                        kind,
                        name: &key.name,
                    },
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            let checked = validated::<K>(kind, Value::Object(target))?;
            return Ok(Json(checked).into_response());
        }
        let patch = diff(&current, &target);
        // Without a version from the client the replace is unconditional; the version read
        // here only guards against writing a diff computed from a state that moved.
        let version = wanted_version
            .clone()
            .unwrap_or_else(|| resource_version(&current));
        let result = state
            .store
            .patch(key, &Patch::Merge(patch).with_resource_version(&version))
            .await;
        if let Some(reply) = settle(kind, key, wanted_version.is_some(), attempt, result) {
            return reply;
        }
    }
    Err(kept_changing(kind, key))
}

/// `current` with the client-owned metadata and the spec of `desired`.
fn replaced(current: &Map<String, Value>, desired: &Map<String, Value>) -> Map<String, Value> {
    let mut target = current.clone();
    let empty = Map::new();
    let desired_meta = desired
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(Value::Object(meta)) = target.get_mut("metadata") {
        for field in REPLACEABLE_METADATA {
            match desired_meta.get(field) {
                Some(v) => meta.insert(field.to_owned(), v.clone()),
                None => meta.remove(field),
            };
        }
    }
    match desired.get("spec") {
        Some(spec) => target.insert("spec".to_owned(), spec.clone()),
        None => target.remove("spec"),
    };
    target
}

/// `PATCH .../{name}`: a JSON merge patch of metadata and spec.
pub(super) async fn patch<S: ApiStore>(
    state: State<ApiState<S>>,
    target: Named,
    q: QueryParams,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    patch_route(state, target, q, headers, body, Part::Spec).await
}

/// `PATCH .../{name}/status`: a JSON merge patch of the status.
pub(super) async fn patch_status<S: ApiStore>(
    state: State<ApiState<S>>,
    target: Named,
    q: QueryParams,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    patch_route(state, target, q, headers, body, Part::Status).await
}

/// `PUT .../{name}/status`: replace the status; `metadata.resourceVersion` in the body is a
/// precondition.
pub(super) async fn replace_status<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Named { kind, key }: Named,
    q: QueryParams,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    let q = query(q)?;
    let options = Options::from_query(&q)?;
    let value = read_json(&headers, body, &state.config, JSON).await?;
    check_patch_identity(kind, &value, &key.namespace, &key.name)?;
    dispatch!(
        kind,
        replace_status_object(&state, kind, &key, value, options.dry_run)
    )
}

async fn replace_status_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    value: Value,
    dry_run: bool,
) -> Reply<Response> {
    let current: K = state
        .store
        .get(key)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    let current = to_object(&current)?;
    let mut desired = current.clone();
    match value.get("status") {
        Some(status) => desired.insert("status".to_owned(), status.clone()),
        None => desired.remove("status"),
    };
    let mut merge = diff(&current, &desired);
    let version = value
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .map_or_else(|| resource_version(&current), str::to_owned);
    merge.insert("metadata".to_owned(), json!({"resourceVersion": version}));
    patch_object::<K, S>(
        state,
        kind,
        key,
        Value::Object(merge),
        Part::Status,
        dry_run,
    )
    .await
}

async fn patch_route<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Named { kind, key }: Named,
    q: QueryParams,
    headers: HeaderMap,
    body: Body,
    part: Part,
) -> Reply<Response> {
    let q = query(q)?;
    let (media, bytes) = read_body(&headers, body, &state.config, ANY_PATCH).await?;
    let options = Options::from_query(&q)?;
    match media.as_str() {
        "application/json-patch+json" => {
            let ops = super::patch::parse_json_patch(&bytes)?;
            dispatch!(
                kind,
                json_patch_object(&state, kind, &key, &ops, part, &options)
            )
        }
        "application/apply-patch+yaml" => {
            super::apply::apply(&state, kind, &key, &bytes, part, &options).await
        }
        _ => {
            let patch = parse_object(&bytes)?;
            check_patch_identity(kind, &patch, &key.namespace, &key.name)?;
            dispatch!(
                kind,
                patch_object(&state, kind, &key, patch, part, options.dry_run)
            )
        }
    }
}

/// `POST .../sandboxes/{name}/suspend`: sets `spec.operatingMode: Suspended`.
pub(super) async fn suspend<S: ApiStore>(
    state: State<ApiState<S>>,
    target: Named,
) -> Reply<Response> {
    set_mode(state, target, "Suspended").await
}

/// `POST .../sandboxes/{name}/resume`: sets `spec.operatingMode: Running`.
pub(super) async fn resume<S: ApiStore>(
    state: State<ApiState<S>>,
    target: Named,
) -> Reply<Response> {
    set_mode(state, target, "Running").await
}

async fn set_mode<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Named { kind, key }: Named,
    mode: &str,
) -> Reply<Response> {
    if kind != Kind::Sandbox {
        return Err(Failure::no_route(&format!(
            "{}/{}: only sandboxes suspend and resume",
            kind.plural(),
            key.name
        )));
    }
    if mode == "Running" {
        refuse_expired(&state, kind, &key).await?;
    }
    patch_object::<rouse_shared::api::Sandbox, S>(
        &state,
        kind,
        &key,
        json!({"spec": {"operatingMode": mode}}),
        Part::Spec,
        false,
    )
    .await
}

/// A resume of a sandbox past its `spec.shutdownTime` would change nothing (it stays stopped):
/// refuse it and say why.
async fn refuse_expired<S: ApiStore>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
) -> Reply<()> {
    let sandbox = Store::<rouse_shared::api::Sandbox>::get(&state.store, key)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    match sandbox.spec.shutdown_time {
        Some(at) if at.0 <= jiff::Timestamp::now() => Err(Failure::conflict(
            Subject {
                kind,
                name: &key.name,
            },
            &format!(
                "it expired at {} (spec.shutdownTime) and stays stopped; set a later spec.shutdownTime, or remove it, to run it again",
                at.0
            ),
        )),
        _ => Ok(()),
    }
}
