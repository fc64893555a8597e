//! `Store<K>` for every kind: encodes requests to JSON for the untyped core, decodes what it
//! returns, and records the operation metrics.

use std::time::{Duration, Instant};

use futures::StreamExt;
use redb::{ReadTransaction, ReadableDatabase};
use rouse_shared::store::{
    DeleteParams, Deletion, ListParams, ObjectKey, ObjectList, Patch, Result, Store, StoreError,
    StoreObject, WatchStream,
};
use serde_json::Value;
use tokio::sync::oneshot;

use super::EmbeddedStore;
use super::meta::Part;
use super::ops::{Op, Outcome};
use super::select::selects;
use super::tables::{self, META, OBJECTS, get_object, list_objects, unavailable};
use super::watch::into_stream;
use super::writer::{Answers, Request};

/// How long a watch from a version just ahead of the watch history waits for it (kube-apiserver
/// waits 3 s for its cache before answering "Too large resource version").
const TOO_LARGE_VERSION_WAIT: Duration = Duration::from_secs(3);

fn kind_of<K: StoreObject>() -> String {
    K::kind(&()).into_owned()
}

/// Round-trips an object through `K`: the typed check of every write.
fn check<K: StoreObject>(value: Value) -> std::result::Result<Value, String> {
    let object: K = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        format!("{path}: {}", e.into_inner())
    })?;
    serde_json::to_value(&object).map_err(|e| e.to_string())
}

fn decode<K: StoreObject>(value: Value) -> Result<K> {
    serde_json::from_value(value).map_err(|e| StoreError::Unavailable {
        message: format!("stored object does not decode as {}: {e}", K::kind(&())),
        source: Some(Box::new(e)),
    })
}

fn closed() -> StoreError {
    StoreError::Unavailable {
        message: "the store is closed".into(),
        source: None,
    }
}

/// Counts and times one operation.
pub(super) fn observe<T>(op: &'static str, kind: &str, started: Instant, result: &Result<T>) {
    let label = match result {
        Ok(_) => "ok",
        Err(err) => err.metric_label(),
    };
    metrics::counter!("rouse_store_operations_total", "op" => op, "kind" => kind.to_owned(), "result" => label)
        .increment(1);
    metrics::histogram!("rouse_store_operation_duration_seconds", "op" => op)
        .record(started.elapsed().as_secs_f64());
}

