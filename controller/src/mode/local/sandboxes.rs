//! The sandboxes in standalone mode: the controller core's [`reconcile_sandbox`] for every
//! Sandbox of a store on the [`LocalPlatform`], run by the one store-watch driver
//! ([`crate::drive::driver`]).
//!
//! A list+watch of the store, the platform's change notifications (a workload exited or
//! became ready) and the plan's `requeue_after` timers feed one work queue with per-key
//! dedupe; at most [`DriverConfig::concurrency`] reconciles run at once. On start, every
//! sandbox is reconciled, so those with `operatingMode: Running` start again from the store's
//! state, after the directories of sandboxes that no longer exist were removed; on shutdown,
//! every workload is stopped with its grace period before `run` returns.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::Resource;
use rouse_shared::api::{Sandbox, SandboxSnapshot};
use rouse_shared::store::{ObjectKey, Store};
use tokio_util::sync::CancellationToken;

use super::restore;
use crate::drive::RetryBackoff;
use crate::drive::driver::{self, DriveConfig, Job, Reconciler};
use crate::drive::queue::{Outcome, Queue};
use crate::drive::watch::{Change, trigger, watch};
use crate::platform::local::LocalPlatform;
use crate::sandbox::{EventKind, LifecycleEvent, ReconcileError, reconcile_sandbox};

/// When a sandbox claimed by a direct wake is looked at again if the claim's end (which
/// notifies the driver) was missed.
const DIRECT_RECHECK: Duration = Duration::from_secs(1);

/// Bound of the event channel between the watch and the driver.
const FEED_CAPACITY: usize = 256;

/// Settings of the standalone driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverConfig {
    /// Most reconciles running at once. Default 8.
    pub concurrency: usize,
    /// Every sandbox is reconciled at least this often, catching anything a dropped
    /// notification missed. Default 60s.
    pub resync: Duration,
    /// The first retry delay after a failed reconcile. Default 500ms.
    pub retry_min: Duration,
    /// The longest retry delay after failed reconciles. Default 60s.
    pub retry_max: Duration,
    /// How long shutdown waits for running reconciles before it stops the workloads.
    /// Default 10s.
    pub drain: Duration,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            concurrency: 8,
            resync: Duration::from_secs(60),
            retry_min: Duration::from_millis(500),
            retry_max: Duration::from_secs(60),
            drain: Duration::from_secs(10),
        }
    }
}

/// Why the driver could not run.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// Another driver already took the platform's change notifications.
    #[error("the local platform's change notifications are already taken by another driver")]
    ChangesTaken,
}

impl DriverError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            DriverError::ChangesTaken => "changes_taken",
        }
    }
}

/// Reconciles the store's sandboxes on `platform` until `shutdown`, then stops every
/// workload and returns; see the module documentation.
///
/// # Example
/// ```no_run
/// # async fn demo(store: rouse_controller::store::EmbeddedStore) -> anyhow::Result<()> {
/// use rouse_controller::platform::local::{LocalConfig, LocalPlatform};
/// let platform = LocalPlatform::new(LocalConfig::new("/var/lib/rouse"))?;
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// rouse_controller::mode::local::sandboxes::run(store, platform, shutdown).await?;
/// # Ok(()) }
/// ```
pub async fn run<S>(
    store: S,
    platform: LocalPlatform,
    shutdown: CancellationToken,
) -> Result<(), DriverError>
where
    S: Store<Sandbox> + Store<SandboxSnapshot> + Clone + 'static,
{
    run_with(store, platform, DriverConfig::default(), shutdown).await
}

/// [`run`] with explicit settings.
pub async fn run_with<S>(
    store: S,
    platform: LocalPlatform,
    config: DriverConfig,
    shutdown: CancellationToken,
) -> Result<(), DriverError>
where
    S: Store<Sandbox> + Store<SandboxSnapshot> + Clone + 'static,
{
    let changes = platform.take_changes().ok_or(DriverError::ChangesTaken)?;
    let removed = platform.recover().await;
    if removed > 0 {
        tracing::warn!(
            containers = removed,
            "removed gvisor containers left by a previous run"
        );
    }
    // The same `rouse_controller_sandboxes` gauge as in Kubernetes mode.
    let gauge = tokio::spawn(crate::mode::state::report_states_from(
        store.clone(),
        shutdown.child_token(),
    ));
    let sources = vec![
        watch::<Sandbox, S, _>(store.clone(), Event::Watch),
        trigger(changes).map(Event::Changed).boxed(),
    ];
    let kind = Sandboxes {
        store,
        platform: platform.clone(),
        known: HashSet::new(),
        swept: false,
    };
    let drive = DriveConfig {
        concurrency: config.concurrency,
        resync: config.resync,
        backoff: RetryBackoff {
            min: config.retry_min,
            max: config.retry_max,
        },
        drain: Some(config.drain),
        events: FEED_CAPACITY,
    };
    tracing::info!(
        concurrency = config.concurrency,
        "standalone driver started"
    );
    driver::run(kind, sources, drive, shutdown).await;
    if let Err(error) = gauge.await {
        tracing::error!(%error, "sandbox gauge task failed");
    }
    platform.shutdown().await;
    tracing::info!("standalone driver stopped");
    Ok(())
}

/// What wakes a sandbox's reconcile.
enum Event {
    /// The store's sandboxes changed.
    Watch(Change<Sandbox>),
    /// The platform saw the sandbox's workload exit or become ready.
    Changed(ObjectKey),
}

/// The sandboxes as the driver runs them.
struct Sandboxes<S> {
    store: S,
    platform: LocalPlatform,
    /// Every sandbox the store holds, as far as the watch told.
    known: HashSet<ObjectKey>,
    /// The directories of vanished sandboxes were removed (on the first list).
    swept: bool,
}

