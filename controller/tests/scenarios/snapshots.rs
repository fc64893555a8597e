//! A `kube-csi` snapshot and a fork from it, with only the API (the test plays the CSI
//! snapshotter by writing the VolumeSnapshots' status), so it runs on the fake API server and
//! on a real one with the VolumeSnapshot CRD installed.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use kube::api::PostParams;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use rouse_shared::api::{RestoreFrom, SandboxSnapshot, SandboxSnapshotSpec, SnapshotPhase};
use serde_json::json;

use super::env::{Env, sandbox, wait_for};

/// Creates SandboxSnapshot `name` of `sandbox` in the scenario's namespace.
pub async fn create_snapshot(
    env: &Env,
    name: &str,
    sandbox: &str,
    include_memory: bool,
) -> SandboxSnapshot {
    let mut snapshot = SandboxSnapshot::new(
        name,
        SandboxSnapshotSpec {
            sandbox_name: sandbox.to_owned(),
            include_memory,
        },
    );
    snapshot.metadata.namespace = Some(env.namespace.clone());
    Api::<SandboxSnapshot>::namespaced(env.client.clone(), &env.namespace)
        .create(&PostParams::default(), &snapshot)
        .await
        .expect("create snapshot")
}

/// Waits until snapshot `name` satisfies `check` (`what` names it in a timeout), returning it.
pub async fn wait_snapshot(
    env: &Env,
    name: &str,
    what: &str,
    check: impl Fn(&SandboxSnapshot) -> bool,
) -> SandboxSnapshot {
    let api = Api::<SandboxSnapshot>::namespaced(env.client.clone(), &env.namespace);
    wait_for(env.timeout, what, || async {
        match api.get_opt(name).await {
            Ok(Some(s)) if check(&s) => Ok(s),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// The snapshot's phase, if it has one yet.
pub fn phase(snapshot: &SandboxSnapshot) -> Option<SnapshotPhase> {
    snapshot.status.as_ref().and_then(|s| s.phase)
}

fn volume_snapshots(env: &Env) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshot"),
        "volumesnapshots",
    );
    Api::namespaced_with(env.client.clone(), &env.namespace, &resource)
}

/// Snapshot `monday` of sandbox `ivy` becomes one VolumeSnapshot of its PVC, `Ready` once the
/// VolumeSnapshot is ready to use; fork `ivy-fork` waits for it, then gets a PVC restored from
/// that VolumeSnapshot. (Garbage collection of the VolumeSnapshots is checked on the fake
/// server only: a real one's collector finds a new CRD's kind up to 30 s late.)
pub async fn csi_snapshot_and_fork(env: &Env) {
    let controller = env.start(env.config());
    let snapshots = Api::<SandboxSnapshot>::namespaced(env.client.clone(), &env.namespace);
    let mut fork = sandbox(env, "ivy-fork");
    fork.spec.restore_from = Some(RestoreFrom {
        snapshot_name: "monday".to_owned(),
    });
    env.create(&fork).await;
    env.wait_ready("ivy-fork", "False", "SnapshotNotFound")
        .await;

    env.create(&sandbox(env, "ivy")).await;
    env.wait_ready("ivy", "True", "DependenciesReady").await;
    let snapshot = create_snapshot(env, "monday", "ivy", false).await;
    let api = volume_snapshots(env);
    let made = wait_for(env.timeout, "VolumeSnapshot data-monday", || async {
        api.get_opt("data-monday").await.ok().flatten().ok_or(())
    })
    .await;
    assert_eq!(
        made.data["spec"],
        json!({"source": {"persistentVolumeClaimName": "data-ivy"}})
    );
    assert_eq!(
        made.metadata
            .owner_references
            .as_ref()
            .map(|o| o[0].uid.clone()),
        snapshot.metadata.uid.clone()
    );
    env.wait_ready("ivy-fork", "False", "SnapshotNotReady")
        .await;

    let status = json!({"status": {
        "readyToUse": true, "creationTime": "2026-12-03T12:00:05Z", "restoreSize": "16Mi",
    }});
    api.patch_status(
        "data-monday",
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .expect("mark the VolumeSnapshot ready");
    let ready = wait_for(env.timeout, "snapshot monday Ready", || async {
        match snapshots.get_opt("monday").await {
            Ok(Some(s))
                if s.status.as_ref().and_then(|s| s.phase) == Some(SnapshotPhase::Ready) =>
            {
                Ok(s)
            }
            other => Err(format!("{:?}", other.map(|s| s.and_then(|s| s.status)))),
        }
    })
    .await;
    assert_eq!(ready.status.and_then(|s| s.size_bytes), Some(16 << 20));

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client.clone(), &env.namespace);
    let claim = wait_for(env.timeout, "PVC data-ivy-fork", || async {
        claims
            .get_opt("data-ivy-fork")
            .await
            .ok()
            .flatten()
            .ok_or(())
    })
    .await;
    let source = claim
        .spec
        .and_then(|s| s.data_source)
        .expect("the fork's PVC has a dataSource");
    assert_eq!(source.api_group.as_deref(), Some("snapshot.storage.k8s.io"));
    assert_eq!(source.kind, "VolumeSnapshot");
    assert_eq!(source.name, "data-monday");

    controller.stop().await;
}
