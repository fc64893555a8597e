//! What the snapshot controller's reconciles share: the settings ([`KubeSnapshotConfig`]),
//! the [`Context`], the error, and the reads and writes both providers make (the sandbox,
//! a dynamic API, the outcome of a plan). The providers' reconciles and the controller import
//! it; it imports neither.

use std::str::FromStr;
use std::time::Duration;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store as Cache;
use kube::{Api, Client};
use rouse_shared::api::{
    Sandbox, SandboxSnapshot, SandboxSnapshotStatus, SandboxStatus, SnapshotPhase,
};
use rouse_shared::store::{KubeStore, ObjectKey, Store, StoreError};

use super::plan::KubePlan;
use crate::drive::KeyedBackoff;
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
pub(super) const RETRY_MAX: Duration = Duration::from_secs(30);

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
pub(super) struct Context {
    pub(super) client: Client,
    pub(super) store: KubeStore,
    pub(super) config: KubeSnapshotConfig,
    /// The objects of the provider's kind this controller labelled, as their watch last saw
    /// them; `None` when the cluster does not serve the kind.
    pub(super) owned: Option<Cache<DynamicObject>>,
    /// Consecutive failures per snapshot, for the backoff (cleared on success).
    pub(super) failures: KeyedBackoff<ObjectKey>,
}

/// Reads the snapshot's sandbox; `None` when it does not exist.
pub(super) async fn read_sandbox(
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
pub(super) fn dynamic_api(
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
pub(super) async fn write_outcome<C>(
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
