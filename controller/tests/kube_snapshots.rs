//! `SandboxSnapshot`s and `restoreFrom` in Kubernetes mode (the `kube-csi` provider) against
//! the in-process fake API server and kubelet, with the real kube-rs client and controller:
//! the exact `VolumeSnapshot` objects, their status mapped back, and forks whose PVCs are
//! created from them.

mod scenarios;

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
use kube::Api;
use kube::api::DeleteParams;
use rouse_shared::api::{
    EmbeddedObjectMetadata, PersistentVolumeClaimTemplate, RestoreFrom, Sandbox, SandboxSnapshot,
    SnapshotPhase,
};
use rouse_testsupport::kube::{FakeApiServer, FakeKubelet, KubeletOptions};
use scenarios::snapshots;
use scenarios::{Env, RunningController, wait_for};
use serde_json::{Value, json};

/// A fake API server with a kubelet, the scenario environment on it, and a controller whose
/// VolumeSnapshots use class `fast`.
async fn fake() -> (FakeApiServer, FakeKubelet, Env, RunningController) {
    let (server, kubelet, env) = scenarios::fake::start(Duration::from_secs(20)).await;
    let mut config = env.config();
    config.snapshots.volume_snapshot_class = Some("fast".to_owned());
    let controller = env.start(config);
    (server, kubelet, env, controller)
}

/// Sandbox `name` with the claim templates `data` and, when `cache`, `cache`.
fn sandbox(env: &Env, name: &str, cache: bool) -> Sandbox {
    let mut sandbox = scenarios::sandbox(env, name);
    if cache {
        let data = sandbox.spec.volume_claim_templates[0].clone();
        sandbox
            .spec
            .volume_claim_templates
            .push(PersistentVolumeClaimTemplate {
                metadata: EmbeddedObjectMetadata {
                    name: "cache".to_owned(),
                    ..EmbeddedObjectMetadata::default()
                },
                spec: PersistentVolumeClaimSpec { ..data.spec },
            });
    }
    sandbox
}

async fn create_snapshot(env: &Env, name: &str, sandbox: &str) -> SandboxSnapshot {
    snapshots::create_snapshot(env, name, sandbox, true).await
}

/// Waits until the snapshot reaches `phase`, returning it.
async fn wait_phase(env: &Env, name: &str, phase: SnapshotPhase) -> SandboxSnapshot {
    let what = format!("snapshot {name} {phase:?}");
    snapshots::wait_snapshot(env, name, &what, |s| snapshots::phase(s) == Some(phase)).await
}

/// Waits until `count` VolumeSnapshots exist, returning them by name.
async fn wait_volume_snapshots(server: &FakeApiServer, env: &Env, count: usize) -> Vec<Value> {
    wait_for(env.timeout, &format!("{count} VolumeSnapshots"), || async {
        let all = server.list("volumesnapshots");
        if all.len() == count {
            Ok(all)
        } else {
            Err(all)
        }
    })
    .await
}

/// Marks a VolumeSnapshot as the CSI snapshotter does once the storage took it.
fn mark_ready(server: &FakeApiServer, name: &str, created: &str, size: &str) {
    let status =
        json!({"status": {"readyToUse": true, "creationTime": created, "restoreSize": size}});
    server
        .merge_patch("volumesnapshots", "team-a", name, &status, true)
        .expect("mark ready");
}

