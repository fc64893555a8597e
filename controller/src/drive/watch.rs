//! The driver's event sources: a kind's list-watch from the `Store` port
//! ([`rouse_shared::store::list_watch`], which relists after `Expired`, errors and ended
//! watches with a doubling backoff), and plain trigger streams (the local platform's change
//! notifications).
//!
//! A failed list or watch is counted and logged here, so a kind sees only what exists.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use rouse_shared::store::{Backoff, ListParams, Seen, Store, StoreError, StoreObject};

/// The first wait after a failed list or watch.
const RELIST_MIN: Duration = Duration::from_millis(250);
/// The longest wait after failed lists or watches.
const RELIST_MAX: Duration = Duration::from_secs(30);

/// What one kind's list-watch saw.
#[derive(Debug)]
pub(crate) enum Change<K> {
    /// A full list: every object that exists now (at the start and after every relist).
    Listed(Vec<K>),
    /// An object appeared or changed (boxed: objects are large, events are moved around).
    Applied(Box<K>),
    /// An object went away (its last state).
    Deleted(Box<K>),
}

/// Lists and watches every object of kind `K` in `store`, each change turned into an event
/// by `event`; failures are counted in `rouse_controller_watch_restarts_total` and logged.
pub(crate) fn watch<K, S, E>(
    store: S,
    event: impl Fn(Change<K>) -> E + Send + 'static,
) -> BoxStream<'static, E>
where
    K: StoreObject,
    S: Store<K> + 'static,
    E: Send + 'static,
{
    let backoff = Backoff::new(RELIST_MIN, RELIST_MAX);
    list_watch_changes::<K, S>(store, backoff)
        .map(event)
        .boxed()
}

fn list_watch_changes<K, S>(store: S, backoff: Backoff) -> BoxStream<'static, Change<K>>
where
    K: StoreObject,
    S: Store<K> + 'static,
{
    rouse_shared::store::list_watch(store, ListParams::default(), backoff)
        .filter_map(|seen| async move {
            match seen {
                Seen::Listed(items) => Some(Change::Listed(items)),
                Seen::Applied(object) => Some(Change::Applied(Box::new(object))),
                Seen::Deleted(object) => Some(Change::Deleted(Box::new(object))),
                Seen::Failed(error) => {
                    failed::<K>(&error);
                    None
                }
            }
        })
        .boxed()
}

/// Counts and logs a failed list or watch; the list-watch lists again by itself.
fn failed<K: StoreObject>(error: &StoreError) {
    metrics::counter!("rouse_controller_watch_restarts_total", "kind" => error.metric_label())
        .increment(1);
    let kind = K::kind(&());
    if matches!(error, StoreError::Expired { .. }) {
        tracing::debug!(%error, %kind, "watch expired; listing again");
    } else {
        tracing::warn!(%error, %kind, "list or watch failed; listing again");
    }
}

/// A trigger stream from a channel: every item it receives, until its senders are gone.
pub(crate) fn trigger<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> BoxStream<'static, T> {
    futures::stream::unfold(rx, |mut rx| async move {
        let item = rx.recv().await?;
        Some((item, rx))
    })
    .boxed()
}
