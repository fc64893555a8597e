//! `SandboxSnapshot`s with the `kube-gke` provider (GKE pod snapshots) against the in-process
//! fake API server and kubelet: the exact `PodSnapshotManualTrigger`, the trigger's and the
//! `PodSnapshot`'s status mapped back (the test plays GKE's part), and a fork whose first pod
//! is restored from the `PodSnapshot`.

mod scenarios;

use std::time::Duration;

use rouse_controller::snapshot::kube::KubeSnapshotProvider;
use rouse_shared::api::{RestoreFrom, Sandbox, SandboxSnapshot, SnapshotPhase};
use rouse_shared::names::sandbox_name_hash;
use rouse_testsupport::kube::{FakeApiServer, FakeKubelet};
use scenarios::snapshots::{self, phase, wait_snapshot};
use scenarios::{Env, RunningController, wait_for};
use serde_json::{Value, json};

/// A fake API server with a kubelet, the scenario environment on it, and a controller taking
/// snapshots with the `kube-gke` provider.
async fn fake() -> (FakeApiServer, FakeKubelet, Env, RunningController) {
    let (server, kubelet, env) = scenarios::fake::start(Duration::from_secs(20)).await;
    let mut config = env.config();
    config.snapshots.provider = KubeSnapshotProvider::Gke;
    let controller = env.start(config);
    (server, kubelet, env, controller)
}

async fn create_snapshot(env: &Env, name: &str, sandbox: &str) -> SandboxSnapshot {
    snapshots::create_snapshot(env, name, sandbox, true).await
}

/// Waits until the trigger of snapshot `name` exists, returning it.
async fn wait_trigger(server: &FakeApiServer, env: &Env, name: &str) -> Value {
    wait_for(env.timeout, &format!("trigger {name}"), || async {
        server
            .get("podsnapshotmanualtriggers", "team-a", name)
            .ok_or(())
    })
    .await
}

/// Plays GKE: the trigger of `snapshot` completes with PodSnapshot `pod_snapshot` of `pod`,
/// which turns Ready when `ready`.
fn gke_completes(server: &FakeApiServer, snapshot: &str, pod_snapshot: &str, pod: &str) {
    let made = json!({
        "apiVersion": "podsnapshot.gke.io/v1",
        "kind": "PodSnapshot",
        "metadata": {
            "name": pod_snapshot,
            "namespace": "team-a",
            "labels": {"agents.x-k8s.io/sandbox-name-hash": sandbox_name_hash(pod)},
            "annotations": {"podsnapshot.gke.io/origin-pod": pod},
        },
    });
    server
        .create("podsnapshots", "team-a", made)
        .expect("create PodSnapshot");
    let status = json!({"status": {
        "conditions": [{
            "type": "Triggered", "status": "True", "reason": "Complete",
            "message": "snapshot created", "lastTransitionTime": "2026-12-03T12:00:09Z",
        }],
        "snapshotCreated": {"name": pod_snapshot},
    }});
    server
        .merge_patch(
            "podsnapshotmanualtriggers",
            "team-a",
            snapshot,
            &status,
            true,
        )
        .expect("complete the trigger");
}

fn gke_pod_snapshot_ready(server: &FakeApiServer, pod_snapshot: &str) {
    let status = json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "Ready", "message": "",
        "lastTransitionTime": "2026-12-03T12:00:10Z",
    }]}});
    server
        .merge_patch("podsnapshots", "team-a", pod_snapshot, &status, true)
        .expect("PodSnapshot ready");
}

/// Sandbox `name` without volumes (a pod snapshot keeps no PVC).
fn sandbox(env: &Env, name: &str) -> Sandbox {
    let mut sandbox = scenarios::sandbox(env, name);
    sandbox.spec.volume_claim_templates.clear();
    sandbox
}

/// Takes snapshot `monday` of a new ready sandbox `alice`, GKE answering with `ps-123`.
async fn take_monday(server: &FakeApiServer, env: &Env) -> SandboxSnapshot {
    monday_until_pod_snapshot(server, env).await;
    monday_ready(server, env).await
}

