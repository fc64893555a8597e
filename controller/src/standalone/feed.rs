//! Feeds the driver with the sandboxes of a store through the shared list-watch-relist loop
//! (`rouse_shared::store::list_watch`): a list, then a watch from its version; `Expired`, an
//! error or the end of the stream lead to a new list after a bounded backoff.

use std::time::Duration;

use futures::StreamExt;
use rouse_shared::api::Sandbox;
use rouse_shared::store::{Backoff, ListParams, ObjectKey, Seen, Store, StoreError, list_watch};
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

/// Lists and watches until `shutdown` (the shared list-watch-relist loop); sends block when
/// the driver lags (the channel is bounded), which slows the watch down instead of dropping
/// events.
pub(crate) async fn run<S>(store: S, tx: mpsc::Sender<Feed>, shutdown: CancellationToken)
where
    S: Store<Sandbox> + 'static,
{
    let backoff = Backoff::new(RETRY_MIN, RETRY_MAX);
    let mut seen = list_watch(store, ListParams::default(), backoff);
    loop {
        let item = tokio::select! {
            item = seen.next() => item,
            () = shutdown.cancelled() => return,
        };
        let feed = match item {
            None => return,
            Some(Seen::Failed(error)) => {
                metrics::counter!("rouse_controller_watch_restarts_total", "kind" => error.metric_label())
                    .increment(1);
                if matches!(error, StoreError::Expired { .. }) {
                    tracing::debug!(%error, "sandbox watch expired; listing again");
                } else {
                    tracing::warn!(%error, "sandbox list or watch failed; listing again");
                }
                continue;
            }
            Some(Seen::Listed(items)) => Feed::Listed(items.iter().map(ObjectKey::of).collect()),
            Some(Seen::Applied(sandbox)) => Feed::Changed(ObjectKey::of(&sandbox)),
            Some(Seen::Deleted(sandbox)) => Feed::Deleted(ObjectKey::of(&sandbox)),
        };
        let sent = tokio::select! {
            sent = tx.send(feed) => sent.is_ok(),
            () = shutdown.cancelled() => return,
        };
        if !sent {
            return;
        }
    }
}
