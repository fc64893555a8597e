//! The `kube-csi` provider: a `SandboxSnapshot` in Kubernetes mode is one CSI
//! `snapshot.storage.k8s.io/v1` `VolumeSnapshot` per PVC of its sandbox, and a sandbox with
//! `spec.restoreFrom` gets its PVCs created from them (`spec.dataSource`).
//!
//! This module holds the objects and the pure plan; [`super::kube`] reads and writes them.
//! Rules (docs/snapshots.md, "Kubernetes mode"):
//! - A snapshot being deleted, or `Ready` or `Failed` already, gets nothing: a point in time.
//! - No such sandbox: `Pending`, looked at again after [`MISSING_RETRY`].
//! - A sandbox without `volumeClaimTemplates`: `Failed` (this provider keeps volumes only, so
//!   there is nothing to keep).
//! - A PVC of the sandbox not created yet: `Pending`, looked at again after [`MISSING_RETRY`].
//! - Otherwise every missing `VolumeSnapshot` `<template>-<snapshot>` is created; `Pending`
//!   until each reports `readyToUse`, then `Ready` (the latest `creationTime`, the summed
//!   `restoreSize`); `Failed` as soon as one reports an error or one of that name is not the
//!   snapshot's own.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use rouse_shared::api::{Sandbox, SandboxSnapshot};
use serde_json::{Value, json};

use super::super::ownership::{controlled_by, owned_object};
use super::super::plan::{KubePlan, READY_RECHECK, in_progress};
use crate::sandbox::VolumeSpec;
use crate::snapshot::plan::{MISSING_RETRY, failed, pending};
use crate::snapshot::quantity;

/// `SandboxSnapshot.status.provider` of this provider.
pub const PROVIDER: &str = "kube-csi";
/// API group of `VolumeSnapshot`.
pub const GROUP: &str = "snapshot.storage.k8s.io";
/// API version of `VolumeSnapshot` served by the external snapshotter since Kubernetes 1.20.
pub const VERSION: &str = "v1";
/// Kind of a CSI volume snapshot.
pub const KIND: &str = "VolumeSnapshot";
/// Label on a `VolumeSnapshot`: the volume claim template it keeps.
pub const VOLUME_LABEL: &str = "rouse.dev/volume";
/// Longest object name (a DNS subdomain).
const MAX_NAME: usize = 253;

/// The `VolumeSnapshot` resource, for dynamic API calls.
pub fn api_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, VERSION, KIND),
        "volumesnapshots",
    )
}

/// Name of the `VolumeSnapshot` keeping claim template `volume` in snapshot `snapshot`:
/// `<template>-<snapshot>`, as a claim is `<template>-<sandbox>`.
pub fn volume_snapshot_name(volume: &str, snapshot: &str) -> String {
    format!("{volume}-{snapshot}")
}

/// The `VolumeSnapshot` of one volume of `sandbox` for `snapshot`: its source is the volume's
/// PVC, it is labelled with the volume and owned by the snapshot
/// ([`owned_object`]). `class` is the `VolumeSnapshotClass`, `None` for the cluster's default.
pub fn volume_snapshot(
    snapshot: &SandboxSnapshot,
    sandbox: &Sandbox,
    volume: &VolumeSpec,
    class: Option<&str>,
) -> DynamicObject {
    let name = volume_snapshot_name(&volume.volume_name, &snapshot.name_any());
    let mut spec = json!({"source": {"persistentVolumeClaimName": volume.claim_name}});
    if let Some(class) = class {
        spec["volumeSnapshotClassName"] = Value::from(class);
    }
    owned_object(
        &api_resource(),
        &name,
        snapshot,
        sandbox,
        [(VOLUME_LABEL.to_owned(), volume.volume_name.clone())],
        json!({ "spec": spec }),
    )
}

/// What a `VolumeSnapshot` reports, as far as a snapshot's status needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VolumeSnapshotState {
    /// Its name.
    pub name: String,
    /// It has a controller reference to the `SandboxSnapshot` (same UID).
    pub owned: bool,
    /// `status.readyToUse`.
    pub ready: bool,
    /// `status.creationTime`: when the storage took it.
    pub created: Option<Timestamp>,
    /// `status.restoreSize` in bytes (the least size of a volume restored from it).
    pub restore_size: Option<u64>,
    /// `status.error.message`, when the snapshot failed.
    pub error: Option<String>,
}

impl VolumeSnapshotState {
    /// Reads a `VolumeSnapshot` seen from the `SandboxSnapshot` of UID `owner_uid`.
    pub fn of(object: &DynamicObject, owner_uid: &str) -> Self {
        let status = object.data.get("status").cloned().unwrap_or(Value::Null);
        let error = &status["error"];
        Self {
            name: object.name_any(),
            owned: controlled_by(object, owner_uid),
            ready: status["readyToUse"].as_bool().unwrap_or(false),
            created: status["creationTime"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok()),
            restore_size: status["restoreSize"].as_str().and_then(quantity::bytes),
            error: error.is_object().then(|| {
                error["message"]
                    .as_str()
                    .filter(|m| !m.is_empty())
                    .unwrap_or("the snapshot failed without a message")
                    .to_owned()
            }),
        }
    }
}

