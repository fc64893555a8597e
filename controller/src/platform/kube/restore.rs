//! `spec.restoreFrom` on Kubernetes: where a fork's snapshot stands (from the cache of
//! `SandboxSnapshot`s, and a read of its `VolumeSnapshot`s or pod snapshot trigger), and how
//! the fork is made from it, by the provider that took it:
//!
//! - `kube-csi`: its PVCs are created with the snapshot's `VolumeSnapshot`s as `dataSource`,
//!   so once they all exist the snapshot no longer matters (it may even be deleted);
//! - `kube-gke`: its first pod is created with the annotation `podsnapshot.gke.io/ps-name`
//!   naming the `PodSnapshot`, and the Sandbox is then annotated `rouse.dev/restored-from`, so
//!   later pods (after a suspend) start fresh.
//!
//! Before that the plan creates nothing while the snapshot is missing or not `Ready`.

use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use rouse_shared::api::{Sandbox, SandboxSnapshot, SnapshotPhase};
use serde_json::json;

use super::KubePlatform;
use crate::platform::{PlatformError, Result};
use crate::sandbox::{ObservedVolume, RestoreSource, VolumeSpec, volume_specs};
use crate::snapshot::kube::csi::plan::{self as kube_csi, VolumeSnapshotState};
use crate::snapshot::kube::gke::plan as kube_gke;

impl KubePlatform {
    /// The sandbox's `restoreFrom` snapshot from the cache, if it names one that exists.
    fn restore_snapshot(&self, sandbox: &Sandbox) -> Option<std::sync::Arc<SandboxSnapshot>> {
        let from = sandbox.spec.restore_from.as_ref()?;
        let namespace = sandbox.namespace().unwrap_or_else(|| "default".to_owned());
        self.cache
            .snapshots
            .get(&ObjectRef::new(&from.snapshot_name).within(&namespace))
    }

    /// Where the snapshot `sandbox` starts from stands; `None` without `restoreFrom`.
    pub(super) async fn restore_source(
        &self,
        sandbox: &Sandbox,
        volumes: &[ObservedVolume],
    ) -> Result<Option<RestoreSource>> {
        let Some(from) = &sandbox.spec.restore_from else {
            return Ok(None);
        };
        if restored(sandbox) {
            return Ok(Some(RestoreSource::Ready));
        }
        let wanted = volume_specs(sandbox);
        let missing: Vec<&VolumeSpec> = wanted
            .iter()
            .filter(|v| !volumes.iter().any(|o| o.claim_name == v.claim_name))
            .collect();
        if !wanted.is_empty() && missing.is_empty() {
            return Ok(Some(RestoreSource::Ready));
        }
        let name = &from.snapshot_name;
        let Some(snapshot) = self.restore_snapshot(sandbox) else {
            return Ok(Some(RestoreSource::NotFound(format!(
                "snapshot {name} does not exist; the sandbox starts once it is Ready"
            ))));
        };
        let status = snapshot.status.clone().unwrap_or_default();
        let provider = status.provider.clone().unwrap_or_default();
        let source = match status.phase {
            Some(SnapshotPhase::Ready) if provider == kube_csi::PROVIDER => {
                self.volume_snapshots_ready(sandbox, &snapshot, &missing)
                    .await?
            }
            Some(SnapshotPhase::Ready) if provider == kube_gke::PROVIDER => {
                match self.gke_pod_snapshot(sandbox, &snapshot).await? {
                    Some(_) => RestoreSource::Ready,
                    None => RestoreSource::NotReady(format!(
                        "snapshot {name} has no {} naming its {}",
                        kube_gke::TRIGGER_KIND,
                        kube_gke::POD_SNAPSHOT_KIND
                    )),
                }
            }
            Some(SnapshotPhase::Ready) => RestoreSource::NotReady(format!(
                "snapshot {name} was taken by the {provider} provider, which Kubernetes mode \
                 cannot restore"
            )),
            Some(SnapshotPhase::Failed) => RestoreSource::NotReady(format!(
                "snapshot {name} failed: {}",
                status.message.unwrap_or_default()
            )),
            _ => RestoreSource::NotReady(format!(
                "snapshot {name} is not taken yet; the sandbox starts once it is Ready"
            )),
        };
        Ok(Some(source))
    }

