//! The standalone driver of `SandboxSnapshot`s, on the one store-watch driver
//! ([`crate::drive::driver`]): a list+watch of the store's snapshots feeds its work queue
//! (per-key dedupe, so one snapshot is never taken twice at a time), at most
//! [`SNAPSHOT_CONCURRENCY`] reconciles run at once, each the pure [`plan`] and a thin apply
//! on the [`LocalPlatform`].
//!
//! Deletion needs no finalizer: a deleted snapshot's directory is removed when the deletion
//! is seen, and the first list after a start sweeps every directory without a snapshot of
//! that name and UID (so a `kill -9` between the delete and the removal leaks nothing).

use std::collections::HashMap;
use std::time::Duration;

use kube::ResourceExt;
use rouse_shared::api::{Sandbox, SandboxSnapshot, SandboxSnapshotStatus, SandboxStatus};
use rouse_shared::store::{ObjectKey, Store};
use tokio_util::sync::CancellationToken;

use crate::drive::RetryBackoff;
use crate::drive::driver::{self, DriveConfig, Job, Reconciler};
use crate::drive::queue::{Outcome, Queue};
use crate::drive::watch::{Change, watch};
use crate::platform::local::{LocalPlatform, TakeError};
use crate::snapshot::Snapshotter;
use crate::snapshot::plan::{SnapshotObserved, Source, failed, plan};
use crate::status::status_patch;

/// Most snapshots taken at once: each copies volumes and may pause a sandbox.
pub const SNAPSHOT_CONCURRENCY: usize = 2;
/// Every snapshot is reconciled at least this often.
const RESYNC: Duration = Duration::from_secs(60);
/// The first retry delay after a failed reconcile.
const RETRY_MIN: Duration = Duration::from_millis(500);
/// The longest retry delay after failed reconciles.
const RETRY_MAX: Duration = Duration::from_secs(30);
/// Bound of the event channel between the watch and the driver.
const EVENT_CAPACITY: usize = 256;

/// The object kinds the driver needs from its store.
pub trait SnapshotStore: Store<SandboxSnapshot> + Store<Sandbox> + Clone + 'static {}

impl<S> SnapshotStore for S where S: Store<SandboxSnapshot> + Store<Sandbox> + Clone + 'static {}

/// Reconciles the store's snapshots on `platform` until `shutdown`.
///
/// # Example
/// ```no_run
/// # async fn demo(store: rouse_controller::store::EmbeddedStore) -> anyhow::Result<()> {
/// use rouse_controller::platform::local::{LocalConfig, LocalPlatform};
/// let platform = LocalPlatform::new(LocalConfig::new("/var/lib/rouse"))?;
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// rouse_controller::mode::local::snapshots::run(store, platform, shutdown).await;
/// # Ok(()) }
/// ```
pub async fn run<S: SnapshotStore>(store: S, platform: LocalPlatform, shutdown: CancellationToken) {
    let sources = vec![watch::<SandboxSnapshot, S, _>(store.clone(), |c| c)];
    let kind = Snapshots {
        store,
        platform,
        known: HashMap::new(),
        swept: false,
    };
    let config = DriveConfig {
        concurrency: SNAPSHOT_CONCURRENCY,
        resync: RESYNC,
        backoff: RetryBackoff {
            min: RETRY_MIN,
            max: RETRY_MAX,
        },
        // A take in progress finishes (it restores a paused sandbox) before the platform
        // stops.
        drain: None,
        events: EVENT_CAPACITY,
    };
    driver::run(kind, sources, config, shutdown).await;
}

/// The snapshots as the driver runs them.
struct Snapshots<S> {
    store: S,
    platform: LocalPlatform,
    /// Every snapshot the store holds, with its UID, as far as the watch told.
    known: HashMap<ObjectKey, String>,
    /// The data of vanished snapshots was removed (on the first list).
    swept: bool,
}

impl<S: SnapshotStore> Reconciler for Snapshots<S> {
    type Item = ObjectKey;
    type Event = Change<SandboxSnapshot>;
    const QUEUE: &'static str = "snapshot";

