use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rouse_shared::api::{
    LastSnapshot, Sandbox, SandboxSnapshot, SandboxSnapshotStatus, SnapshotPhase,
};
use serde_json::json;

use super::{
    GkeObserved, GkePlan, GkeSource, POD_SNAPSHOT_RECHECK, TriggerOutcome, TriggerState, plan,
    pod_snapshot_ready, trigger,
};
use crate::sandbox::fixtures::SandboxBuilder;
use crate::snapshot::fixtures::monday;
use crate::snapshot::kube::plan::READY_RECHECK;
use crate::snapshot::plan::MISSING_RETRY;

fn at() -> Timestamp {
    "2026-12-03T12:00:09Z".parse().expect("time")
}

fn state(outcome: TriggerOutcome) -> TriggerState {
    TriggerState {
        name: "monday".to_owned(),
        owned: true,
        target_pod: "alice".to_owned(),
        outcome,
    }
}

fn complete() -> TriggerOutcome {
    TriggerOutcome::Complete {
        pod_snapshot: "ps-123".to_owned(),
        at: Some(at()),
    }
}

fn observed(source: GkeSource, trigger: Option<TriggerState>, ready: bool) -> GkeObserved {
    GkeObserved {
        source,
        trigger,
        pod_snapshot_ready: ready,
    }
}

fn status(phase: SnapshotPhase, message: &str) -> SandboxSnapshotStatus {
    SandboxSnapshotStatus {
        phase: Some(phase),
        provider: Some("kube-gke".to_owned()),
        message: Some(message.to_owned()),
        ..SandboxSnapshotStatus::default()
    }
}

fn settled(status: SandboxSnapshotStatus, requeue: Option<std::time::Duration>) -> GkePlan {
    GkePlan {
        status,
        requeue_after: requeue,
        ..GkePlan::default()
    }
}

#[test]
fn each_rule_of_the_kube_gke_plan() {
    let running = || GkeSource::Running("alice".to_owned());
    let ready = |message: &str| GkePlan {
        status: SandboxSnapshotStatus {
            phase: Some(SnapshotPhase::Ready),
            taken_at: Some(Time(at())),
            size_bytes: None,
            provider: Some("kube-gke".to_owned()),
            message: Some(message.to_owned()),
        },
        last_snapshot: Some(LastSnapshot {
            name: "monday".to_owned(),
            taken_at: Some(Time(at())),
        }),
        ..GkePlan::default()
    };
    let kept = "PodSnapshot ps-123 of pod alice: memory and the root filesystem; PVCs are not kept";
    let cases: Vec<(&str, SandboxSnapshot, GkeObserved, GkePlan)> = vec![
        (
            "no sandbox: pending, look again",
            monday(true),
            observed(GkeSource::Missing, None, false),
            settled(
                status(SnapshotPhase::Pending, "waiting for sandbox alice to exist"),
                Some(MISSING_RETRY),
            ),
        ),
        (
            "a suspended sandbox has no pod: failed",
            monday(true),
            observed(GkeSource::Stopped("is suspended".to_owned()), None, false),
            settled(
                status(
                    SnapshotPhase::Failed,
                    "sandbox alice is suspended: the kube-gke provider snapshots a running \
                     pod; resume it and create the snapshot again",
                ),
                None,
            ),
        ),
        (
            "a starting sandbox: pending, look again",
            monday(true),
            observed(
                GkeSource::NotReady("DependenciesNotReady: pod pending".to_owned()),
                None,
                false,
            ),
            settled(
                status(
                    SnapshotPhase::Pending,
                    "waiting for sandbox alice to be ready: DependenciesNotReady: pod pending",
                ),
                Some(MISSING_RETRY),
            ),
        ),
        (
            "a ready sandbox: create the trigger for its pod",
            monday(true),
            observed(running(), None, false),
            GkePlan {
                create: Some("alice".to_owned()),
                status: status(SnapshotPhase::Pending, "asked GKE to snapshot pod alice"),
                ..GkePlan::default()
            },
        ),
        (
            "the trigger waits: pending",
            monday(true),
            observed(running(), Some(state(TriggerOutcome::Waiting)), false),
            settled(
                status(
                    SnapshotPhase::Pending,
                    "waiting for GKE to snapshot pod alice",
                ),
                Some(READY_RECHECK),
            ),
        ),
        (
            "once the trigger exists the sandbox no longer matters",
            monday(true),
            observed(
                GkeSource::Missing,
                Some(state(TriggerOutcome::Waiting)),
                false,
            ),
            settled(
                status(
                    SnapshotPhase::Pending,
                    "waiting for GKE to snapshot pod alice",
                ),
                Some(READY_RECHECK),
            ),
        ),
        (
            "complete, its PodSnapshot not ready yet: pending, look again",
            monday(true),
            observed(running(), Some(state(complete())), false),
            settled(
                status(
                    SnapshotPhase::Pending,
                    "waiting for PodSnapshot ps-123 to be Ready",
                ),
                Some(POD_SNAPSHOT_RECHECK),
            ),
        ),
        (
            "complete and ready: the trigger's time, no size",
            monday(true),
            observed(running(), Some(state(complete())), true),
            ready(kept),
        ),
        (
            "memory is kept even when not asked for, and the message says so",
            monday(false),
            observed(running(), Some(state(complete())), true),
            ready(&format!(
                "{kept}; includeMemory is false, but a GKE pod snapshot always keeps memory"
            )),
        ),
        (
            "the trigger failed: failed with its message",
            monday(true),
            observed(
                running(),
                Some(state(TriggerOutcome::Failed(
                    "no storage config".to_owned(),
                ))),
                false,
            ),
            settled(
                status(
                    SnapshotPhase::Failed,
                    "PodSnapshotManualTrigger monday failed: no storage config",
                ),
                None,
            ),
        ),
        (
            "someone else's trigger of that name: failed",
            monday(true),
            observed(
                running(),
                Some(TriggerState {
                    owned: false,
                    ..state(TriggerOutcome::Waiting)
                }),
                false,
            ),
            settled(
                status(
                    SnapshotPhase::Failed,
                    "PodSnapshotManualTrigger monday exists and does not belong to this snapshot",
                ),
                None,
            ),
        ),
    ];
    for (name, given, seen, want) in cases {
        assert_eq!(plan(&given, &seen), want, "{name}");
    }
}

