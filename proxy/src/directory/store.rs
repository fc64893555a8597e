//! [`StoreDirectory`]: routes from Sandbox objects in a [`Store`], in both modes.
//!
//! A task lists the Sandboxes, sends their states, then follows the watch; on `Expired` or a
//! closed watch it lists again and sends `Missing` for sandboxes that vanished meanwhile. Store
//! failures back off (100 ms doubling to 5 s) and retry; the proxy keeps routing on the last
//! known table in the meantime.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use futures::stream::{self, BoxStream, StreamExt};
use rouse_shared::api::Sandbox;
use rouse_shared::store::{
    Backoff, ListParams, ObjectKey, Patch, Seen, Store, StoreError, list_watch,
};
use serde_json::json;
use tokio::sync::mpsc;

use super::contract::{
    ActivityReport, Directory, DirectoryError, Result, RouteState, RouteUpdate, SandboxKey,
};
use super::derive::route_state;
use super::static_routes::diff;

/// Updates buffered between the watch task and the routing table.
const UPDATE_BUFFER: usize = 1024;
const BACKOFF_INITIAL: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// A directory on `Store<Sandbox>`: watch for routes, merge patches for wakes and activity.
#[derive(Debug, Clone)]
pub struct StoreDirectory<S> {
    store: S,
    params: ListParams,
}

impl<S> StoreDirectory<S>
where
    S: Store<Sandbox> + Clone + 'static,
{
    /// A directory over every namespace of the store.
    pub fn new(store: S) -> Self {
        Self {
            store,
            params: ListParams::default(),
        }
    }

    /// A directory over the sandboxes `params` selects.
    pub fn with_params(store: S, params: ListParams) -> Self {
        Self { store, params }
    }
}

/// Follows the store's sandboxes (the shared list-watch-relist loop) and turns them into
/// route updates, until the receiver goes away.
async fn follow<S>(store: S, params: ListParams, tx: mpsc::Sender<RouteUpdate>)
where
    S: Store<Sandbox> + 'static,
{
    let mut known: BTreeMap<SandboxKey, RouteState> = BTreeMap::new();
    let mut seen = list_watch(store, params, Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX));
    loop {
        let item = tokio::select! {
            item = seen.next() => item,
            () = tx.closed() => return,
        };
        let (key, state) = match item {
            None => return,
            Some(Seen::Failed(err)) => {
                if !matches!(err, StoreError::Expired { .. }) {
                    tracing::warn!(error = %err, "listing or watching sandboxes failed; listing again");
                    metrics::counter!("rouse_proxy_directory_errors_total", "kind" => err.metric_label()).increment(1);
                }
                continue;
            }
            Some(Seen::Listed(items)) => {
                let now: BTreeMap<SandboxKey, RouteState> = items
                    .iter()
                    .map(|sb| (ObjectKey::of(sb), route_state(sb)))
                    .filter(|(_, state)| *state != RouteState::Missing)
                    .collect();
                for update in diff(&known, &now).into_iter().chain([RouteUpdate::Synced]) {
                    if tx.send(update).await.is_err() {
                        return;
                    }
                }
                known = now;
                continue;
            }
            Some(Seen::Applied(sb)) => (ObjectKey::of(&sb), route_state(&sb)),
            Some(Seen::Deleted(sb)) => (ObjectKey::of(&sb), RouteState::Missing),
        };
        if known.get(&key) == Some(&state) {
            continue;
        }
        if state == RouteState::Missing {
            known.remove(&key);
        } else {
            known.insert(key.clone(), state.clone());
        }
        if tx.send(RouteUpdate::Set { key, state }).await.is_err() {
            return;
        }
    }
}

impl<S> Directory for StoreDirectory<S>
where
    S: Store<Sandbox> + Clone + 'static,
{
    fn updates(&self) -> BoxStream<'static, RouteUpdate> {
        let (tx, rx) = mpsc::channel(UPDATE_BUFFER);
        // The task is owned by the returned stream: it ends when the stream is dropped.
        tokio::spawn(follow(self.store.clone(), self.params.clone(), tx));
        stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|u| (u, rx)) }).boxed()
    }

    fn wake(&self, key: &SandboxKey) -> BoxFuture<'static, Result<()>> {
        let store = self.store.clone();
        let key = key.clone();
        async move {
            let patch = Patch::merge(json!({"spec": {"operatingMode": "Running"}}));
            let Some(patch) = patch else {
                return Ok(());
            };
            match store.patch(&key, &patch).await {
                Ok(_) => Ok(()),
                Err(err) if err.is_not_found() => Err(DirectoryError::NotFound { key }),
                Err(source) => Err(DirectoryError::Store { key, source }),
            }
        }
        .boxed()
    }

    fn report_activity(
        &self,
        key: &SandboxKey,
        report: ActivityReport,
    ) -> BoxFuture<'static, Result<()>> {
        let store = self.store.clone();
        let key = key.clone();
        async move {
            let at = jiff::Timestamp::try_from(report.at)
                .unwrap_or_else(|_| jiff::Timestamp::now())
                .round(jiff::Unit::Second)
                .unwrap_or_else(|_| jiff::Timestamp::now());
            let patch = Patch::merge(json!({"status": {"lastActivityTime": at.to_string()}}));
            let Some(patch) = patch else {
                return Ok(());
            };
            match store.patch_status(&key, &patch).await {
                Ok(_) => Ok(()),
                Err(err) if err.is_not_found() => Err(DirectoryError::NotFound { key }),
                Err(source) => Err(DirectoryError::Store { key, source }),
            }
        }
        .boxed()
    }
}
