//! `spec.restoreFrom` on Kubernetes: where a fork's snapshot stands (from the cache of
//! `SandboxSnapshot`s, and a read of its `VolumeSnapshot`s), and the `dataSource` its PVCs are
//! created with.
//!
//! A fork is restored when its PVCs are created, so once they all exist the snapshot no longer
//! matters (it may even be deleted). Before that the plan creates nothing while the snapshot
//! is missing or not `Ready`.

use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use kube::api::DynamicObject;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use rouse_shared::api::{Sandbox, SandboxSnapshot, SnapshotPhase};

use super::KubePlatform;
use crate::platform::{PlatformError, Result};
use crate::sandbox::{ObservedVolume, RestoreSource, VolumeSpec, volume_specs};
use crate::snapshot::kube_csi::{self, VolumeSnapshotState};

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
                .map_err(|e| PlatformError::Unavailable {
                    what: format!("read VolumeSnapshot {name}"),
                    message: e.to_string(),
                    source: Some(Box::new(e)),
                })?
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
