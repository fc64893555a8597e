//! The read and create routes: list, get and create. Each handler resolves the URL's plural to a [`Kind`] and runs a
//! generic function for that kind's type.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use rouse_shared::store::{ListParams, ObjectKey, Store, StoreObject};
use serde_json::{Value, json};

use super::body::{JSON, read_json};
use super::check::{object_name, prepare, validated};
use super::kinds::{Kind, dispatch};
use super::query::{Options, QueryParams, flag, number, query};
use super::selector::{FieldSelector, parse_field_selector, parse_label_selector};
use super::state::{ApiState, ApiStore};
use super::status::{Failure, Reply, Subject};
use super::target::{Collection, Named};
use super::watch;

/// `GET /v1/{plural}` and `GET /v1/namespaces/{ns}/{plural}`: list or watch, in every
/// namespace or one.
pub(super) async fn list<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Collection { kind, namespace }: Collection,
    q: QueryParams,
    headers: HeaderMap,
) -> Reply<Response> {
    let q = query(q)?;
    let accept = super::table::Accept::from_headers(&headers);
    let selector = parse_label_selector(q.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| Failure::bad_request(format!("invalid labelSelector: {e}")))?;
    let fields = parse_field_selector(q.get("fieldSelector").map_or("", String::as_str))
        .map_err(|e| Failure::bad_request(format!("invalid fieldSelector: {e}")))?;
    let params = ListParams {
        namespace,
        selector,
    };
    if flag(&q, "watch")? {
        if let Some(version) = q.get("resourceVersion")
            && !version.is_empty()
            && version.parse::<u64>().is_err()
        {
            return Err(Failure::bad_request(format!(
                "invalid resourceVersion {version:?}: it must be a number as the server gave it"
            )));
        }
        let request = watch::WatchRequest {
            kind,
            params,
            fields,
            resource_version: q.get("resourceVersion").cloned(),
            timeout: number(&q, "timeoutSeconds")?.map(std::time::Duration::from_secs),
            bookmarks: flag(&q, "allowWatchBookmarks")?,
            initial_events: flag(&q, "sendInitialEvents")?,
            accept,
        };
        return watch::watch(state, request).await;
    }
    let freshness = super::freshness::Freshness::from_query(&q)?;
    let paging = super::page::Paging::from_query(&q)?;
    dispatch!(
        kind,
        list_objects(&state, kind, &params, &fields, &paging, freshness, &accept)
    )
}

async fn list_objects<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    params: &ListParams,
    fields: &FieldSelector,
    paging: &super::page::Paging,
    freshness: super::freshness::Freshness,
    accept: &super::table::Accept,
) -> Reply<Response> {
    let list = super::freshness::list_fresh(&state.store, kind, params, freshness).await?;
    let items: Vec<&K> = list
        .items
        .iter()
        .filter(|o| fields.matches(o.namespace().as_deref(), &o.name_any()))
        .collect();
    let page = super::page::Page::select(&items, &list.resource_version, paging)?;
    let mut metadata = json!({"resourceVersion": page.resource_version});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
        metadata["remainingItemCount"] = json!(page.remaining);
    }
    let value = json!({
        "apiVersion": kind.api_version(),
        "kind": format!("{}List", kind.kind()),
        "metadata": metadata,
        "items": page.items,
    });
    Ok(super::table::respond(kind, value, accept))
}

/// `GET .../{name}` and `GET .../{name}/status`: one object.
pub(super) async fn get<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Named { kind, key }: Named,
    headers: HeaderMap,
) -> Reply<Response> {
    let accept = super::table::Accept::from_headers(&headers);
    dispatch!(kind, get_object(&state, kind, &key, &accept))
}

/// `GET .../{name}/status`: the object, as Kubernetes returns it for the status subresource.
pub(super) async fn get_status<S: ApiStore>(
    state: State<ApiState<S>>,
    target: Named,
    headers: HeaderMap,
) -> Reply<Response> {
    get(state, target, headers).await
}

async fn get_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    key: &ObjectKey,
    accept: &super::table::Accept,
) -> Reply<Response> {
    let object: K = state
        .store
        .get(key)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    let value = serde_json::to_value(&object).map_err(|e| Failure::internal(e.to_string()))?;
    Ok(super::table::respond(kind, value, accept))
}

/// `POST /v1/namespaces/{ns}/{plural}`: create.
pub(super) async fn create<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Collection { kind, namespace }: Collection,
    q: QueryParams,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    let options = Options::from_query(&query(q)?)?;
    let Some(ns) = namespace else {
        return Err(Failure::method_not_allowed("POST"));
    };
    let mut value = read_json(&headers, body, &state.config, JSON).await?;
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
    dispatch!(kind, create_object(&state, kind, value, options.dry_run))
}

async fn create_object<K: StoreObject, S: Store<K>>(
    state: &ApiState<S>,
    kind: Kind,
    value: Value,
    dry_run: bool,
) -> Reply<Response> {
    super::bounds::check_object_size(kind, &object_name(&value), &value, &state.config)?;
    let object: K = validated(kind, value)?;
    if dry_run {
        // dryRun=All: what would be created, never stored.
        return Ok((StatusCode::CREATED, Json(object)).into_response());
    }
    let created = state
        .store
        .create(&object)
        .await
        .map_err(|e| Failure::from_store(kind, &e))?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}
