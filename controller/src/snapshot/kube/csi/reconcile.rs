//! The `kube-csi` reconcile: observe the sandbox's PVCs and the `VolumeSnapshot`s, plan
//! ([`super::plan::plan`]), create the missing ones, write `lastSnapshot` and the status.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use rouse_shared::api::SandboxSnapshot;
use rouse_shared::store::ObjectKey;

use super::super::context::{Context, SnapshotError, read_sandbox, write_outcome};
use super::super::owned::{Created, create_owned, not_served, read_owned};
use super::plan::{self as kube_csi, CsiObserved, CsiVolume, VolumeSnapshotState};
use crate::sandbox::volume_specs;
use crate::snapshot::plan::failed;

/// One reconcile of a snapshot in progress with the `kube-csi` provider.
pub(crate) async fn reconcile(
    snapshot: &SandboxSnapshot,
    ctx: &Context,
) -> Result<Action, SnapshotError> {
    let key = ObjectKey::of(snapshot);
    let sandbox = read_sandbox(ctx, snapshot).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let resource = kube_csi::api_resource();
    let uid = snapshot.uid().unwrap_or_default();
    let mut observed = CsiObserved::default();
    if let Some(sandbox) = &sandbox {
        let mut volumes = Vec::new();
        for volume in volume_specs(sandbox) {
            let claim_exists = claims
                .get_opt(&volume.claim_name)
                .await
                .map_err(|source| SnapshotError::Api {
                    what: format!("read PVC {}", volume.claim_name),
                    source,
                })?
                .is_some();
            let name = kube_csi::volume_snapshot_name(&volume.volume_name, &key.name);
            let existing = read_owned(ctx, snapshot, &resource, &name).await?;
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
            let class = ctx.config.volume_snapshot_class.as_deref();
            let object = kube_csi::volume_snapshot(snapshot, sandbox, volume, class);
            let metric = "rouse_controller_volume_snapshots_created_total";
            if create_owned(ctx, &resource, &object, metric).await? == Created::NotServed {
                let remedy = "install the CSI snapshot CRDs and controller";
                planned.status = failed(kube_csi::PROVIDER, not_served(&resource, remedy));
                break;
            }
        }
    }
    write_outcome(ctx, snapshot, sandbox.as_ref(), planned).await
}