/// One volume of the source sandbox and what exists of it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CsiVolume {
    /// The volume (claim template and PVC name).
    pub volume: VolumeSpec,
    /// Its PVC exists.
    pub claim_exists: bool,
    /// The `VolumeSnapshot` of its name, if one exists.
    pub snapshot: Option<VolumeSnapshotState>,
}

/// What was observed for one snapshot.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CsiObserved {
    /// The source sandbox's volumes, in template order; `None` when the sandbox does not exist.
    pub volumes: Option<Vec<CsiVolume>>,
}

/// What to do for one snapshot: the volumes whose `VolumeSnapshot` to create now, and the
/// status to write.
pub type CsiPlan = KubePlan<Vec<VolumeSpec>>;

/// Plans one reconcile of `snapshot`; see the module documentation for the rules.
pub fn plan(snapshot: &SandboxSnapshot, observed: &CsiObserved) -> CsiPlan {
    if !in_progress(snapshot) {
        return CsiPlan::unchanged(snapshot);
    }
    let sandbox = &snapshot.spec.sandbox_name;
    let pending = |message: String| pending(PROVIDER, message);
    let settle = CsiPlan::settle;
    let Some(volumes) = &observed.volumes else {
        return settle(
            pending(format!("waiting for sandbox {sandbox} to exist")),
            Some(MISSING_RETRY),
        );
    };
    if volumes.is_empty() {
        return settle(
            failed(
                PROVIDER,
                format!(
                    "sandbox {sandbox} has no volumeClaimTemplates: the kube-csi provider \
                     snapshots PVCs only and cannot snapshot memory, so there is nothing to keep"
                ),
            ),
            None,
        );
    }
    let name = snapshot.name_any();
    if let Some(v) = volumes
        .iter()
        .find(|v| volume_snapshot_name(&v.volume.volume_name, &name).len() > MAX_NAME)
    {
        return settle(
            failed(
                PROVIDER,
                format!(
                    "the VolumeSnapshot name {}-{name} would be longer than {MAX_NAME} characters",
                    v.volume.volume_name
                ),
            ),
            None,
        );
    }
    if let Some(v) = volumes.iter().find(|v| !v.claim_exists) {
        return settle(
            pending(format!(
                "waiting for PVC {} of sandbox {sandbox} to exist",
                v.volume.claim_name
            )),
            Some(MISSING_RETRY),
        );
    }
    if let Some(s) = volumes
        .iter()
        .filter_map(|v| v.snapshot.as_ref())
        .find(|s| !s.owned)
    {
        return settle(
            failed(
                PROVIDER,
                format!(
                    "VolumeSnapshot {} exists and does not belong to this snapshot",
                    s.name
                ),
            ),
            None,
        );
    }
    if let Some((s, error)) = volumes
        .iter()
        .filter_map(|v| v.snapshot.as_ref())
        .find_map(|s| s.error.as_ref().map(|e| (s, e)))
    {
        return settle(
            failed(
                PROVIDER,
                format!("VolumeSnapshot {} failed: {error}", s.name),
            ),
            None,
        );
    }
    let create: Vec<VolumeSpec> = volumes
        .iter()
        .filter(|v| v.snapshot.is_none())
        .map(|v| v.volume.clone())
        .collect();
    if !create.is_empty() {
        let names: Vec<String> = create
            .iter()
            .map(|v| volume_snapshot_name(&v.volume_name, &name))
            .collect();
        return CsiPlan {
            create,
            status: pending(format!("creating VolumeSnapshots {}", names.join(", "))),
            ..CsiPlan::default()
        };
    }
    let taken: Vec<&VolumeSnapshotState> =
        volumes.iter().filter_map(|v| v.snapshot.as_ref()).collect();
    let waiting: Vec<&str> = taken
        .iter()
        .filter(|s| !s.ready)
        .map(|s| s.name.as_str())
        .collect();
    if !waiting.is_empty() {
        // Each VolumeSnapshot's change comes back as a watch event; the requeue is a safety net.
        return settle(
            pending(format!(
                "waiting for VolumeSnapshots {} to be ready to use",
                waiting.join(", ")
            )),
            Some(READY_RECHECK),
        );
    }
    let taken_at = taken.iter().filter_map(|s| s.created).max().map(Time);
    let size: u64 = taken.iter().filter_map(|s| s.restore_size).sum();
    let kept: Vec<String> = volumes
        .iter()
        .map(|v| {
            format!(
                "VolumeSnapshot {} of PVC {}",
                volume_snapshot_name(&v.volume.volume_name, &name),
                v.volume.claim_name
            )
        })
        .collect();
    let message = if snapshot.spec.include_memory {
        format!(
            "includeMemory is unsupported here: the kube-csi provider cannot snapshot memory; \
             kept the volumes: {}",
            kept.join(", ")
        )
    } else {
        format!("kept the volumes (memory is not kept): {}", kept.join(", "))
    };
    let size = i64::try_from(size).unwrap_or(i64::MAX);
    CsiPlan::ready(snapshot, PROVIDER, taken_at, Some(size), message)
}

#[cfg(test)]
#[cfg(test)]
#[path = "tests.rs"]
mod tests;