    async fn route(&mut self, event: Change<SandboxSnapshot>) -> Vec<ObjectKey> {
        match event {
            Change::Listed(items) => {
                self.known = items
                    .iter()
                    .map(|s| (ObjectKey::of(s), s.uid().unwrap_or_default()))
                    .collect();
                if !self.swept {
                    self.swept = true;
                    let removed = self.platform.sweep_snapshots(&self.known);
                    if removed > 0 {
                        tracing::warn!(
                            snapshots = removed,
                            "removed the data of snapshots that no longer exist"
                        );
                    }
                }
                self.known.keys().cloned().collect()
            }
            Change::Applied(s) => {
                let key = ObjectKey::of(s.as_ref());
                self.known.insert(key.clone(), s.uid().unwrap_or_default());
                vec![key]
            }
            Change::Deleted(s) => {
                let key = ObjectKey::of(s.as_ref());
                self.known.remove(&key);
                // The reconcile finds it gone and removes its data, after any take of it.
                vec![key]
            }
        }
    }

    fn resync(&self) -> Vec<ObjectKey> {
        self.known.keys().cloned().collect()
    }

    fn next_job(&mut self, queue: &mut Queue<ObjectKey>) -> Option<Job<ObjectKey>> {
        let key = queue.pop()?;
        let (store, platform) = (self.store.clone(), self.platform.clone());
        let span = tracing::info_span!("reconcile_snapshot", snapshot.key = %key);
        Some(driver::job(key.clone(), span, async move {
            reconcile_one(&store, &platform, &key).await
        }))
    }
}

/// Reads the snapshot and its sandbox, plans, takes it if the plan says so, writes the
/// sandbox's `lastSnapshot` and the snapshot's status.
async fn reconcile_one<S: SnapshotStore>(
    store: &S,
    platform: &LocalPlatform,
    key: &ObjectKey,
) -> Outcome {
    let snapshot = match Store::<SandboxSnapshot>::get(store, key).await {
        Ok(s) => s,
        Err(error) if error.is_not_found() => {
            platform.remove_snapshot(key);
            return Outcome::Gone;
        }
        Err(error) => {
            tracing::warn!(%error, "reading the snapshot failed");
            return Outcome::Retry;
        }
    };
    let sandbox_key = ObjectKey::new(key.namespace.clone(), snapshot.spec.sandbox_name.clone());
    let sandbox = match Store::<Sandbox>::get(store, &sandbox_key).await {
        Ok(s) => Some(s),
        Err(error) if error.is_not_found() => None,
        Err(error) => {
            tracing::warn!(%error, "reading the snapshot's sandbox failed");
            return Outcome::Retry;
        }
    };
    let observed = SnapshotObserved {
        source: sandbox
            .as_ref()
            .map_or(Source::Missing, |s| platform.snapshot_source(s)),
        record: platform.snapshot_record(key),
    };
    let mut planned = plan(&snapshot, &observed);
    let mut outcome = Outcome::Done(planned.requeue_after);
    if planned.take
        && let Some(sandbox) = &sandbox
    {
        let started = std::time::Instant::now();
        let result = platform.take_snapshot(sandbox, &snapshot).await;
        metrics::histogram!("rouse_controller_snapshot_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        match result {
            Ok(record) => {
                planned = plan(
                    &snapshot,
                    &SnapshotObserved {
                        record: Some(record),
                        ..observed
                    },
                );
            }
            Err(TakeError::Failed(message)) => {
                tracing::warn!(%message, "snapshot failed");
                planned.status = failed(platform.provider(sandbox), message);
            }
            Err(TakeError::Retry(message)) => {
                tracing::info!(%message, "snapshot not taken yet; retrying");
                planned.status.message = Some(message);
                outcome = Outcome::Retry;
            }
        }
    }
    if let Some(last) = planned.last_snapshot
        && let Some(sandbox) = &sandbox
    {
        let previous = sandbox.status.clone().unwrap_or_default();
        let wanted = SandboxStatus {
            last_snapshot: Some(last),
            ..previous.clone()
        };
        if let Some(patch) = status_patch(&previous, &wanted)
            && let Err(error) = Store::<Sandbox>::patch_status(store, &sandbox_key, &patch).await
            && !error.is_not_found()
        {
            tracing::warn!(%error, "writing the sandbox's lastSnapshot failed");
            return Outcome::Retry;
        }
    }
    let previous = snapshot.status.clone().unwrap_or_default();
    if let Some(patch) = status_patch::<SandboxSnapshotStatus>(&previous, &planned.status)
        && let Err(error) = Store::<SandboxSnapshot>::patch_status(store, key, &patch).await
    {
        if error.is_not_found() {
            // Deleted while it was taken: its data goes now.
            platform.remove_snapshot(key);
            return Outcome::Gone;
        }
        tracing::warn!(%error, "writing the snapshot's status failed");
        return Outcome::Retry;
    }
    outcome
}
