//! [`SnapshotFeed`]: the Sandbox controller's `SandboxSnapshot` watch, shared with the
//! snapshot controller, so a replica lists and watches snapshots once, not once per
//! controller.
//!
//! Forks need the snapshots' cache and their changes (a fork starts once its snapshot is
//! `Ready`); the snapshot controller needs the same. The Sandbox controller keeps the watch
//! (it sees deletions too, which forks waiting for a snapshot need) and passes each snapshot
//! it touched on; the snapshot controller reads the same cache.
//!
//! The watch hands the snapshot controller the objects themselves rather than references into
//! the cache (kube-runtime's shared streams do that): a reference to an object deleted before
//! it is read would leave that stream pending without a wake-up.

use futures::{Stream, StreamExt};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use rouse_shared::api::SandboxSnapshot;
use tokio::sync::mpsc;

/// Snapshots buffered for the snapshot controller before the watch feeding it waits for it.
const FEED_BUFFER: usize = 256;

/// The snapshot cache of the Sandbox controller's watch, and every snapshot that watch
/// touched since, for the snapshot controller.
pub struct SnapshotFeed {
    store: Store<SandboxSnapshot>,
    touched: mpsc::Receiver<SandboxSnapshot>,
}

impl SnapshotFeed {
    /// Shares `events`, the snapshots touched by the watch that fills `store`: returns them
    /// unchanged, each one also sent to the feed.
    ///
    /// When the feed's buffer is full the watch waits for the snapshot controller, which
    /// takes every snapshot as it comes (its queue deduplicates them); the buffer covers
    /// bursts such as the first list.
    pub fn share<S>(store: Store<SandboxSnapshot>, events: S) -> (Self, impl Stream<Item = S::Item>)
    where
        S: Stream<Item = Result<SandboxSnapshot, watcher::Error>>,
    {
        let (tx, touched) = mpsc::channel(FEED_BUFFER);
        let events = events.then(move |event| {
            let tx = tx.clone();
            async move {
                if let Ok(snapshot) = &event {
                    // Refused only once the snapshot controller stopped: nobody to feed.
                    let _ = tx.send(snapshot.clone()).await;
                }
                event
            }
        });
        (Self { store, touched }, events)
    }

    /// The cache, and the touched snapshots as the trigger stream of a kube-runtime
    /// `Controller` (it ends when the watch does).
    pub(super) fn into_parts(
        self,
    ) -> (
        Store<SandboxSnapshot>,
        impl Stream<Item = Result<SandboxSnapshot, watcher::Error>>,
    ) {
        let triggers = futures::stream::unfold(self.touched, |mut touched| async move {
            touched.recv().await.map(|s| (Ok(s), touched))
        });
        (self.store, triggers)
    }
}
