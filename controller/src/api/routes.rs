//! The object routes: list, get, create, replace, merge patch, delete, the status subresource,
//! suspend and resume. Each handler resolves the URL's plural to a [`Kind`] and runs a generic
//! function for that kind's type.

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use rouse_shared::store::{
    DeleteParams, Deletion, ListParams, ObjectKey, Patch, Propagation, Store, StoreError,
    StoreObject,
};
use serde_json::{Map, Value, json};

use super::body::{JSON, MERGE_PATCH, read_json};
use super::merge::{diff, merge_patch};
use super::selector::{FieldSelector, parse_field_selector, parse_label_selector};
use super::{ApiState, ApiStore, Failure, Kind, Reply, Subject, dispatch, watch};

/// Query parameters, or axum's rejection of a malformed query string.
pub(super) type Query_ = Result<Query<HashMap<String, String>>, QueryRejection>;

/// How often a patch is retried when the object changed between read and write; a client's
/// own resourceVersion precondition is never retried.
const PATCH_ATTEMPTS: usize = 5;

/// The query parameters, or 400.
pub(super) fn query(query: Query_) -> Reply<HashMap<String, String>> {
    query
        .map(|Query(q)| q)
        .map_err(|e| Failure::bad_request(format!("invalid query string: {e}")))
}

/// The kind a URL plural names, or 404.
pub(super) fn kind_of(plural: &str) -> Reply<Kind> {
    Kind::from_plural(plural).ok_or_else(|| Failure::no_route(plural))
}

/// A boolean query parameter (`true`/`1`/`false`/`0`), or 400.
pub(super) fn flag(query: &HashMap<String, String>, name: &str) -> Reply<bool> {
    match query.get(name).map(String::as_str) {
        None | Some("false" | "0" | "") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(Failure::bad_request(format!(
            "query parameter {name} must be true or false, got {other:?}"
        ))),
    }
}

/// A whole-number query parameter, or 400.
pub(super) fn number(query: &HashMap<String, String>, name: &str) -> Reply<Option<u64>> {
    query
        .get(name)
        .map(|v| {
            v.parse::<u64>().map_err(|_| {
                Failure::bad_request(format!(
                    "query parameter {name} must be a non-negative integer, got {v:?}"
                ))
            })
        })
        .transpose()
}

/// `GET /v1/{plural}`: list or watch in every namespace.
pub(super) async fn list_all<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Path(plural): Path<String>,
    q: Query_,
) -> Reply<Response> {
    list_or_watch(state, None, &plural, query(q)?).await
}

/// `GET /v1/namespaces/{ns}/{plural}`: list or watch in one namespace.
pub(super) async fn list<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Path((ns, plural)): Path<(String, String)>,
    q: Query_,
) -> Reply<Response> {
    list_or_watch(state, Some(ns), &plural, query(q)?).await
}

async fn list_or_watch<S: ApiStore>(
    state: ApiState<S>,
    namespace: Option<String>,
    plural: &str,
    q: HashMap<String, String>,
) -> Reply<Response> {
    let kind = kind_of(plural)?;
    let selector = parse_label_selector(q.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| Failure::bad_request(format!("invalid labelSelector: {e}")))?;
    let fields = parse_field_selector(q.get("fieldSelector").map_or("", String::as_str))
        .map_err(|e| Failure::bad_request(format!("invalid fieldSelector: {e}")))?;
    let params = ListParams {
        namespace,
        selector,
    };
    if flag(&q, "watch")? {
        let request = watch::WatchRequest {
            kind,
            params,
            fields,
            resource_version: q.get("resourceVersion").cloned(),
            timeout: number(&q, "timeoutSeconds")?.map(std::time::Duration::from_secs),
            bookmarks: flag(&q, "allowWatchBookmarks")?,
        };
        return watch::watch(state, request).await;
    }
    dispatch!(kind, list_objects(&state, kind, &params, &fields))
}