    /// `Ready` when the snapshot holds a `VolumeSnapshot`, ready to use, for each volume still
    /// to be created; a fork's claim templates must be its source's.
    async fn volume_snapshots_ready(
        &self,
        sandbox: &Sandbox,
        snapshot: &SandboxSnapshot,
        missing: &[&VolumeSpec],
    ) -> Result<RestoreSource> {
        let namespace = sandbox.namespace().unwrap_or_else(|| "default".to_owned());
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &namespace, &kube_csi::api_resource());
        let snapshot_name = snapshot.name_any();
        let uid = snapshot.uid().unwrap_or_default();
        for volume in missing {
            let name = kube_csi::volume_snapshot_name(&volume.volume_name, &snapshot_name);
            let found = api
                .get_opt(&name)
                .await
                .map_err(|e| super::classify(format!("read VolumeSnapshot {name}"), e))?
                .map(|o| VolumeSnapshotState::of(&o, &uid));
            match found {
                Some(state) if state.owned && state.ready => {}
                Some(state) if state.owned => {
                    return Ok(RestoreSource::NotReady(format!(
                        "VolumeSnapshot {name} of snapshot {snapshot_name} is not ready to use"
                    )));
                }
                _ => {
                    return Ok(RestoreSource::NotReady(format!(
                        "snapshot {snapshot_name} holds no VolumeSnapshot {name} for claim \
                         template {}: a fork's volumeClaimTemplates must be those of the \
                         snapshot's sandbox",
                        volume.volume_name
                    )));
                }
            }
        }
        Ok(RestoreSource::Ready)
    }

    /// The `dataSource` of a fork's PVC: the `VolumeSnapshot` keeping that claim template in
    /// a `kube-csi` snapshot; `None` for a sandbox without `restoreFrom`.
    pub(super) fn data_source(
        &self,
        sandbox: &Sandbox,
        volume: &VolumeSpec,
    ) -> Result<Option<TypedLocalObjectReference>> {
        let Some(from) = &sandbox.spec.restore_from else {
            return Ok(None);
        };
        // The plan creates a fork's volumes only once its snapshot was seen Ready; one gone
        // since then must not leave an empty volume behind.
        let snapshot = self
            .restore_snapshot(sandbox)
            .ok_or_else(|| PlatformError::Conflict {
                what: format!(
                    "ensure_volume {} for {}",
                    volume.claim_name,
                    sandbox.name_any()
                ),
                message: format!("snapshot {} is gone", from.snapshot_name),
            })?;
        let provider = snapshot.status.as_ref().and_then(|s| s.provider.as_deref());
        if provider != Some(kube_csi::PROVIDER) {
            return Ok(None);
        }
        Ok(Some(TypedLocalObjectReference {
            api_group: Some(kube_csi::GROUP.to_owned()),
            kind: kube_csi::KIND.to_owned(),
            name: kube_csi::volume_snapshot_name(&volume.volume_name, &snapshot.name_any()),
        }))
    }
}

/// True once a `kube-gke` fork's first pod was created from its snapshot.
fn restored(sandbox: &Sandbox) -> bool {
    let from = sandbox.spec.restore_from.as_ref();
    let marked = sandbox.annotations().get(kube_gke::RESTORED_ANNOTATION);
    from.is_some_and(|f| marked == Some(&f.snapshot_name))
}

impl KubePlatform {
    /// The `PodSnapshot` a `kube-gke` snapshot made: its trigger's
    /// `status.snapshotCreated.name` (the trigger is named like the snapshot).
    async fn gke_pod_snapshot(
        &self,
        sandbox: &Sandbox,
        snapshot: &SandboxSnapshot,
    ) -> Result<Option<String>> {
        let namespace = sandbox.namespace().unwrap_or_else(|| "default".to_owned());
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &namespace,
            &kube_gke::trigger_resource(),
        );
        let name = snapshot.name_any();
        let trigger = api
            .get_opt(&name)
            .await
            .map_err(|e| super::classify(format!("read {} {name}", kube_gke::TRIGGER_KIND), e))?;
        Ok(trigger.as_ref().and_then(kube_gke::created_pod_snapshot))
    }

    /// For the first pod of a fork of a `kube-gke` snapshot, the `PodSnapshot` to restore it
    /// from (the pod's `podsnapshot.gke.io/ps-name`); `None` for any other pod.
    pub(super) async fn pod_restore(&self, sandbox: &Sandbox) -> Result<Option<String>> {
        if sandbox.spec.restore_from.is_none() || restored(sandbox) {
            return Ok(None);
        }
        let Some(snapshot) = self.restore_snapshot(sandbox) else {
            return Ok(None);
        };
        let provider = snapshot.status.as_ref().and_then(|s| s.provider.as_deref());
        if provider != Some(kube_gke::PROVIDER) {
            return Ok(None);
        }
        let pod_snapshot = self.gke_pod_snapshot(sandbox, &snapshot).await?;
        // The plan starts a fork only once observe found the PodSnapshot's name.
        pod_snapshot
            .map(Some)
            .ok_or_else(|| PlatformError::Conflict {
                what: format!("create_workload for {}", sandbox.name_any()),
                message: format!("snapshot {} names no PodSnapshot", snapshot.name_any()),
            })
    }

    /// Marks a `kube-gke` fork restored (annotation `rouse.dev/restored-from`), so its next
    /// pods start fresh.
    pub(super) async fn mark_restored(&self, sandbox: &Sandbox) -> Result<()> {
        let Some(from) = &sandbox.spec.restore_from else {
            return Ok(());
        };
        let patch = json!({"metadata": {"annotations": {
            kube_gke::RESTORED_ANNOTATION: from.snapshot_name,
        }}});
        let api: Api<Sandbox> = self.api(sandbox);
        api.patch(
            &sandbox.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
        .map_err(|e| {
            super::classify(
                format!("annotate sandbox {} restored", sandbox.name_any()),
                e,
            )
        })
    }
}
