//! `?watch=true`: a stream of JSON watch events, one per line
//! (`{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}`), served as
//! `application/json` as kube-apiserver does (client-go rejects other stream types).
//!
//! Without a `resourceVersion` (or with `0`), or with `sendInitialEvents=true`, the stream starts
//! with an `ADDED` event per existing object, as Kubernetes does; with `sendInitialEvents=true`
//! those are followed by a `BOOKMARK` annotated `k8s.io/initial-events-end: "true"` (the
//! watch-list protocol `kubectl wait` and informers use). Objects are converted to a `Table` or
//! `PartialObjectMetadata` when the `Accept` header asks. Each stream holds one permit of the stream budget, ends
//! at its deadline (`timeoutSeconds`, capped by the config), on shutdown, and after an `ERROR`
//! event (`410 Expired` when the version is too old: list again).

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::{StreamExt, stream};
use kube::ResourceExt;
use rouse_shared::store::{ListParams, Store, StoreError, StoreObject, WatchEvent};
use serde_json::{Value, json};

use super::kinds::{Kind, dispatch};
use super::selector::FieldSelector;
use super::state::{ApiState, ApiStore};
use super::status::{Failure, Reply};

/// What a watch asks for.
pub(super) struct WatchRequest {
    pub kind: Kind,
    pub params: ListParams,
    pub fields: FieldSelector,
    pub resource_version: Option<String>,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    pub initial_events: bool,
    pub accept: super::table::Accept,
}

/// Starts a watch stream, or fails with 503 when the stream budget is spent.
pub(super) async fn watch<S: ApiStore>(
    state: ApiState<S>,
    request: WatchRequest,
) -> Reply<Response> {
    let kind = request.kind;
    dispatch!(kind, watch_kind(state, request))
}

/// Keeps a stream's permit and gauge for as long as the stream lives.
pub(super) struct StreamGuard {
    _permit: tokio::sync::OwnedSemaphorePermit,
    kind: &'static str,
}

impl StreamGuard {
    /// Takes a permit for a `kind` (`watch` or `log`) stream, or 503.
    pub(super) fn acquire<S>(state: &ApiState<S>, kind: &'static str) -> Reply<Self> {
        let permit = state.streams.clone().try_acquire_owned().map_err(|_| {
            metrics::counter!("rouse_controller_api_streams_rejected_total", "stream" => kind)
                .increment(1);
            Failure::unavailable(format!(
                "too many open watch and log streams (at most {}); try again later",
                state.config.max_streams
            ))
        })?;
        metrics::gauge!("rouse_controller_api_streams", "stream" => kind).increment(1.0);
        Ok(Self {
            _permit: permit,
            kind,
        })
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        metrics::gauge!("rouse_controller_api_streams", "stream" => self.kind).decrement(1.0);
    }
}

/// How long a stream may stay open: the client's timeout, capped by the config.
pub(super) fn deadline<S>(state: &ApiState<S>, asked: Option<Duration>) -> Duration {
    let cap = state.config.max_stream_duration;
    asked.map_or(cap, |t| t.min(cap))
}

async fn watch_kind<K: StoreObject, S: Store<K>>(
    state: ApiState<S>,
    request: WatchRequest,
) -> Reply<Response> {
    let guard = StreamGuard::acquire(&state, "watch")?;
    let kind = request.kind;
    let fields = request.fields.clone();
    let selected =
        move |object: &K| fields.matches(object.namespace().as_deref(), &object.name_any());
    let mut initial = Vec::new();
    let accept = request.accept;
    let first = std::sync::atomic::AtomicBool::new(true);
    let render = move |object: Value| {
        let is_first = first.swap(false, std::sync::atomic::Ordering::Relaxed);
        super::table::convert(kind, object, &accept, is_first)
    };
    let value = |object: &K| serde_json::to_value(object).unwrap_or(Value::Null);
    let version = match request.resource_version.as_deref() {
        Some(v) if !v.is_empty() && v != "0" && !request.initial_events => v.to_owned(),
        _ => {
            let list = state
                .store
                .list(&request.params)
                .await
                .map_err(|e| Failure::from_store(kind, &e))?;
            for object in list.items.iter().filter(|o| selected(o)) {
                initial.push(line("ADDED", &render(value(object))));
            }
            if request.initial_events {
                initial.push(line(
                    "BOOKMARK",
                    &json!({
                        "apiVersion": kind.api_version(),
                        "kind": kind.kind(),
                        "metadata": {
                            "resourceVersion": list.resource_version,
                            "annotations": {"k8s.io/initial-events-end": "true"},
                        },
                    }),
                ));
            }
            list.resource_version
        }
    };
    let events = match state.store.watch(&request.params, &version).await {
        Ok(events) => events,
        // Kubernetes answers a too-old version with a 200 stream holding one ERROR event.
        Err(e @ StoreError::Expired { .. }) => stream::iter([Err(e)]).boxed(),
        Err(e) => return Err(Failure::from_store(kind, &e)),
    };
    let bookmarks = request.bookmarks;
    let live = events
        .scan(false, move |ended, event| {
            if *ended {
                return futures::future::ready(None);
            }
            let out = match event {
                Ok(WatchEvent::Added(o)) => selected(&o).then(|| line("ADDED", &render(value(&o)))),
                Ok(WatchEvent::Modified(o)) => {
                    selected(&o).then(|| line("MODIFIED", &render(value(&o))))
                }
                Ok(WatchEvent::Deleted(o)) => {
                    selected(&o).then(|| line("DELETED", &render(value(&o))))
                }
                Ok(WatchEvent::Bookmark { resource_version }) => bookmarks.then(|| {
                    line(
                        "BOOKMARK",
                        &json!({
                            "apiVersion": kind.api_version(),
                            "kind": kind.kind(),
                            "metadata": {"resourceVersion": resource_version},
                        }),
                    )
                }),
                Err(e) => {
                    *ended = true;
                    tracing::debug!(watch.kind = kind.plural(), error = %e, "watch ended with an error");
                    Some(line("ERROR", &Failure::from_store(kind, &e).to_json()))
                }
            };
            futures::future::ready(Some(out))
        })
        .filter_map(futures::future::ready);
    let stop = {
        let shutdown = state.shutdown.clone();
        let limit = deadline(&state, request.timeout);
        async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(limit) => {}
            }
        }
    };
    let body = stream::iter(initial)
        .chain(live)
        .take_until(Box::pin(stop))
        .map(move |bytes| {
            // The guard lives as long as the stream, holding the permit.
            let _alive = &guard;
            Ok::<_, Infallible>(bytes)
        });
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response())
}

/// One event as a line of JSON.
fn line(kind: &str, object: &impl serde::Serialize) -> Bytes {
    let event = json!({"type": kind, "object": object});
    let mut bytes = serde_json::to_vec(&event).unwrap_or_else(|_| {
        // A typed object always serializes; keep the stream well-formed if one ever does not.
        serde_json::to_vec(&json!({"type": "ERROR", "object": Value::Null})).unwrap_or_default()
    });
    bytes.push(b'\n');
    Bytes::from(bytes)
}