#[tokio::test]
async fn a_snapshot_is_one_volume_snapshot_per_pvc_and_ready_when_all_are() {
    let (server, _kubelet, env, controller) = fake().await;
    env.create(&sandbox(&env, "alice", true)).await;
    env.wait_ready("alice", "True", "DependenciesReady").await;
    let snapshot = create_snapshot(&env, "monday", "alice").await;
    let uid = snapshot.metadata.uid.clone().expect("uid");

    let objects = wait_volume_snapshots(&server, &env, 2).await;
    for (object, volume) in objects.iter().zip(["cache", "data"]) {
        assert_eq!(object["apiVersion"], "snapshot.storage.k8s.io/v1");
        assert_eq!(object["kind"], "VolumeSnapshot");
        assert_eq!(object["metadata"]["name"], format!("{volume}-monday"));
        assert_eq!(
            object["spec"],
            json!({
                "source": {"persistentVolumeClaimName": format!("{volume}-alice")},
                "volumeSnapshotClassName": "fast",
            })
        );
        let labels = &object["metadata"]["labels"];
        assert_eq!(labels["rouse.dev/snapshot-uid"], uid.as_str());
        assert_eq!(labels["rouse.dev/volume"], volume);
        assert_eq!(
            object["metadata"]["annotations"]["rouse.dev/snapshot"],
            "monday"
        );
        let owners = object["metadata"]["ownerReferences"]
            .as_array()
            .expect("owners");
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0]["apiVersion"], "agents.x-k8s.io/v1beta1");
        assert_eq!(owners[0]["kind"], "SandboxSnapshot");
        assert_eq!(owners[0]["name"], "monday");
        assert_eq!(owners[0]["uid"], uid.as_str());
        assert_eq!(owners[0]["controller"], true);
    }
    let pending = wait_phase(&env, "monday", SnapshotPhase::Pending).await;
    assert_eq!(
        pending.status.and_then(|s| s.provider).as_deref(),
        Some("kube-csi")
    );

    mark_ready(&server, "data-monday", "2026-12-03T12:00:05Z", "1Gi");
    mark_ready(&server, "cache-monday", "2026-12-03T12:00:09Z", "512Mi");
    let ready = wait_phase(&env, "monday", SnapshotPhase::Ready).await;
    let status = ready.status.expect("status");
    assert_eq!(status.size_bytes, Some((1 << 30) + (512 << 20)));
    assert_eq!(status.provider.as_deref(), Some("kube-csi"));
    let taken_at = status.taken_at.expect("takenAt").0;
    assert_eq!(taken_at.to_string(), "2026-12-03T12:00:09Z");
    let message = status.message.expect("message");
    assert!(message.contains("cannot snapshot memory"), "{message}");
    let alice = env
        .wait_sandbox("alice", "alice's lastSnapshot", |s| {
            s.status
                .as_ref()
                .and_then(|s| s.last_snapshot.as_ref())
                .is_some()
        })
        .await;
    let last = alice.status.and_then(|s| s.last_snapshot).expect("last");
    assert_eq!(last.name, "monday");
    assert_eq!(last.taken_at.map(|t| t.0), Some(taken_at));
    assert_eq!(server.requests().count("create", "volumesnapshots"), 2);

    // Deleting the snapshot deletes its VolumeSnapshots (garbage collection).
    Api::<SandboxSnapshot>::namespaced(env.client.clone(), &env.namespace)
        .delete("monday", &DeleteParams::default())
        .await
        .expect("delete snapshot");
    wait_volume_snapshots(&server, &env, 0).await;
    controller.stop().await;
}

#[tokio::test]
async fn a_volume_snapshot_error_fails_the_snapshot() {
    let (server, _kubelet, env, controller) = fake().await;
    env.create(&sandbox(&env, "bob", false)).await;
    env.wait_ready("bob", "True", "DependenciesReady").await;
    create_snapshot(&env, "broken", "bob").await;
    wait_volume_snapshots(&server, &env, 1).await;
    let error = json!({"status": {"readyToUse": false, "error": {"message": "quota exceeded", "time": "2026-12-03T12:00:00Z"}}});
    server
        .merge_patch("volumesnapshots", "team-a", "data-broken", &error, true)
        .expect("mark failed");
    let failed = wait_phase(&env, "broken", SnapshotPhase::Failed).await;
    assert_eq!(
        failed.status.and_then(|s| s.message).as_deref(),
        Some("VolumeSnapshot data-broken failed: quota exceeded")
    );
    controller.stop().await;
}

