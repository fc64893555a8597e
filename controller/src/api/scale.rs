//! The `scale` subresource of warm pools (`autoscaling/v1` `Scale`), so `kubectl scale` and
//! autoscalers size a pool as on a cluster: `spec.replicas` is the pool's, `status.replicas`
//! and `status.selector` its status.

use axum::body::{Body, to_bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use rouse_shared::api::SandboxWarmPool;
use rouse_shared::store::{ObjectKey, Store};
use serde_json::{Value, json};

use super::body::{ANY_PATCH, JSON, read_body};
use super::kinds::Kind;
use super::merge::merge_patch;
use super::query::{Options, QueryParams, query};
use super::state::{ApiState, ApiStore};
use super::status::{Failure, Reply};
use super::target::Named;
use super::write::{Part, patch_object};

/// `GET .../sandboxwarmpools/{name}/scale`.
pub(super) async fn get<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Named { kind, key }: Named,
) -> Reply<Response> {
    only_pools(kind, &key)?;
    let pool = read(&state, &key).await?;
    Ok(axum::Json(scale(&pool)).into_response())
}

/// `PUT` or `PATCH .../sandboxwarmpools/{name}/scale`: sets the pool's `spec.replicas`.
pub(super) async fn update<S: ApiStore>(
    State(state): State<ApiState<S>>,
    Named { kind, key }: Named,
    method: axum::http::Method,
    q: QueryParams,
    headers: HeaderMap,
    body: Body,
) -> Reply<Response> {
    only_pools(kind, &key)?;
    let options = Options::from_query(&query(q)?)?;
    let accepted = if method == axum::http::Method::PUT {
        JSON
    } else {
        ANY_PATCH
    };
    let (media, bytes) = read_body(&headers, body, &state.config, accepted).await?;
    let pool = read(&state, &key).await?;
    let mut wanted = scale(&pool);
    let sent = match media.as_str() {
        "application/json-patch+json" => {
            let ops = super::patch::parse_json_patch(&bytes)?;
            super::bounds::apply_json_patch(&mut wanted, &ops, &state.config)?;
            Value::Null
        }
        "application/apply-patch+yaml" => {
            return Err(Failure::unsupported_media_type(&media, &[JSON[0]]));
        }
        _ => {
            let sent = super::body::parse_object(&bytes)?;
            if method == axum::http::Method::PUT {
                wanted = sent.clone();
            } else {
                merge_patch(&mut wanted, &sent);
            }
            sent
        }
    };
    let replicas = wanted
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .filter(|r| *r >= 0)
        .and_then(|r| i32::try_from(r).ok())
        .ok_or_else(|| Failure::bad_request("spec.replicas must be a non-negative integer"))?;
    let mut patch = json!({"spec": {"replicas": replicas}});
    if let Some(version) = sent.pointer("/metadata/resourceVersion") {
        patch["metadata"] = json!({"resourceVersion": version});
    }
    let response =
        patch_object::<SandboxWarmPool, S>(&state, kind, &key, patch, Part::Spec, options.dry_run)
            .await?;
    let bytes = to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| Failure::internal(e.to_string()))?;
    let pool: SandboxWarmPool =
        serde_json::from_slice(&bytes).map_err(|e| Failure::internal(e.to_string()))?;
    Ok(axum::Json(scale(&pool)).into_response())
}

fn only_pools(kind: Kind, key: &ObjectKey) -> Reply<()> {
    if kind == Kind::SandboxWarmPool {
        Ok(())
    } else {
        Err(Failure::no_route(&format!(
            "{}/{}/scale: only sandboxwarmpools have a scale subresource",
            kind.plural(),
            key.name
        )))
    }
}

async fn read<S: ApiStore>(state: &ApiState<S>, key: &ObjectKey) -> Reply<SandboxWarmPool> {
    Store::<SandboxWarmPool>::get(&state.store, key)
        .await
        .map_err(|e| Failure::from_store(Kind::SandboxWarmPool, &e))
}

/// The pool as a `Scale`.
fn scale(pool: &SandboxWarmPool) -> Value {
    let meta = &pool.metadata;
    let status = pool.status.as_ref();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "uid": meta.uid,
            "resourceVersion": meta.resource_version,
            "creationTimestamp": meta.creation_timestamp,
        },
        "spec": {"replicas": pool.spec.replicas},
        "status": {
            "replicas": status.map_or(0, |s| s.replicas),
            "selector": status.and_then(|s| s.selector.clone()).unwrap_or_default(),
        },
    })
}
