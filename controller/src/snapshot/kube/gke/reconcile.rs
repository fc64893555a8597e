//! The `kube-gke` reconcile: observe the sandbox (until the trigger exists), the
//! `PodSnapshotManualTrigger` named like the snapshot and, once it completed, the
//! `PodSnapshot` it made; plan ([`super::plan::plan`]); create the trigger; write `lastSnapshot`
//! and the status.

use kube::ResourceExt;
use kube::runtime::controller::Action;
use rouse_shared::api::SandboxSnapshot;

use super::super::context::{Context, SnapshotError, dynamic_api, read_sandbox, write_outcome};
use super::super::owned::{Created, create_owned, not_served, read_owned};
use super::plan::{
    self as kube_gke, GkeObserved, GkeSource, TriggerOutcome, TriggerState, pod_snapshot_ready,
};
use crate::snapshot::plan::failed;

/// One reconcile of a snapshot in progress with the `kube-gke` provider.
pub(crate) async fn reconcile(
    snapshot: &SandboxSnapshot,
    ctx: &Context,
) -> Result<Action, SnapshotError> {
    let name = snapshot.name_any();
    let uid = snapshot.uid().unwrap_or_default();
    let resource = kube_gke::trigger_resource();
    let trigger = read_owned(ctx, snapshot, &resource, &name)
        .await?
        .map(|t| TriggerState::of(&t, &uid));
    let sandbox = read_sandbox(ctx, snapshot).await?;
    let mut observed = GkeObserved {
        source: sandbox
            .as_ref()
            .map_or(GkeSource::Missing, kube_gke::source),
        trigger,
        pod_snapshot_ready: false,
    };
    if let Some(TriggerState {
        outcome: TriggerOutcome::Complete { pod_snapshot, .. },
        ..
    }) = &observed.trigger
    {
        // Made by GKE, not by this controller, so not watched: read until it is Ready.
        let pod_snapshots = dynamic_api(ctx, snapshot, &kube_gke::pod_snapshot_resource());
        observed.pod_snapshot_ready = pod_snapshots
            .get_opt(pod_snapshot)
            .await
            .map_err(|source| SnapshotError::Api {
                what: format!("read {} {pod_snapshot}", kube_gke::POD_SNAPSHOT_KIND),
                source,
            })?
            .is_some_and(|p| pod_snapshot_ready(&p));
    }
    let mut planned = kube_gke::plan(snapshot, &observed);
    if let (Some(pod), Some(sandbox)) = (&planned.create, &sandbox) {
        let object = kube_gke::trigger(snapshot, sandbox, pod);
        let metric = "rouse_controller_pod_snapshot_triggers_created_total";
        if create_owned(ctx, &resource, &object, metric).await? == Created::NotServed {
            let remedy = "enable GKE Pod snapshots";
            planned.status = failed(kube_gke::PROVIDER, not_served(&resource, remedy));
        }
    }
    write_outcome(ctx, snapshot, sandbox.as_ref(), planned).await
}
