//! `SandboxSnapshot`s in Kubernetes mode: a kube-runtime `Controller` of the snapshots, also
//! triggered by the objects each one owns, running the pure plan of the configured provider
//! ([`kube_csi`]) and writing through the [`KubeStore`].
//!
//! The controller runs beside the Sandbox controller under the same lease. Reads in a
//! reconcile go to the API server (a few GETs per snapshot in progress); a settled snapshot
//! (`Ready`, `Failed`) costs nothing.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{DynamicObject, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use rouse_shared::api::{Sandbox, SandboxSnapshot, SandboxSnapshotStatus, SandboxStatus};
use rouse_shared::store::{KubeStore, ObjectKey, Store, StoreError};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

use super::kube_csi::{self, CsiObserved, CsiVolume, VolumeSnapshotState};
use super::plan::failed;
use crate::sandbox::volume_specs;
use crate::status::status_patch;

/// Which provider takes `SandboxSnapshot`s in Kubernetes mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KubeSnapshotProvider {
    /// One CSI `VolumeSnapshot` per PVC (`kube-csi`); memory is not kept.
    #[default]
    Csi,
}

impl FromStr for KubeSnapshotProvider {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "csi" => Ok(Self::Csi),
            other => Err(format!("unknown snapshot provider {other:?}; expected csi")),
        }
    }
}

/// Settings of the snapshot controller (`rouse controller --snapshot-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeSnapshotConfig {
    /// The provider taking new snapshots. Default `csi`.
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
    /// A call on a Kubernetes object (PVC, VolumeSnapshot) failed.
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
    /// Consecutive failures per snapshot, for the backoff (cleared on success).
    failures: std::sync::Mutex<std::collections::HashMap<ObjectKey, u32>>,
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Runs the snapshot controller until `stop`.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    config: KubeSnapshotConfig,
    stop: CancellationToken,
) {
    let ns = namespace.as_deref();
    let wc = watcher::Config::default();
    let controller_config =
        kube::runtime::controller::Config::default().concurrency(config.concurrency.max(1));
    let owned = match config.provider {
        KubeSnapshotProvider::Csi => kube_csi::api_resource(),
    };
    let owned_api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &owned),
        None => Api::all_with(client.clone(), &owned),
    };
    let ctx = Arc::new(Context {
        store: KubeStore::new(client.clone()),
        client: client.clone(),
        config,
        failures: std::sync::Mutex::new(std::collections::HashMap::new()),
    });
    Controller::new(scoped::<SandboxSnapshot>(&client, ns), wc.clone())
        .with_config(controller_config)
        // Only objects this controller labelled are watched.
        .owns_with(owned_api, owned, wc.labels(kube_csi::SNAPSHOT_UID_LABEL))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .instrument(tracing::info_span!("snapshot_controller"))
        .await;
}

fn error_policy(
    snapshot: Arc<SandboxSnapshot>,
    error: &SnapshotError,
    ctx: Arc<Context>,
) -> Action {
    let key = ObjectKey::of(snapshot.as_ref());
    let attempts = {
        let mut failures = ctx.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = failures.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    };
    let delay = ctx
        .config
        .retry_min
        .saturating_mul(1u32 << attempts.min(16).saturating_sub(1))
        .min(RETRY_MAX);
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
    let result = reconcile_csi(&snapshot, &ctx).instrument(span).await;
    if result.is_ok() {
        ctx.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        metrics::counter!("rouse_controller_snapshot_reconciles_total", "result" => "ok")
            .increment(1);
    }
    result
}

/// One reconcile with the `kube-csi` provider: observe the sandbox's PVCs and the
/// `VolumeSnapshot`s, plan, create the missing ones, write `lastSnapshot` and the status.
async fn reconcile_csi(snapshot: &SandboxSnapshot, ctx: &Context) -> Result<Action, SnapshotError> {
    if !kube_csi::in_progress(snapshot) {
        return Ok(Action::await_change());
    }
    let key = ObjectKey::of(snapshot);
    let namespace = key.namespace.clone();
    let sandbox_key = ObjectKey::new(namespace.clone(), snapshot.spec.sandbox_name.clone());
    let sandbox = match Store::<Sandbox>::get(&ctx.store, &sandbox_key).await {
        Ok(s) => Some(s),
        Err(e) if e.is_not_found() => None,
        Err(source) => {
            return Err(SnapshotError::Store {
                what: format!("read sandbox {sandbox_key}"),
                source,
            });
        }
    };
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &namespace);
    let volume_snapshots: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &namespace, &kube_csi::api_resource());
    let uid = snapshot.uid().unwrap_or_default();
    let mut observed = CsiObserved::default();
    if let Some(sandbox) = &sandbox {
        let mut volumes = Vec::new();
        for volume in volume_specs(sandbox) {
            let api_error = |what: String| move |source| SnapshotError::Api { what, source };
            let claim_exists = claims
                .get_opt(&volume.claim_name)
                .await
                .map_err(api_error(format!("read PVC {}", volume.claim_name)))?
                .is_some();
            let name = kube_csi::volume_snapshot_name(&volume.volume_name, &key.name);
            let existing = volume_snapshots
                .get_opt(&name)
                .await
                .map_err(api_error(format!("read VolumeSnapshot {name}")))?;
            volumes.push(CsiVolume {
                volume,
                claim_exists,
                snapshot: existing.map(|o| VolumeSnapshotState::of(&o, &uid)),
            });
        }
        observed.volumes = Some(volumes);
    }
    let mut planned = kube_csi::plan(snapshot, &observed);
    if let Some(sandbox) = &sandbox {
        for volume in &planned.create {
            let object = kube_csi::volume_snapshot(
                snapshot,
                sandbox,
                volume,
                ctx.config.volume_snapshot_class.as_deref(),
            );
            match volume_snapshots
                .create(&PostParams::default(), &object)
                .await
            {
                Ok(_) => {
                    metrics::counter!("rouse_controller_volume_snapshots_created_total")
                        .increment(1);
                }
                // Made by an earlier reconcile: the next one reads it.
                Err(kube::Error::Api(status)) if status.is_already_exists() => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    planned.status = failed(
                        kube_csi::PROVIDER,
                        format!(
                            "this cluster does not serve {}/{} {}: install the CSI snapshot \
                             CRDs and controller, or choose another snapshot provider",
                            kube_csi::GROUP,
                            kube_csi::VERSION,
                            kube_csi::KIND
                        ),
                    );
                    break;
                }
                Err(source) => {
                    return Err(SnapshotError::Api {
                        what: format!("create VolumeSnapshot {}", object.name_any()),
                        source,
                    });
                }
            }
        }
    }
    if let (Some(last), Some(sandbox)) = (planned.last_snapshot.clone(), &sandbox) {
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
    if let Some(patch) = status_patch::<SandboxSnapshotStatus>(&previous, &planned.status) {
        match Store::<SandboxSnapshot>::patch_status(&ctx.store, &key, &patch).await {
            Ok(_) => {
                if planned.status.phase != previous.phase
                    && let Some(phase) = planned.status.phase
                {
                    tracing::info!(phase = ?phase, message = planned.status.message.as_deref().unwrap_or_default(), "snapshot status");
                    if phase == rouse_shared::api::SnapshotPhase::Ready {
                        metrics::counter!("rouse_controller_snapshots_total", "provider" => kube_csi::PROVIDER)
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
