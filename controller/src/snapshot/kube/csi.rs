//! The `kube-csi` reconcile: observe the sandbox's PVCs and the `VolumeSnapshot`s, plan
//! ([`kube_csi::plan`]), create the missing ones, write `lastSnapshot` and the status.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use rouse_shared::api::SandboxSnapshot;
use rouse_shared::store::ObjectKey;

use super::{Context, SnapshotError, dynamic_api, read_sandbox, write_outcome};
use crate::sandbox::volume_specs;
use crate::snapshot::kube_csi::{self, CsiObserved, CsiVolume, VolumeSnapshotState};
use crate::snapshot::plan::failed;

/// One reconcile of a snapshot in progress with the `kube-csi` provider.
pub(super) async fn reconcile(
    snapshot: &SandboxSnapshot,
    ctx: &Context,
) -> Result<Action, SnapshotError> {
    let key = ObjectKey::of(snapshot);
    let sandbox = read_sandbox(ctx, snapshot).await?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let volume_snapshots = dynamic_api(ctx, snapshot, &kube_csi::api_resource());
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
    write_outcome(
        ctx,
        snapshot,
        sandbox.as_ref(),
        planned.last_snapshot,
        &planned.status,
        planned.requeue_after,
    )
    .await
}