async fn list_objects<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    params: &ListParams,
    fields: &FieldSelector,
) -> Reply<Response> {
    let list = state
        .store
        .list(params)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    let items: Vec<&K> = list
        .items
        .iter()
        .filter(|o| fields.name.as_deref().is_none_or(|n| o.name_any() == n))
        .collect();
    Ok(Json(json!({
        "apiVersion": kind.api_version(),
        "kind": format!("{}List", kind.kind()),
        "metadata": {"resourceVersion": list.resource_version},
        "items": items,
    }))
    .into_response())
}

/// `GET .../{name}` and `GET .../{name}/status`: one object.
pub(super) async fn get<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Path((ns, plural, name)): Path<(String, String, String)>,
) -> Reply<Response> {
    let kind = kind_of(&plural)?;
    let key = ObjectKey::new(ns, name);
    dispatch!(kind, get_object(&state, kind, &key))
}

/// `GET .../{name}/status`: the object, as Kubernetes returns it for the status subresource.
pub(super) async fn get_status<S: ApiStore>(
    state: State<ApiState<S>>,
    path: Path<(String, String, String)>,
) -> Reply<Response> {
    get(state, path).await
}

async fn get_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
) -> Reply<Response> {
    let object: K = state
        .store
        .get(key)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    Ok(Json(object).into_response())
}

/// `POST /v1/namespaces/{ns}/{plural}`: create.
pub(super) async fn create<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Path((ns, plural)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    let kind = kind_of(&plural)?;
    let mut value = read_json(&headers, body, state.config.max_body_bytes, JSON).await?;
    prepare(kind, &mut value, &ns, None)?;
    let name = object_name(&value);
    if value.pointer("/metadata/resourceVersion").is_some() {
        return Err(Failure::invalid(
            Subject { kind, name: &name },
            &[(
                "metadata.resourceVersion".to_owned(),
                "must not be set on objects to be created".to_owned(),
            )],
        ));
    }
    if let Some(object) = value.as_object_mut() {
        // The status subresource: a create never sets status.
        object.remove("status");
    }
    dispatch!(kind, create_object(&state, kind, value))
}

async fn create_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    value: Value,
) -> Reply<Response> {
    let object: K = validated(kind, value)?;
    let created = state
        .store
        .create(&object)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// `PUT .../{name}`: replace metadata (labels, annotations, finalizers, owner references) and
/// spec; `metadata.resourceVersion` in the body is a precondition.
pub(super) async fn replace<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    let kind = kind_of(&plural)?;
    let mut value = read_json(&headers, body, state.config.max_body_bytes, JSON).await?;
    prepare(kind, &mut value, &ns, Some(&name))?;
    let key = ObjectKey::new(ns, name);
    dispatch!(kind, replace_object(&state, kind, &key, value))
}

/// Metadata fields a replace may change; the rest is the server's.
const REPLACEABLE_METADATA: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

async fn replace_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    value: Value,
) -> Reply<Response> {
    let fail = |e: StoreError| Failure::from_store(kind, &e);
    let desired = to_object(&validated::<K>(kind, value)?)?;
    let current: K = state.store.get(key).await.map_err(fail)?;
    let current = to_object(&current)?;
    let wanted_version = desired
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
        .map(str::to_owned);
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
    let patch = diff(&current, &target);
    let version = wanted_version.unwrap_or_else(|| resource_version(&current));
    let stored: K = state
        .store
        .patch(key, &Patch::Merge(patch).with_resource_version(&version))
        .await
        .map_err(fail)?;
    Ok(Json(stored).into_response())
}

/// `PATCH .../{name}`: a JSON merge patch of metadata and spec.
pub(super) async fn patch<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    let kind = kind_of(&plural)?;
    let patch = read_json(&headers, body, state.config.max_body_bytes, MERGE_PATCH).await?;
    check_patch_identity(kind, &patch, &ns, &name)?;
    let key = ObjectKey::new(ns, name);
    dispatch!(kind, patch_object(&state, kind, &key, patch, Part::Spec))
}

/// `PATCH .../{name}/status`: a JSON merge patch of the status.
pub(super) async fn patch_status<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    let kind = kind_of(&plural)?;
    let patch = read_json(&headers, body, state.config.max_body_bytes, MERGE_PATCH).await?;
    check_patch_identity(kind, &patch, &ns, &name)?;
    let key = ObjectKey::new(ns, name);
    dispatch!(kind, patch_object(&state, kind, &key, patch, Part::Status))
}

