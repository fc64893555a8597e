//! The `Store` on a Kubernetes API server through kube-rs: one [`KubeStore`] holding a
//! `kube::Client` serves every Rouse kind.
//!
//! Errors are classified by the HTTP code and `reason` of the API server's `Status`, never by
//! message text. Every call is bounded by a deadline, so a hung API server surfaces as
//! [`StoreError::Unavailable`] instead of a stuck reconcile.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::{Api, PostParams, Preconditions, PropagationPolicy, WatchParams};
use kube::core::{Status, WatchEvent as KubeEvent};

use super::{
    DeleteParams, Deletion, ListParams, ObjectKey, ObjectList, Patch, Propagation, Result, Store,
    StoreError, StoreObject, WatchEvent, WatchStream,
};

/// Default deadline of one API call (a watch's is only for opening the stream).
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Server-side timeout asked for every watch: the stream ends after it and the caller
/// watches again from its last version (the same bound kube-runtime's watcher uses).
const WATCH_TIMEOUT_SECONDS: u32 = 290;

/// A [`Store`] backed by the Kubernetes API server; cheap to clone.
///
/// # Example
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use rouse_shared::api::Sandbox;
/// use rouse_shared::store::{KubeStore, ObjectKey, Store};
///
/// let store = KubeStore::new(kube::Client::try_default().await?);
/// let sandbox: Sandbox = store.get(&ObjectKey::new("default", "alice")).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct KubeStore {
    client: kube::Client,
    call_timeout: Duration,
}

impl std::fmt::Debug for KubeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeStore")
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

impl KubeStore {
    /// A store using `client`, with a 30 s deadline per call.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// Sets the deadline of each call.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The underlying client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    fn api<K: StoreObject>(&self, namespace: Option<&str>) -> Api<K> {
        match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// Runs one call under the deadline, maps its error and counts it.
    async fn call<T, K: StoreObject>(
        &self,
        op: &'static str,
        context: Context<'_>,
        call: impl Future<Output = kube::Result<T>>,
    ) -> Result<T> {
        let started = Instant::now();
        let result = match tokio::time::timeout(self.call_timeout, call).await {
            Ok(result) => result.map_err(|e| classify::<K>(e, &context)),
            Err(_) => Err(StoreError::Unavailable {
                message: format!(
                    "{op} {} did not answer within {:?}",
                    K::kind(&()),
                    self.call_timeout
                ),
                source: None,
            }),
        };
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.metric_label(),
        };
        metrics::counter!("rouse_store_requests_total", "backend" => "kube", "op" => op, "result" => outcome)
            .increment(1);
        metrics::histogram!("rouse_store_request_duration_seconds", "backend" => "kube", "op" => op)
            .record(started.elapsed().as_secs_f64());
        result
    }
}

