//! Feeds the driver with the sandboxes of a store: a list, then a watch from its version;
//! `Expired`, an error or the end of the stream lead to a new list after a bounded backoff.

use std::time::Duration;

use futures::StreamExt;
use rouse_shared::api::Sandbox;
use rouse_shared::store::{ListParams, ObjectKey, Store, StoreError, WatchEvent};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The first wait after a failed list or watch.
const RETRY_MIN: Duration = Duration::from_millis(250);
/// The longest wait after failed lists or watches.
const RETRY_MAX: Duration = Duration::from_secs(30);

/// What the feed tells the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Feed {
    /// A full list: every sandbox that exists now.
    Listed(Vec<ObjectKey>),
    /// A sandbox was added or changed.
    Changed(ObjectKey),
    /// A sandbox was deleted.
    Deleted(ObjectKey),
}

/// Lists and watches until `shutdown`; sends block when the driver lags (the channel is
/// bounded), which slows the watch down instead of dropping events.
pub(crate) async fn run<S: Store<Sandbox>>(
    store: S,
    tx: mpsc::Sender<Feed>,
    shutdown: CancellationToken,
) {
    let params = ListParams::default();
    let mut retry = RETRY_MIN;
    while !shutdown.is_cancelled() {
        match list_and_watch(&store, &params, &tx, &shutdown).await {
            Ok(()) => retry = RETRY_MIN,
            Err(error) => {
                metrics::counter!("rouse_controller_watch_restarts_total", "kind" => error.metric_label())
                    .increment(1);
                if matches!(error, StoreError::Expired { .. }) {
                    tracing::debug!(%error, "sandbox watch expired; listing again");
                    continue;
                }
                tracing::warn!(%error, retry_ms = retry.as_millis() as u64, "sandbox list or watch failed");
                tokio::select! {
                    () = tokio::time::sleep(retry) => {}
                    () = shutdown.cancelled() => return,
                }
                retry = (retry * 2).min(RETRY_MAX);
            }
        }
    }
}

/// One list and the watch that follows it; `Ok` when the stream ended or shutdown came.
async fn list_and_watch<S: Store<Sandbox>>(
    store: &S,
    params: &ListParams,
    tx: &mpsc::Sender<Feed>,
    shutdown: &CancellationToken,
) -> Result<(), StoreError> {
    let list = store.list(params).await?;
    let keys = list.items.iter().map(ObjectKey::of).collect();
    if tx.send(Feed::Listed(keys)).await.is_err() {
        return Ok(());
    }
    let mut stream = store.watch(params, &list.resource_version).await?;
    loop {
        let event = tokio::select! {
            event = stream.next() => event,
            () = shutdown.cancelled() => return Ok(()),
        };
        let feed = match event {
            None => return Ok(()),
            Some(Err(error)) => return Err(error),
            Some(Ok(WatchEvent::Added(sandbox) | WatchEvent::Modified(sandbox))) => {
                Feed::Changed(ObjectKey::of(&sandbox))
            }
            Some(Ok(WatchEvent::Deleted(sandbox))) => Feed::Deleted(ObjectKey::of(&sandbox)),
            Some(Ok(WatchEvent::Bookmark { .. })) => continue,
        };
        if tx.send(feed).await.is_err() {
            return Ok(());
        }
    }
}