/// Snapshot `monday` of a new ready sandbox `alice` until GKE completed its trigger with
/// `ps-123`, which is not `Ready` yet.
async fn monday_until_pod_snapshot(server: &FakeApiServer, env: &Env) {
    env.create(&sandbox(env, "alice")).await;
    env.wait_ready("alice", "True", "DependenciesReady").await;
    let snapshot = create_snapshot(env, "monday", "alice").await;
    let uid = snapshot.metadata.uid.clone().expect("uid");
    let trigger = wait_trigger(server, env, "monday").await;
    assert_eq!(trigger["apiVersion"], "podsnapshot.gke.io/v1");
    assert_eq!(trigger["kind"], "PodSnapshotManualTrigger");
    assert_eq!(trigger["spec"], json!({"targetPod": "alice"}));
    assert_eq!(
        trigger["metadata"]["labels"]["rouse.dev/snapshot-uid"],
        uid.as_str()
    );
    assert_eq!(
        trigger["metadata"]["labels"]["agents.x-k8s.io/sandbox-name-hash"],
        sandbox_name_hash("alice")
    );
    let owner = &trigger["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "SandboxSnapshot");
    assert_eq!(owner["uid"], uid.as_str());
    assert_eq!(owner["controller"], true);
    wait_snapshot(env, "monday", "monday Pending", |s| {
        phase(s) == Some(SnapshotPhase::Pending)
    })
    .await;

    gke_completes(server, "monday", "ps-123", "alice");
    wait_snapshot(env, "monday", "monday waiting for its PodSnapshot", |s| {
        s.status
            .as_ref()
            .and_then(|s| s.message.as_deref())
            .is_some_and(|m| m.contains("PodSnapshot ps-123 to be Ready"))
    })
    .await;
}

/// `ps-123` turns `Ready`, and so does `monday`.
async fn monday_ready(server: &FakeApiServer, env: &Env) -> SandboxSnapshot {
    gke_pod_snapshot_ready(server, "ps-123");
    wait_snapshot(env, "monday", "monday Ready", |s| {
        phase(s) == Some(SnapshotPhase::Ready)
    })
    .await
}

#[tokio::test]
async fn a_gke_snapshot_is_a_manual_trigger_ready_with_its_pod_snapshot() {
    let (server, _kubelet, env, controller) = fake().await;
    monday_until_pod_snapshot(&server, &env).await;
    // From here the snapshot's reconciles (one more at least: the PodSnapshot is looked at
    // again until Ready) read the trigger from the cache of its watch, not from the API.
    let trigger_reads = server.requests().count("get", "podsnapshotmanualtriggers");
    let ready = monday_ready(&server, &env).await;
    assert_eq!(
        server.requests().count("get", "podsnapshotmanualtriggers"),
        trigger_reads
    );
    assert_eq!(
        server
            .requests()
            .count("watch", "podsnapshotmanualtriggers"),
        1
    );
    let status = ready.status.expect("status");
    assert_eq!(status.provider.as_deref(), Some("kube-gke"));
    assert_eq!(
        status.taken_at.map(|t| t.0.to_string()).as_deref(),
        Some("2026-12-03T12:00:09Z")
    );
    assert_eq!(status.size_bytes, None);
    let message = status.message.expect("message");
    assert!(
        message.contains("PodSnapshot ps-123 of pod alice"),
        "{message}"
    );
    let alice = env
        .wait_sandbox("alice", "alice's lastSnapshot", |s| {
            s.status
                .as_ref()
                .and_then(|s| s.last_snapshot.as_ref())
                .is_some()
        })
        .await;
    assert_eq!(
        alice
            .status
            .and_then(|s| s.last_snapshot)
            .map(|l| l.name)
            .as_deref(),
        Some("monday")
    );
    assert_eq!(
        server
            .requests()
            .count("create", "podsnapshotmanualtriggers"),
        1
    );
    controller.stop().await;
}

#[tokio::test]
async fn a_failed_trigger_fails_the_snapshot() {
    let (server, _kubelet, env, controller) = fake().await;
    env.create(&sandbox(&env, "bob")).await;
    env.wait_ready("bob", "True", "DependenciesReady").await;
    create_snapshot(&env, "broken", "bob").await;
    wait_trigger(&server, &env, "broken").await;
    let status = json!({"status": {"conditions": [{
        "type": "Triggered", "status": "False", "reason": "Error",
        "message": "no PodSnapshotPolicy selects pod bob",
        "lastTransitionTime": "2026-12-03T12:00:09Z",
    }]}});
    server
        .merge_patch(
            "podsnapshotmanualtriggers",
            "team-a",
            "broken",
            &status,
            true,
        )
        .expect("fail the trigger");
    let failed = wait_snapshot(&env, "broken", "broken Failed", |s| {
        phase(s) == Some(SnapshotPhase::Failed)
    })
    .await;
    assert_eq!(
        failed.status.and_then(|s| s.message).as_deref(),
        Some("PodSnapshotManualTrigger broken failed: no PodSnapshotPolicy selects pod bob")
    );
    controller.stop().await;
}

#[tokio::test]
async fn a_gke_fork_restores_its_first_pod_only() {
    let (server, _kubelet, env, controller) = fake().await;
    let mut fork = sandbox(&env, "fork");
    fork.spec.restore_from = Some(RestoreFrom {
        snapshot_name: "monday".to_owned(),
    });
    env.create(&fork).await;
    env.wait_ready("fork", "False", "SnapshotNotFound").await;
    assert_eq!(server.get("pods", "team-a", "fork"), None);

    take_monday(&server, &env).await;
    env.wait_ready("fork", "True", "DependenciesReady").await;
    let pod = server
        .get("pods", "team-a", "fork")
        .expect("the fork's pod");
    assert_eq!(
        pod["metadata"]["annotations"]["podsnapshot.gke.io/ps-name"],
        "ps-123"
    );
    let marked = env
        .wait_sandbox("fork", "fork marked restored", |s| {
            s.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("rouse.dev/restored-from"))
                .is_some_and(|v| v == "monday")
        })
        .await;
    assert!(marked.metadata.annotations.is_some());

    // A resume starts fresh: the memory restore was the fork's first start only.
    env.patch_spec("fork", json!({"operatingMode": "Suspended"}))
        .await;
    env.wait_pod_gone("fork").await;
    env.patch_spec("fork", json!({"operatingMode": "Running"}))
        .await;
    env.wait_ready("fork", "True", "DependenciesReady").await;
    let pod = server
        .get("pods", "team-a", "fork")
        .expect("the fork's new pod");
    assert!(
        pod["metadata"]["annotations"]
            .get("podsnapshot.gke.io/ps-name")
            .is_none(),
        "{pod}"
    );
    controller.stop().await;
}