/// `POST .../sandboxes/{name}/suspend`: sets `spec.operatingMode: Suspended`.
pub(super) async fn suspend<S: ApiStore>(
    state: State<ApiState<S>>,
    path: Path<(String, String, String)>,
) -> Reply<Response> {
    set_mode(state, path, "Suspended").await
}

/// `POST .../sandboxes/{name}/resume`: sets `spec.operatingMode: Running`.
pub(super) async fn resume<S: ApiStore>(
    state: State<ApiState<S>>,
    path: Path<(String, String, String)>,
) -> Reply<Response> {
    set_mode(state, path, "Running").await
}

async fn set_mode<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    mode: &str,
) -> Reply<Response> {
    let kind = kind_of(&plural)?;
    if kind != Kind::Sandbox {
        return Err(Failure::no_route(&format!(
            "{plural}/{name}: only sandboxes suspend and resume"
        )));
    }
    let key = ObjectKey::new(ns, name);
    patch_object::<rouse_shared::api::Sandbox, S>(
        &state,
        kind,
        &key,
        json!({"spec": {"operatingMode": mode}}),
        Part::Spec,
    )
    .await
}

/// Which part of an object a patch writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Spec,
    Status,
}

/// Applies the patch to the current object, validates the result, then stores the patch
/// conditional on the version that was validated (retrying when the object moved meanwhile).
async fn patch_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    patch: Value,
    part: Part,
) -> Reply<Response> {
    let fail = |e: StoreError| Failure::from_store(kind, &e);
    let Some(store_patch) = Patch::merge(patch.clone()) else {
        return Err(Failure::bad_request("a merge patch must be a JSON object"));
    };
    let client_version = store_patch.resource_version().map(str::to_owned);
    for attempt in 1..=PATCH_ATTEMPTS {
        let current: K = state.store.get(key).await.map_err(fail)?;
        let current = Value::Object(to_object(&current)?);
        let mut patched = current.clone();
        merge_patch(&mut patched, &patch);
        // Each route writes only its part; keep the other as stored, as the store will.
        let kept = match part {
            Part::Spec => "status",
            Part::Status => "spec",
        };
        if let (Some(obj), Some(old)) = (patched.as_object_mut(), current.get(kept)) {
            obj.insert(kept.to_owned(), old.clone());
        }
        validated::<K>(kind, patched)?;
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
        match result {
            Ok(stored) => return Ok(Json(stored).into_response()),
            Err(StoreError::Conflict { .. })
                if client_version.is_none() && attempt < PATCH_ATTEMPTS =>
            {
                tracing::debug!(object.key = %key, patch.attempt = attempt, "object changed during patch; retrying");
            }
            Err(e) => return Err(fail(e)),
        }
    }
    Err(Failure::conflict(
        Subject {
            kind,
            name: &key.name,
        },
        "the object kept changing; try again",
    ))
}

/// `DELETE .../{name}`: delete, with an optional `?propagationPolicy=`.
pub(super) async fn delete<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Path((ns, plural, name)): Path<(String, String, String)>,
    q: Query_,
) -> Reply<Response> {
    let kind = kind_of(&plural)?;
    let q = query(q)?;
    let propagation = match q.get("propagationPolicy").map(String::as_str) {
        None => None,
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(other) => {
            return Err(Failure::bad_request(format!(
                "propagationPolicy must be Background, Foreground or Orphan, got {other:?}"
            )));
        }
    };
    let params = DeleteParams {
        propagation,
        ..DeleteParams::default()
    };
    let key = ObjectKey::new(ns, name);
    dispatch!(kind, delete_object(&state, kind, &key, &params))
}

