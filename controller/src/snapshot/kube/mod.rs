//! `SandboxSnapshot`s in Kubernetes mode: a kube-runtime `Controller` of the snapshots, also
//! triggered by the objects each one owns, running the pure plan of the configured provider
//! ([`super::kube_csi`] in [`csi`], [`super::kube_gke`] in [`gke`]) and writing through the
//! [`KubeStore`].
//!
//! The controller runs beside the Sandbox controller under the same lease, on that
//! controller's watch of the snapshots ([`SnapshotFeed`]); it watches the kind of object its
//! provider makes (labelled ones only) and reads them from that watch's cache
//! ([`owned`]). Its other reads go to the API server (the sandbox, its PVCs, a `PodSnapshot`):
//! a few GETs per snapshot in progress; a settled snapshot (`Ready`, `Failed`) costs nothing.

mod csi;
mod feed;
mod gke;
mod owned;

pub use feed::SnapshotFeed;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, Store as Cache};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use rouse_shared::api::{
    Sandbox, SandboxSnapshot, SandboxSnapshotStatus, SandboxStatus, SnapshotPhase,
};
use rouse_shared::store::{KubeStore, ObjectKey, Store, StoreError};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

use super::kube_owned::SNAPSHOT_UID_LABEL;
use super::kube_plan::{KubePlan, in_progress};
use super::{kube_csi, kube_gke};
use crate::drive::{KeyedBackoff, RetryBackoff};
use crate::status::status_patch;

/// Which provider takes `SandboxSnapshot`s in Kubernetes mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KubeSnapshotProvider {
    /// One CSI `VolumeSnapshot` per PVC (`kube-csi`); memory is not kept.
    #[default]
    Csi,
    /// A GKE pod snapshot of the sandbox's gVisor pod (`kube-gke`): memory and root
    /// filesystem, not the PVCs.
    Gke,
}

impl FromStr for KubeSnapshotProvider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "csi" => Ok(Self::Csi),
            "gke" => Ok(Self::Gke),
            other => Err(format!(
                "unknown snapshot provider {other:?}; expected csi or gke"
            )),
        }
    }
}

/// Settings of the snapshot controller (`rouse controller --snapshot-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeSnapshotConfig {
    /// The provider taking new snapshots (`csi` or `gke`). Default `csi`. Forks are restored
    /// by the provider that took their snapshot (its `status.provider`), whatever this is.
    pub provider: KubeSnapshotProvider,
    /// `spec.volumeSnapshotClassName` of the `VolumeSnapshot`s made; `None` (the default)
    /// leaves it unset, so the cluster's default class for the PVC's driver is used.
    pub volume_snapshot_class: Option<String>,
    /// Snapshots reconciled at once. Default 4.
    pub concurrency: u16,
    /// The first retry delay after a failed reconcile, doubled per failure up to 30 s.
    /// Default 500ms.
    pub retry_min: Duration,
}

impl Default for KubeSnapshotConfig {
    fn default() -> Self {
        Self {
            provider: KubeSnapshotProvider::Csi,
            volume_snapshot_class: None,
            concurrency: 4,
            retry_min: Duration::from_millis(500),
        }
    }
}

/// The longest retry delay after failed reconciles.
const RETRY_MAX: Duration = Duration::from_secs(30);

/// Why a snapshot reconcile failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Reading or writing a Rouse object (snapshot, sandbox) failed.
    #[error("{what}: {source}")]
    Store {
        /// What was being done.
        what: String,
        /// What failed.
        #[source]
        source: StoreError,
    },
    /// A call on a Kubernetes object (PVC, VolumeSnapshot, pod snapshot trigger) failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// What failed.
        #[source]
        source: kube::Error,
    },
}

impl SnapshotError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            SnapshotError::Store { .. } => "store",
            SnapshotError::Api { .. } => "api",
        }
    }
}

