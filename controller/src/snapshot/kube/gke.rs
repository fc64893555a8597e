//! The `kube-gke` reconcile: observe the sandbox (until the trigger exists), the
//! `PodSnapshotManualTrigger` named like the snapshot and, once it completed, the
//! `PodSnapshot` it made; plan ([`kube_gke::plan`]); create the trigger; write `lastSnapshot`
//! and the status.

use kube::ResourceExt;
use kube::api::PostParams;
use kube::runtime::controller::Action;
use rouse_shared::api::SandboxSnapshot;

use super::{Context, SnapshotError, dynamic_api, read_sandbox, write_outcome};
use crate::snapshot::kube_gke::{
    self, GkeObserved, GkeSource, TriggerOutcome, TriggerState, pod_snapshot_ready,
};
use crate::snapshot::plan::failed;

/// One reconcile of a snapshot in progress with the `kube-gke` provider.
pub(super) async fn reconcile(
    snapshot: &SandboxSnapshot,
    ctx: &Context,
) -> Result<Action, SnapshotError> {
    let name = snapshot.name_any();
    let uid = snapshot.uid().unwrap_or_default();
    let api_error = |what: String| move |source| SnapshotError::Api { what, source };
    let triggers = dynamic_api(ctx, snapshot, &kube_gke::trigger_resource());
    let trigger = triggers
        .get_opt(&name)
        .await
        .map_err(api_error(format!("read {} {name}", kube_gke::TRIGGER_KIND)))?
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
        let pod_snapshots = dynamic_api(ctx, snapshot, &kube_gke::pod_snapshot_resource());
        observed.pod_snapshot_ready = pod_snapshots
            .get_opt(pod_snapshot)
            .await
            .map_err(api_error(format!(
                "read {} {pod_snapshot}",
                kube_gke::POD_SNAPSHOT_KIND
            )))?
            .is_some_and(|p| pod_snapshot_ready(&p));
    }
    let mut planned = kube_gke::plan(snapshot, &observed);
    if let (Some(pod), Some(sandbox)) = (&planned.create_trigger, &sandbox) {
        let object = kube_gke::trigger(snapshot, sandbox, pod);
        match triggers.create(&PostParams::default(), &object).await {
            Ok(_) => {
                metrics::counter!("rouse_controller_pod_snapshot_triggers_created_total")
                    .increment(1);
            }
            // Made by an earlier reconcile: the next one reads it.
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {
                planned.status = failed(
                    kube_gke::PROVIDER,
                    format!(
                        "this cluster does not serve {}/{} {}: enable GKE Pod snapshots, or \
                         choose another snapshot provider",
                        kube_gke::GROUP,
                        kube_gke::VERSION,
                        kube_gke::TRIGGER_KIND
                    ),
                );
            }
            Err(source) => {
                return Err(SnapshotError::Api {
                    what: format!("create {} {name}", kube_gke::TRIGGER_KIND),
                    source,
                });
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