/// What a call was about, for the error it may return.
enum Context<'a> {
    /// One object.
    Object(&'a ObjectKey),
    /// A list or watch; `resource_version` where a watch started.
    Collection { resource_version: &'a str },
}

/// Maps a kube error to a [`StoreError`] by HTTP code and reason.
fn classify<K: StoreObject>(error: kube::Error, context: &Context<'_>) -> StoreError {
    match error {
        kube::Error::Api(status) => classify_status::<K>(*status, context),
        other => StoreError::Unavailable {
            message: format!("calling the Kubernetes API for {}", K::kind(&())),
            source: Some(Box::new(other)),
        },
    }
}

fn classify_status<K: StoreObject>(status: Status, context: &Context<'_>) -> StoreError {
    let kind = K::kind(&()).into_owned();
    let key = match context {
        Context::Object(key) => (*key).clone(),
        Context::Collection { .. } => ObjectKey::new("", ""),
    };
    match (status.code, status.reason.as_str(), context) {
        (410, _, Context::Collection { resource_version }) => StoreError::Expired {
            resource_version: (*resource_version).to_owned(),
        },
        (404, _, Context::Object(_)) => StoreError::NotFound { kind, key },
        (409, "AlreadyExists", _) => StoreError::AlreadyExists { kind, key },
        (409, _, _) => StoreError::Conflict {
            kind,
            key,
            message: status.message,
        },
        (400 | 415 | 422, _, _) => StoreError::Invalid {
            kind,
            key,
            message: status.message,
        },
        (code, reason, _) => StoreError::Unavailable {
            message: format!(
                "the Kubernetes API answered {code} {reason} for {kind}: {}",
                status.message
            ),
            source: None,
        },
    }
}

fn delete_params(params: &DeleteParams) -> kube::api::DeleteParams {
    let preconditions =
        (params.uid.is_some() || params.resource_version.is_some()).then(|| Preconditions {
            uid: params.uid.clone(),
            resource_version: params.resource_version.clone(),
        });
    kube::api::DeleteParams {
        preconditions,
        propagation_policy: params.propagation.map(|p| match p {
            Propagation::Background => PropagationPolicy::Background,
            Propagation::Foreground => PropagationPolicy::Foreground,
            Propagation::Orphan => PropagationPolicy::Orphan,
        }),
        ..kube::api::DeleteParams::default()
    }
}

fn watch_event<K: StoreObject>(
    event: KubeEvent<K>,
    resource_version: &str,
) -> Result<WatchEvent<K>> {
    match event {
        KubeEvent::Added(o) => Ok(WatchEvent::Added(o)),
        KubeEvent::Modified(o) => Ok(WatchEvent::Modified(o)),
        KubeEvent::Deleted(o) => Ok(WatchEvent::Deleted(o)),
        KubeEvent::Bookmark(b) => Ok(WatchEvent::Bookmark {
            resource_version: b.metadata.resource_version,
        }),
        KubeEvent::Error(status) => Err(classify_status::<K>(
            *status,
            &Context::Collection { resource_version },
        )),
    }
}

impl<K: StoreObject> Store<K> for KubeStore {
    async fn get(&self, key: &ObjectKey) -> Result<K> {
        let api = self.api::<K>(Some(&key.namespace));
        self.call::<_, K>("get", Context::Object(key), api.get(&key.name))
            .await
    }

    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>> {
        let api = self.api::<K>(params.namespace.as_deref());
        let lp = kube::api::ListParams::default().labels_from(&params.selector);
        let context = Context::Collection {
            resource_version: "",
        };
        let list = self.call::<_, K>("list", context, api.list(&lp)).await?;
        let mut items = list.items;
        items.sort_by_key(|o| (o.namespace(), o.name_any()));
        Ok(ObjectList {
            items,
            resource_version: list.metadata.resource_version.unwrap_or_default(),
        })
    }

    async fn create(&self, object: &K) -> Result<K> {
        let key = ObjectKey::of(object);
        let api = self.api::<K>(Some(&key.namespace));
        let pp = PostParams::default();
        self.call::<_, K>("create", Context::Object(&key), api.create(&pp, object))
            .await
    }

    async fn patch(&self, key: &ObjectKey, patch: &Patch) -> Result<K> {
        let api = self.api::<K>(Some(&key.namespace));
        let Patch::Merge(body) = patch;
        let pp = kube::api::PatchParams::default();
        let body = kube::api::Patch::Merge(body);
        let call = api.patch(&key.name, &pp, &body);
        self.call::<_, K>("patch", Context::Object(key), call).await
    }

    async fn patch_status(&self, key: &ObjectKey, patch: &Patch) -> Result<K> {
        let api = self.api::<K>(Some(&key.namespace));
        let Patch::Merge(body) = patch;
        let pp = kube::api::PatchParams::default();
        let body = kube::api::Patch::Merge(body);
        let call = api.patch_status(&key.name, &pp, &body);
        self.call::<_, K>("patch_status", Context::Object(key), call)
            .await
    }

    async fn delete(&self, key: &ObjectKey, params: &DeleteParams) -> Result<Deletion<K>> {
        let api = self.api::<K>(Some(&key.namespace));
        let dp = delete_params(params);
        let outcome = self
            .call::<_, K>("delete", Context::Object(key), api.delete(&key.name, &dp))
            .await?;
        match outcome.left() {
            Some(object) if object.meta().deletion_timestamp.is_some() => {
                Ok(Deletion::Pending(object))
            }
            Some(object) => Ok(Deletion::Deleted(object)),
            // Custom resources always get the deleted object back; a bare success Status
            // leaves nothing to return, so the caller re-reads (and will see NotFound).
            None => Err(StoreError::Unavailable {
                message: format!(
                    "the Kubernetes API deleted {} {key} without returning the object",
                    K::kind(&())
                ),
                source: None,
            }),
        }
    }

    async fn watch(&self, params: &ListParams, resource_version: &str) -> Result<WatchStream<K>> {
        let api = self.api::<K>(params.namespace.as_deref());
        let wp = WatchParams::default()
            .labels_from(&params.selector)
            .timeout(WATCH_TIMEOUT_SECONDS);
        let context = Context::Collection { resource_version };
        let stream = self
            .call::<_, K>("watch", context, api.watch(&wp, resource_version))
            .await?;
        let start = resource_version.to_owned();
        let events = stream
            .map_err({
                let start = start.clone();
                move |e| {
                    classify::<K>(
                        e,
                        &Context::Collection {
                            resource_version: &start,
                        },
                    )
                }
            })
            .and_then(move |event| {
                let mapped = watch_event(event, &start);
                async move { mapped }
            });
        Ok(events.boxed())
    }
}