#[test]
fn the_trigger_object_and_what_gke_reports_on_it() {
    let mut sandbox = Sandbox::test("alice");
    sandbox.metadata.namespace = Some("team-a".to_owned());
    let object = trigger(&monday(true), &sandbox, "alice");
    let value = serde_json::to_value(&object).expect("json");
    assert_eq!(value["apiVersion"], "podsnapshot.gke.io/v1");
    assert_eq!(value["kind"], "PodSnapshotManualTrigger");
    assert_eq!(value["metadata"]["name"], "monday");
    assert_eq!(value["metadata"]["namespace"], "team-a");
    assert_eq!(value["spec"], json!({"targetPod": "alice"}));
    assert_eq!(
        value["metadata"]["labels"]["rouse.dev/snapshot-uid"],
        "uid-1"
    );
    assert_eq!(value["metadata"]["ownerReferences"][0]["uid"], "uid-1");

    let mut seen = object.clone();
    assert_eq!(
        TriggerState::of(&seen, "uid-1").outcome,
        TriggerOutcome::Waiting
    );
    seen.data["status"] = json!({
        "conditions": [{"type": "Triggered", "status": "True", "reason": "Complete",
                        "lastTransitionTime": "2026-12-03T12:00:09Z", "message": ""}],
        "snapshotCreated": {"name": "ps-123"},
    });
    let state = TriggerState::of(&seen, "uid-1");
    assert!(state.owned);
    assert_eq!(state.target_pod, "alice");
    assert_eq!(state.outcome, complete());
    seen.data["status"] = json!({"conditions": [{"type": "Triggered", "status": "False",
        "reason": "Error", "message": "pod is not a gVisor pod"}]});
    assert_eq!(
        TriggerState::of(&seen, "other").outcome,
        TriggerOutcome::Failed("pod is not a gVisor pod".to_owned())
    );
    assert!(!TriggerState::of(&seen, "other").owned);

    let mut pod_snapshot = object;
    assert!(!pod_snapshot_ready(&pod_snapshot));
    pod_snapshot.data["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    assert!(pod_snapshot_ready(&pod_snapshot));
}