async fn delete_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    params: &DeleteParams,
) -> Reply<Response> {
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

/// Fills in `apiVersion`, `kind` and `metadata.namespace` from the URL and rejects a body that
/// names another kind, namespace or (for a replace) name.
fn prepare(kind: Kind, value: &mut Value, ns: &str, url_name: Option<&str>) -> Reply<()> {
    let name = object_name(value);
    let subject = Subject { kind, name: &name };
    let Some(object) = value.as_object_mut() else {
        return Err(Failure::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let mut causes = Vec::new();
    for (field, want) in [
        ("apiVersion", kind.api_version()),
        ("kind", kind.kind().to_owned()),
    ] {
        match object.get(field) {
            None | Some(Value::Null) => {
                object.insert(field.to_owned(), Value::String(want));
            }
            Some(Value::String(got)) if *got == want => {}
            Some(got) => causes.push((
                field.to_owned(),
                format!("must be {want:?} to match the URL, got {got}"),
            )),
        }
    }
    if !causes.is_empty() {
        return Err(Failure::invalid(subject, &causes));
    }
    let meta = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return Err(Failure::invalid(
            subject,
            &[("metadata".to_owned(), "must be an object".to_owned())],
        ));
    };
    match meta.get("namespace").and_then(Value::as_str) {
        Some(given) if given != ns => {
            return Err(Failure::bad_request(format!(
                "the namespace of the provided object ({given}) does not match the namespace sent on the request ({ns})"
            )));
        }
        _ => {
            meta.insert("namespace".to_owned(), Value::String(ns.to_owned()));
        }
    }
    if let Some(url_name) = url_name {
        match meta.get("name").and_then(Value::as_str) {
            Some(given) if given != url_name => {
                return Err(Failure::bad_request(format!(
                    "the name of the object ({given}) does not match the name on the URL ({url_name})"
                )));
            }
            _ => {
                meta.insert("name".to_owned(), Value::String(url_name.to_owned()));
            }
        }
    }
    Ok(())
}

/// A merge patch may not move an object to another kind, namespace or name.
fn check_patch_identity(kind: Kind, patch: &Value, ns: &str, name: &str) -> Reply<()> {
    let subject = Subject { kind, name };
    let mut causes = Vec::new();
    let api_version = kind.api_version();
    for (pointer, field, want) in [
        ("/apiVersion", "apiVersion", api_version.as_str()),
        ("/kind", "kind", kind.kind()),
        ("/metadata/namespace", "metadata.namespace", ns),
        ("/metadata/name", "metadata.name", name),
    ] {
        if let Some(got) = patch.pointer(pointer)
            && got.as_str() != Some(want)
        {
            causes.push((field.to_owned(), format!("cannot be changed to {got}")));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Failure::invalid(subject, &causes))
    }
}

/// Checks a whole object with the manifest validator (what `rouse validate` runs), then reads
/// it as `K`; any error is a 422 naming the fields.
fn validated<K: StoreObject>(kind: Kind, value: Value) -> Reply<K> {
    let name = object_name(&value);
    let subject = Subject { kind, name: &name };
    let report = rouse_shared::validate::validate(&value);
    let causes: Vec<(String, String)> = report
        .findings
        .iter()
        .filter(|f| f.severity == rouse_shared::validate::Severity::Error)
        .map(|f| (f.path.to_string(), f.message.clone()))
        .collect();
    if !causes.is_empty() {
        return Err(Failure::invalid(subject, &causes));
    }
    serde_json::from_value(value)
        .map_err(|e| Failure::invalid(subject, &[(String::new(), e.to_string())]))
}

/// An object as a JSON map; 500 if it does not serialize to one (a typed object always does).
fn to_object<K: serde::Serialize>(object: &K) -> Reply<Map<String, Value>> {
    match serde_json::to_value(object) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Failure::internal(
            "object did not serialize to a JSON object",
        )),
        Err(e) => Err(Failure::internal(format!("cannot serialize object: {e}"))),
    }
}

fn resource_version(object: &Map<String, Value>) -> String {
    object
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `metadata.name`, or `generateName*`, for messages.
fn object_name(value: &Value) -> String {
    let text = |p: &str| value.pointer(p).and_then(Value::as_str);
    text("/metadata/name")
        .map(str::to_owned)
        .or_else(|| text("/metadata/generateName").map(|g| format!("{g}*")))
        .unwrap_or_default()
}