/// What every snapshot reconcile shares.
struct Context {
    client: Client,
    store: KubeStore,
    config: KubeSnapshotConfig,
    /// The objects of the provider's kind this controller labelled, as their watch last saw
    /// them; `None` when the cluster does not serve the kind.
    owned: Option<Cache<DynamicObject>>,
    /// Consecutive failures per snapshot, for the backoff (cleared on success).
    failures: KeyedBackoff<ObjectKey>,
}

/// Runs the snapshot controller on `feed` until `stop`.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    config: KubeSnapshotConfig,
    feed: SnapshotFeed,
    stop: CancellationToken,
) {
    let controller_config =
        kube::runtime::controller::Config::default().concurrency(config.concurrency.max(1));
    let owned = match config.provider {
        KubeSnapshotProvider::Csi => kube_csi::api_resource(),
        KubeSnapshotProvider::Gke => kube_gke::trigger_resource(),
    };
    let owned_api: Api<DynamicObject> = match namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &owned),
        None => Api::all_with(client.clone(), &owned),
    };
    let (snapshots, triggers) = feed.into_parts();
    let mut controller = Controller::for_stream(triggers, snapshots).with_config(controller_config);
    // A kind the cluster does not serve is not watched: its watch would fail forever, and
    // kube-runtime backs off the whole trigger stream on each failure, starving the
    // snapshots' own triggers. Creating one then fails the snapshot with a clear message.
    let mut owned_cache = None;
    if served(&owned_api).await {
        let writer = reflector::store::Writer::new(owned.clone());
        owned_cache = Some(writer.as_reader());
        // Only objects this controller labelled are watched.
        let wc = watcher::Config::default().labels(SNAPSHOT_UID_LABEL);
        let watch = reflector::reflector(writer, watcher(owned_api, wc))
            .default_backoff()
            .touched_objects();
        controller = controller.owns_stream_with(watch, owned);
    } else {
        warn!(
            kind = %owned.kind,
            group = %owned.group,
            "the cluster does not serve the kind this snapshot provider makes; snapshots will fail"
        );
    }
    let failures = KeyedBackoff::new(RetryBackoff {
        min: config.retry_min,
        max: RETRY_MAX,
    });
    let ctx = Arc::new(Context {
        store: KubeStore::new(client.clone()),
        client,
        config,
        owned: owned_cache,
        failures,
    });
    let running = controller
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .instrument(tracing::info_span!("snapshot_controller"));
    tokio::pin!(running);
    tokio::select! {
        () = &mut running => {}
        () = stop.cancelled() => {
            // kube-runtime's graceful shutdown waits for the snapshot cache to sync even when
            // the stop came first, which may then never happen: bound the wait.
            if tokio::time::timeout(SHUTDOWN_DRAIN, running).await.is_err() {
                warn!("the snapshot controller did not stop in time; dropped");
            }
        }
    }
}

/// How long shutdown waits for running snapshot reconciles.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

/// Whether the API server serves the resource of `api` (a 404 on a list means it does not;
/// any other answer, including other errors, counts as served).
async fn served(api: &Api<DynamicObject>) -> bool {
    let probe = kube::api::ListParams::default().limit(1);
    !matches!(
        api.list_metadata(&probe).await,
        Err(kube::Error::Api(status)) if status.code == 404
    )
}

fn error_policy(
    snapshot: Arc<SandboxSnapshot>,
    error: &SnapshotError,
    ctx: Arc<Context>,
) -> Action {
    let key = ObjectKey::of(snapshot.as_ref());
    let (_, delay) = ctx.failures.failed(&key);
    warn!(snapshot.key = %key, %error, retry.after_ms = delay.as_millis() as u64, "snapshot reconcile failed");
    metrics::counter!("rouse_controller_snapshot_reconciles_total", "result" => error.metric_label())
        .increment(1);
    Action::requeue(delay)
}