#[tokio::test]
async fn a_sandbox_without_volumes_cannot_be_snapshotted_by_csi() {
    let (server, _kubelet, env, controller) = fake().await;
    let mut bare = sandbox(&env, "carol", false);
    bare.spec.volume_claim_templates.clear();
    env.create(&bare).await;
    create_snapshot(&env, "empty", "carol").await;
    let failed = wait_phase(&env, "empty", SnapshotPhase::Failed).await;
    let message = failed.status.and_then(|s| s.message).expect("message");
    assert!(message.contains("no volumeClaimTemplates"), "{message}");
    assert!(server.list("volumesnapshots").is_empty());
    controller.stop().await;
}

#[tokio::test]
async fn a_fork_waits_for_its_snapshot_then_creates_its_pvcs_from_it() {
    let (server, _kubelet, env, controller) = fake().await;
    let mut fork = sandbox(&env, "fork", true);
    fork.spec.restore_from = Some(RestoreFrom {
        snapshot_name: "monday".to_owned(),
    });
    env.create(&fork).await;
    env.wait_ready("fork", "False", "SnapshotNotFound").await;

    env.create(&sandbox(&env, "alice", true)).await;
    env.wait_ready("alice", "True", "DependenciesReady").await;
    create_snapshot(&env, "monday", "alice").await;
    wait_volume_snapshots(&server, &env, 2).await;
    env.wait_ready("fork", "False", "SnapshotNotReady").await;
    // Nothing of the fork exists while it waits: a PVC made now would start empty.
    for claim in ["data-fork", "cache-fork"] {
        assert_eq!(server.get("persistentvolumeclaims", "team-a", claim), None);
    }
    assert_eq!(server.get("pods", "team-a", "fork"), None);

    mark_ready(&server, "data-monday", "2026-12-03T12:00:05Z", "16Mi");
    mark_ready(&server, "cache-monday", "2026-12-03T12:00:06Z", "16Mi");
    wait_phase(&env, "monday", SnapshotPhase::Ready).await;
    env.wait_ready("fork", "True", "DependenciesReady").await;
    for volume in ["data", "cache"] {
        let claim = server
            .get(
                "persistentvolumeclaims",
                "team-a",
                &format!("{volume}-fork"),
            )
            .expect("the fork's PVC");
        assert_eq!(
            claim["spec"]["dataSource"],
            json!({
                "apiGroup": "snapshot.storage.k8s.io",
                "kind": "VolumeSnapshot",
                "name": format!("{volume}-monday"),
            })
        );
    }
    // The source's own PVCs are plain ones.
    let source = server
        .get("persistentvolumeclaims", "team-a", "data-alice")
        .expect("alice's PVC");
    assert!(source["spec"].get("dataSource").is_none());

    // One list and one watch of snapshots served both controllers: the snapshot controller
    // took `monday`, and the Sandbox controller started the fork when `monday` turned Ready.
    let requests = server.requests();
    assert_eq!(requests.count("list", "sandboxsnapshots"), 1);
    assert_eq!(requests.count("watch", "sandboxsnapshots"), 1);
    // The VolumeSnapshots it made are watched once too (their cache is read, not the API).
    assert_eq!(requests.count("watch", "volumesnapshots"), 1);
    controller.stop().await;
}

/// The scenario the real API server runs too (controller/tests/e2e.rs).
#[tokio::test]
async fn the_shared_csi_scenario() {
    let server = FakeApiServer::start().await.expect("fake API server");
    let _kubelet = FakeKubelet::start(&server, KubeletOptions::default());
    let client = server.client().expect("client");
    let env = Env {
        controller_client: client.clone(),
        client,
        namespace: "team-b".to_owned(),
        lease_namespace: "team-b".to_owned(),
        image: "busybox:1.36".to_owned(),
        timeout: Duration::from_secs(20),
    };
    scenarios::snapshots::csi_snapshot_and_fork(&env).await;
}