impl<S> Reconciler for Sandboxes<S>
where
    S: Store<Sandbox> + Store<SandboxSnapshot> + Clone + 'static,
{
    type Item = ObjectKey;
    type Event = Event;
    const QUEUE: &'static str = "sandbox";

    async fn route(&mut self, event: Event) -> Vec<ObjectKey> {
        match event {
            Event::Watch(Change::Listed(items)) => {
                let listed: HashSet<ObjectKey> = items.iter().map(ObjectKey::of).collect();
                if !self.swept {
                    // Before any reconcile: directories of sandboxes deleted while no run
                    // watched (or whose cleanup a crash cut short) must not outlive them.
                    self.swept = true;
                    let removed = self.platform.sweep(&listed).await;
                    if removed > 0 {
                        tracing::warn!(
                            sandboxes = removed,
                            "removed the directories of sandboxes that no longer exist"
                        );
                    }
                }
                // Deleted while no watch ran: reconcile finds them gone and cleans up.
                let vanished: Vec<ObjectKey> = self.known.difference(&listed).cloned().collect();
                self.known = listed;
                let mut keys: Vec<ObjectKey> = self.known.iter().cloned().collect();
                keys.extend(vanished);
                keys.extend(self.platform.keys());
                keys
            }
            Event::Watch(Change::Applied(sandbox)) => {
                let key = ObjectKey::of(sandbox.as_ref());
                self.known.insert(key.clone());
                vec![key]
            }
            Event::Watch(Change::Deleted(sandbox)) => {
                let key = ObjectKey::of(sandbox.as_ref());
                self.known.remove(&key);
                vec![key]
            }
            Event::Changed(key) => vec![key],
        }
    }

    fn resync(&self) -> Vec<ObjectKey> {
        self.known
            .iter()
            .cloned()
            .chain(self.platform.keys())
            .collect()
    }

    fn next_job(&mut self, queue: &mut Queue<ObjectKey>) -> Option<Job<ObjectKey>> {
        let key = queue.pop()?;
        let store = self.store.clone();
        let platform = self.platform.clone();
        let span = tracing::info_span!("reconcile", sandbox.key = %key);
        Some(driver::job(key.clone(), span, async move {
            reconcile_one(&store, &platform, &key).await
        }))
    }
}

/// Reads the sandbox and reconciles it; a sandbox that is gone has its workload stopped and
/// its directories removed.
async fn reconcile_one<S: Store<Sandbox> + Store<SandboxSnapshot>>(
    store: &S,
    platform: &LocalPlatform,
    key: &ObjectKey,
) -> Outcome {
    if platform.direct_wake_pending(key) {
        // A direct wake started it and its store write is not answered yet: a reconcile now
        // would read the sandbox from before the wake. The claim's end notifies the driver.
        return Outcome::Done(Some(DIRECT_RECHECK));
    }
    let started = std::time::Instant::now();
    let (outcome, result) = match Store::<Sandbox>::get(store, key).await {
        Err(error) if error.is_not_found() => {
            platform.remove(key).await;
            (Outcome::Gone, "ok")
        }
        Err(error) => {
            tracing::warn!(%error, "reading the sandbox failed");
            let retry = error.is_retryable();
            (Outcome::failed(retry), "get")
        }
        Ok(sandbox) => {
            if sandbox.meta().deletion_timestamp.is_some() {
                // Being deleted (finalizers pending): its workload goes first, as the
                // garbage collector would delete the Pod.
                platform.stop_workload(key);
            }
            let restore = match restore::restore_source(store, platform, &sandbox).await {
                Ok(restore) => restore,
                Err(error) => {
                    tracing::warn!(%error, "reading the sandbox's restoreFrom snapshot failed");
                    let retry = error.is_retryable();
                    return Outcome::failed(retry);
                }
            };
            let platform = restore::Restoring {
                platform: platform.clone(),
                restore,
            };
            match reconcile_sandbox(store, &platform, &sandbox, Timestamp::now()).await {
                Ok(outcome) if outcome.deleted => (Outcome::Done(None), "ok"),
                Ok(outcome) => {
                    outcome.events.iter().for_each(log_event);
                    (Outcome::Done(outcome.requeue_after), "ok")
                }
                Err(error) => {
                    error.event().iter().for_each(log_event);
                    tracing::warn!(%error, "reconcile failed");
                    let retry = retryable(&error);
                    (Outcome::failed(retry), error.metric_label())
                }
            }
        }
    };
    // The same series as the Kubernetes mode's reconciler.
    metrics::histogram!("rouse_controller_reconcile_duration_seconds")
        .record(started.elapsed().as_secs_f64());
    metrics::counter!("rouse_controller_reconciles_total", "result" => result).increment(1);
    outcome
}

/// Standalone mode has no Events API: a lifecycle Event is a log line with its reason.
fn log_event(event: &LifecycleEvent) {
    match event.kind {
        EventKind::Normal => {
            tracing::info!(event.reason = event.reason, "{}", event.note);
        }
        EventKind::Warning => {
            tracing::warn!(event.reason = event.reason, "{}", event.note);
        }
    }
}

fn retryable(error: &ReconcileError) -> bool {
    match error {
        ReconcileError::Observe { source, .. } | ReconcileError::Apply { source, .. } => {
            source.is_retryable()
        }
        ReconcileError::Suspend { source, .. }
        | ReconcileError::Delete { source, .. }
        | ReconcileError::PatchStatus { source, .. } => source.is_retryable(),
    }
}

#[cfg(test)]
#[path = "sandboxes_tests.rs"]
mod tests;