async fn reconcile(
    snapshot: Arc<SandboxSnapshot>,
    ctx: Arc<Context>,
) -> Result<Action, SnapshotError> {
    let key = ObjectKey::of(snapshot.as_ref());
    let span = tracing::info_span!("reconcile_snapshot", snapshot.key = %key);
    let result = async {
        if !in_progress(&snapshot) {
            return Ok(Action::await_change());
        }
        match ctx.config.provider {
            KubeSnapshotProvider::Csi => csi::reconcile(&snapshot, &ctx).await,
            KubeSnapshotProvider::Gke => gke::reconcile(&snapshot, &ctx).await,
        }
    }
    .instrument(span)
    .await;
    if result.is_ok() {
        ctx.failures.succeeded(&key);
        metrics::counter!("rouse_controller_snapshot_reconciles_total", "result" => "ok")
            .increment(1);
    }
    result
}

/// Reads the snapshot's sandbox; `None` when it does not exist.
async fn read_sandbox(
    ctx: &Context,
    snapshot: &SandboxSnapshot,
) -> Result<Option<Sandbox>, SnapshotError> {
    let key = ObjectKey::of(snapshot);
    let sandbox_key = ObjectKey::new(key.namespace, snapshot.spec.sandbox_name.clone());
    match Store::<Sandbox>::get(&ctx.store, &sandbox_key).await {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(source) => Err(SnapshotError::Store {
            what: format!("read sandbox {sandbox_key}"),
            source,
        }),
    }
}

/// The API of a dynamic resource in the snapshot's namespace.
fn dynamic_api(
    ctx: &Context,
    snapshot: &SandboxSnapshot,
    resource: &kube::api::ApiResource,
) -> Api<DynamicObject> {
    let namespace = ObjectKey::of(snapshot).namespace;
    Api::namespaced_with(ctx.client.clone(), &namespace, resource)
}

/// Writes what a plan decided: the sandbox's `lastSnapshot` first (so a crash in between
/// only repeats it), then the snapshot's status when it changed; the requeue as an
/// [`Action`].
async fn write_outcome<C>(
    ctx: &Context,
    snapshot: &SandboxSnapshot,
    sandbox: Option<&Sandbox>,
    planned: KubePlan<C>,
) -> Result<Action, SnapshotError> {
    let key = ObjectKey::of(snapshot);
    let status = &planned.status;
    if let (Some(last), Some(sandbox)) = (planned.last_snapshot, sandbox) {
        let sandbox_key = ObjectKey::of(sandbox);
        let previous = sandbox.status.clone().unwrap_or_default();
        let wanted = SandboxStatus {
            last_snapshot: Some(last),
            ..previous.clone()
        };
        if let Some(patch) = status_patch(&previous, &wanted) {
            match Store::<Sandbox>::patch_status(&ctx.store, &sandbox_key, &patch).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(source) => {
                    return Err(SnapshotError::Store {
                        what: format!("write lastSnapshot of sandbox {sandbox_key}"),
                        source,
                    });
                }
            }
        }
    }
    let previous = snapshot.status.clone().unwrap_or_default();
    if let Some(patch) = status_patch::<SandboxSnapshotStatus>(&previous, status) {
        match Store::<SandboxSnapshot>::patch_status(&ctx.store, &key, &patch).await {
            Ok(_) => {
                if status.phase != previous.phase
                    && let Some(phase) = status.phase
                {
                    let provider = status.provider.clone().unwrap_or_default();
                    tracing::info!(phase = ?phase, message = status.message.as_deref().unwrap_or_default(), "snapshot status");
                    if phase == SnapshotPhase::Ready {
                        metrics::counter!("rouse_controller_snapshots_total", "provider" => provider)
                            .increment(1);
                    }
                }
            }
            Err(e) if e.is_not_found() => return Ok(Action::await_change()),
            Err(source) => {
                return Err(SnapshotError::Store {
                    what: format!("write the status of snapshot {key}"),
                    source,
                });
            }
        }
    }
    Ok(planned
        .requeue_after
        .map_or_else(Action::await_change, Action::requeue))
}