impl EmbeddedStore {
    /// Runs a read on the blocking pool against a snapshot.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let db = self.inner.storage.db()?;
        tokio::task::spawn_blocking(move || {
            let tx = db.begin_read().map_err(|e| unavailable("begin read", e))?;
            f(&tx)
        })
        .await
        .map_err(|e| StoreError::Unavailable {
            message: format!("store read task failed: {e}"),
            source: Some(Box::new(e)),
        })?
    }

    /// Hands a write to the writer and waits for its commit.
    async fn write(&self, op: Op) -> Result<Outcome> {
        let (reply, answer) = oneshot::channel();
        let answers = self.submit(Request::one(op, reply), answer).await?;
        // One operation gets exactly one answer.
        answers
            .into_iter()
            .flatten()
            .next()
            .unwrap_or_else(|| Err(closed()))
    }

    /// Hands `request` to the writer and waits for its answers (`answer` is its reply's
    /// receiving end), at most the write timeout.
    pub(super) async fn submit(
        &self,
        request: Request,
        answer: oneshot::Receiver<Answers>,
    ) -> Result<Vec<Vec<Result<Outcome>>>> {
        // While the file is down a write fails at once with the reason, not after the queue.
        self.inner.storage.check()?;
        let writer = self.inner.writer.as_ref().ok_or_else(closed)?;
        let timeout = self.inner.write_timeout;
        let wait = async {
            writer.send(request).await.map_err(|_| closed())?;
            answer.await.map_err(|_| closed())?
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| StoreError::Unavailable {
                message: format!(
                    "write not acknowledged within {}; it may still be applied",
                    humantime::format_duration(timeout)
                ),
                source: None,
            })?
    }

    /// Hands a merge patch of `K` (metadata and spec, like [`Store::patch`]) to the writer and
    /// returns once it is queued: every write queued later commits after it. The returned
    /// future is its answer, which comes once the commit is durable; dropping it does not
    /// withdraw the write.
    pub async fn queue_patch<K: StoreObject>(
        &self,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<impl Future<Output = Result<K>> + Send + 'static> {
        let started = Instant::now();
        self.inner.storage.check()?;
        let writer = self.inner.writer.as_ref().ok_or_else(closed)?;
        let op = patch_op::<K>(key, patch, Part::Main);
        let (reply, answer) = oneshot::channel();
        writer
            .send(Request::one(op, reply))
            .await
            .map_err(|_| closed())?;
        let timeout = self.inner.write_timeout;
        Ok(async move {
            let result = match tokio::time::timeout(timeout, answer).await {
                Ok(Ok(Ok(answers))) => match answers.into_iter().flatten().next() {
                    Some(Ok(Outcome::Stored(v) | Outcome::Deleted(v) | Outcome::Pending(v))) => {
                        decode(v)
                    }
                    Some(Err(err)) => Err(err),
                    None => Err(closed()),
                },
                Ok(Ok(Err(err))) => Err(err),
                Ok(Err(_)) => Err(closed()),
                Err(_) => Err(StoreError::Unavailable {
                    message: format!(
                        "write not acknowledged within {}; it may still be applied",
                        humantime::format_duration(timeout)
                    ),
                    source: None,
                }),
            };
            observe("patch", &kind_of::<K>(), started, &result);
            result
        })
    }

    /// Reads one object on the calling thread, not the blocking pool: for the direct wake,
    /// where the hop to a pool thread costs more than the read (a snapshot read of one key
    /// from cached pages takes microseconds and never waits for the writer).
    pub fn get_now<K: StoreObject>(&self, key: &ObjectKey) -> Result<K> {
        let started = Instant::now();
        let kind = kind_of::<K>();
        let result = self
            .inner
            .storage
            .db()
            .and_then(|db| db.begin_read().map_err(|e| unavailable("begin read", e)))
            .and_then(|tx| {
                let table = tx
                    .open_table(OBJECTS)
                    .map_err(|e| unavailable("open objects table", e))?;
                get_object(&table, &kind, &key.namespace, &key.name)?.ok_or_else(|| {
                    StoreError::NotFound {
                        kind: kind.clone(),
                        key: key.clone(),
                    }
                })
            })
            .and_then(decode);
        observe("get", &kind, started, &result);
        result
    }

    async fn get_value<K: StoreObject>(&self, key: &ObjectKey) -> Result<K> {
        let kind = kind_of::<K>();
        let key = key.clone();
        let value = self
            .read(move |tx| {
                let table = tx
                    .open_table(OBJECTS)
                    .map_err(|e| unavailable("open objects table", e))?;
                get_object(&table, &kind, &key.namespace, &key.name)?
                    .ok_or(StoreError::NotFound { kind, key })
            })
            .await?;
        decode(value)
    }

    async fn list_values<K: StoreObject>(&self, params: &ListParams) -> Result<ObjectList<K>> {
        let kind = kind_of::<K>();
        let params = params.clone();
        let (rv, values) = self
            .read(move |tx| {
                let meta = tx
                    .open_table(META)
                    .map_err(|e| unavailable("open meta table", e))?;
                let table = tx
                    .open_table(OBJECTS)
                    .map_err(|e| unavailable("open objects table", e))?;
                let mut values = list_objects(&table, &kind, params.namespace.as_deref())?;
                values.retain(|v| selects(&params, v));
                Ok((tables::resource_version(&meta)?, values))
            })
            .await?;
        Ok(ObjectList {
            items: values.into_iter().map(decode).collect::<Result<_>>()?,
            resource_version: rv.to_string(),
        })
    }

    async fn create_value<K: StoreObject>(&self, object: &K) -> Result<K> {
        let kind = kind_of::<K>();
        let namespace = ObjectKey::of(object).namespace;
        let value = serde_json::to_value(object).map_err(|e| StoreError::Invalid {
            kind: kind.clone(),
            key: ObjectKey::of(object),
            message: format!("cannot encode the object: {e}"),
        })?;
        match self
            .write(Op::Create {
                kind,
                namespace,
                object: value,
                check: check::<K>,
            })
            .await?
        {
            Outcome::Stored(v) | Outcome::Deleted(v) | Outcome::Pending(v) => decode(v),
        }
    }

    async fn patch_value<K: StoreObject>(
        &self,
        key: &ObjectKey,
        patch: &Patch,
        part: Part,
    ) -> Result<K> {
        match self.write(patch_op::<K>(key, patch, part)).await? {
            Outcome::Stored(v) | Outcome::Deleted(v) | Outcome::Pending(v) => decode(v),
        }
    }

    async fn delete_value<K: StoreObject>(
        &self,
        key: &ObjectKey,
        params: &DeleteParams,
    ) -> Result<Deletion<K>> {
        let op = Op::Delete {
            kind: kind_of::<K>(),
            key: key.clone(),
            params: params.clone(),
        };
        Ok(match self.write(op).await? {
            Outcome::Deleted(v) | Outcome::Stored(v) => Deletion::Deleted(decode(v)?),
            Outcome::Pending(v) => Deletion::Pending(decode(v)?),
        })
    }

    async fn watch_values<K: StoreObject>(
        &self,
        params: &ListParams,
        resource_version: &str,
    ) -> Result<WatchStream<K>> {
        let kind = kind_of::<K>();
        let from = match resource_version {
            "" | "0" => None,
            rv => Some(rv.parse::<u64>().map_err(|_| StoreError::Invalid {
                kind: kind.clone(),
                key: ObjectKey::new(params.namespace.clone().unwrap_or_default(), ""),
                message: format!("resourceVersion {rv:?} is not a version this store issued"),
            })?),
        };
        // A version a moment ahead of the watch history (a list that read a commit the hub
        // has not published yet) is waited for, at most as long as kube-apiserver waits for
        // its cache; a version the store never reached then gets `TooLargeResourceVersion`.
        let fresh_by = Instant::now() + TOO_LARGE_VERSION_WAIT;
        loop {
            match self.subscribe_from::<K>(&kind, params, from).await {
                Err(StoreError::TooLargeResourceVersion { .. }) if Instant::now() < fresh_by => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                result => return result,
            }
        }
    }

    /// One attempt of [`watch_values`](Self::watch_values): subscribes to the hub.
    async fn subscribe_from<K: StoreObject>(
        &self,
        kind: &str,
        params: &ListParams,
        from: Option<u64>,
    ) -> Result<WatchStream<K>> {
        let kind = kind.to_owned();
        let hub = self.inner.hub.clone();
        let storage = self.inner.storage.clone();
        let params = params.clone();
        let sub = tokio::task::spawn_blocking(move || match from {
            Some(from) => hub.subscribe(&kind, &params, from),
            None => hub.subscribe_current(&kind, &params, || {
                let db = storage.db()?;
                let tx = db.begin_read().map_err(|e| unavailable("begin read", e))?;
                let meta = tx
                    .open_table(META)
                    .map_err(|e| unavailable("open meta table", e))?;
                let table = tx
                    .open_table(OBJECTS)
                    .map_err(|e| unavailable("open objects table", e))?;
                let objects = list_objects(&table, &kind, params.namespace.as_deref())?;
                Ok((tables::resource_version(&meta)?, objects))
            }),
        })
        .await
        .map_err(|e| StoreError::Unavailable {
            message: format!("store watch task failed: {e}"),
            source: Some(Box::new(e)),
        })?;
        match sub {
            Ok(sub) => Ok(into_stream::<K>(sub)),
            // Like the API server, a too-old version is the stream's first (and only) item.
            Err(expired @ StoreError::Expired { .. }) => {
                Ok(futures::stream::once(async { Err(expired) }).boxed())
            }
            Err(err) => Err(err),
        }
    }
}

impl<K: StoreObject> Store<K> for EmbeddedStore {
    async fn get(&self, key: &ObjectKey) -> Result<K> {
        let started = Instant::now();
        let result = self.get_value::<K>(key).await;
        observe("get", &kind_of::<K>(), started, &result);
        result
    }

    async fn list(&self, params: &ListParams) -> Result<ObjectList<K>> {
        let started = Instant::now();
        let result = self.list_values::<K>(params).await;
        observe("list", &kind_of::<K>(), started, &result);
        result
    }

    async fn create(&self, object: &K) -> Result<K> {
        let started = Instant::now();
        let result = self.create_value::<K>(object).await;
        observe("create", &kind_of::<K>(), started, &result);
        result
    }

    async fn patch(&self, key: &ObjectKey, patch: &Patch) -> Result<K> {
        let started = Instant::now();
        let result = self.patch_value::<K>(key, patch, Part::Main).await;
        observe("patch", &kind_of::<K>(), started, &result);
        result
    }

    async fn patch_status(&self, key: &ObjectKey, patch: &Patch) -> Result<K> {
        let started = Instant::now();
        let result = self.patch_value::<K>(key, patch, Part::Status).await;
        observe("patch_status", &kind_of::<K>(), started, &result);
        result
    }

    async fn delete(&self, key: &ObjectKey, params: &DeleteParams) -> Result<Deletion<K>> {
        let started = Instant::now();
        let result = self.delete_value::<K>(key, params).await;
        observe("delete", &kind_of::<K>(), started, &result);
        result
    }

    async fn watch(&self, params: &ListParams, resource_version: &str) -> Result<WatchStream<K>> {
        let started = Instant::now();
        let result = self.watch_values::<K>(params, resource_version).await;
        observe("watch", &kind_of::<K>(), started, &result);
        result
    }
}

/// The writer's operation for a merge patch of `part` of `K`'s object `key`.
pub(super) fn patch_op<K: StoreObject>(key: &ObjectKey, patch: &Patch, part: Part) -> Op {
    let Patch::Merge(map) = patch;
    Op::Patch {
        kind: kind_of::<K>(),
        key: key.clone(),
        precondition: patch.resource_version().map(str::to_owned),
        patch: map.clone(),
        part,
        check: check::<K>,
    }
}
