use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use rouse_shared::api::{
    LastSnapshot, Sandbox, SandboxSnapshot, SandboxSnapshotStatus, SnapshotPhase,
};
use serde_json::json;

use super::{
    CsiObserved, CsiPlan, CsiVolume, MISSING_RETRY, READY_RECHECK, VolumeSnapshotState, plan,
    volume_snapshot,
};
use crate::sandbox::fixtures::SandboxBuilder;
use crate::sandbox::volume_specs;
use crate::snapshot::fixtures::monday;

fn snapshot(phase: Option<SnapshotPhase>, include_memory: bool) -> SandboxSnapshot {
    let mut s = monday(include_memory);
    s.status = phase.map(|phase| SandboxSnapshotStatus {
        phase: Some(phase),
        message: Some("before".to_owned()),
        ..SandboxSnapshotStatus::default()
    });
    s
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_790_000_000 + second).expect("timestamp")
}

/// The volumes `data` and `cache` of sandbox alice, with their PVCs existing or not, and the
/// given VolumeSnapshot states.
fn volumes(claims: bool, snapshots: [Option<VolumeSnapshotState>; 2]) -> CsiObserved {
    let sandbox = Sandbox::test("alice").volume("data").volume("cache");
    CsiObserved {
        volumes: Some(
            volume_specs(&sandbox)
                .into_iter()
                .zip(snapshots)
                .map(|(volume, snapshot)| CsiVolume {
                    volume,
                    claim_exists: claims,
                    snapshot,
                })
                .collect(),
        ),
    }
}

fn state(name: &str) -> VolumeSnapshotState {
    VolumeSnapshotState {
        name: name.to_owned(),
        owned: true,
        ..VolumeSnapshotState::default()
    }
}

fn ready(name: &str, second: i64, size: u64) -> VolumeSnapshotState {
    VolumeSnapshotState {
        ready: true,
        created: Some(at(second)),
        restore_size: Some(size),
        ..state(name)
    }
}

fn status(phase: SnapshotPhase, message: &str) -> SandboxSnapshotStatus {
    SandboxSnapshotStatus {
        phase: Some(phase),
        provider: Some("kube-csi".to_owned()),
        message: Some(message.to_owned()),
        ..SandboxSnapshotStatus::default()
    }
}

struct Case {
    name: &'static str,
    given: (SandboxSnapshot, CsiObserved),
    want: CsiPlan,
}

#[test]
fn each_rule_of_the_kube_csi_plan() {
    let settled = |s: SandboxSnapshotStatus, requeue| CsiPlan {
        status: s,
        requeue_after: requeue,
        ..CsiPlan::default()
    };
    let kept = "VolumeSnapshot data-monday of PVC data-alice, \
                VolumeSnapshot cache-monday of PVC cache-alice";
    let ready_status = |message: String| SandboxSnapshotStatus {
        phase: Some(SnapshotPhase::Ready),
        taken_at: Some(Time(at(9))),
        size_bytes: Some(3 << 30),
        provider: Some("kube-csi".to_owned()),
        message: Some(message),
    };
    let both_ready = || {
        volumes(
            true,
            [
                Some(ready("data-monday", 9, 1 << 30)),
                Some(ready("cache-monday", 4, 2 << 30)),
            ],
        )
    };
    let mut deleting = snapshot(None, true);
    deleting.metadata.deletion_timestamp = Some(Time(at(0)));
    let cases = vec![
        Case {
            name: "being deleted: nothing",
            given: (deleting, CsiObserved::default()),
            want: CsiPlan::default(),
        },
        Case {
            name: "ready stays as it is",
            given: (snapshot(Some(SnapshotPhase::Ready), true), both_ready()),
            want: settled(
                SandboxSnapshotStatus {
                    phase: Some(SnapshotPhase::Ready),
                    message: Some("before".to_owned()),
                    ..SandboxSnapshotStatus::default()
                },
                None,
            ),
        },
        Case {
            name: "no sandbox: pending, look again",
            given: (snapshot(None, true), CsiObserved::default()),
            want: settled(
                status(SnapshotPhase::Pending, "waiting for sandbox alice to exist"),
                Some(MISSING_RETRY),
            ),
        },
        Case {
            name: "a sandbox without volumes: failed",
            given: (
                snapshot(None, true),
                CsiObserved {
                    volumes: Some(Vec::new()),
                },
            ),
            want: settled(
                status(
                    SnapshotPhase::Failed,
                    "sandbox alice has no volumeClaimTemplates: the kube-csi provider snapshots \
                     PVCs only and cannot snapshot memory, so there is nothing to keep",
                ),
                None,
            ),
        },
        Case {
            name: "a PVC not created yet: pending, look again",
            given: (snapshot(None, true), volumes(false, [None, None])),
            want: settled(
                status(
                    SnapshotPhase::Pending,
                    "waiting for PVC data-alice of sandbox alice to exist",
                ),
                Some(MISSING_RETRY),
            ),
        },
        Case {
            name: "nothing taken: create one VolumeSnapshot per volume",
            given: (snapshot(None, true), volumes(true, [None, None])),
            want: CsiPlan {
                create: volume_specs(&Sandbox::test("alice").volume("data").volume("cache")),
                status: status(
                    SnapshotPhase::Pending,
                    "creating VolumeSnapshots data-monday, cache-monday",
                ),
                ..CsiPlan::default()
            },
        },
        Case {
            name: "one taken: create the other",
            given: (
                snapshot(Some(SnapshotPhase::Pending), true),
                volumes(true, [Some(state("data-monday")), None]),
            ),
            want: CsiPlan {
                create: volume_specs(&Sandbox::test("alice").volume("cache")),
                status: status(
                    SnapshotPhase::Pending,
                    "creating VolumeSnapshots cache-monday",
                ),
                ..CsiPlan::default()
            },
        },
        Case {
            name: "not ready to use yet: pending, the watch brings the change (and a recheck)",
            given: (
                snapshot(None, true),
                volumes(
                    true,
                    [
                        Some(ready("data-monday", 1, 1)),
                        Some(state("cache-monday")),
                    ],
                ),
            ),
            want: settled(
                status(
                    SnapshotPhase::Pending,
                    "waiting for VolumeSnapshots cache-monday to be ready to use",
                ),
                Some(READY_RECHECK),
            ),
        },
        Case {
            name: "all ready: the latest time, the summed size, memory not kept",
            given: (snapshot(None, true), both_ready()),
            want: CsiPlan {
                status: ready_status(format!(
                    "includeMemory is unsupported here: the kube-csi provider cannot snapshot \
                     memory; kept the volumes: {kept}"
                )),
                last_snapshot: Some(LastSnapshot {
                    name: "monday".to_owned(),
                    taken_at: Some(Time(at(9))),
                }),
                ..CsiPlan::default()
            },
        },
        Case {
            name: "all ready, memory not asked for",
            given: (snapshot(None, false), both_ready()),
            want: CsiPlan {
                status: ready_status(format!("kept the volumes (memory is not kept): {kept}")),
                last_snapshot: Some(LastSnapshot {
                    name: "monday".to_owned(),
                    taken_at: Some(Time(at(9))),
                }),
                ..CsiPlan::default()
            },
        },
        Case {
            name: "an error: failed, naming it",
            given: (
                snapshot(None, true),
                volumes(
                    true,
                    [
                        Some(ready("data-monday", 1, 1)),
                        Some(VolumeSnapshotState {
                            error: Some("quota exceeded".to_owned()),
                            ..state("cache-monday")
                        }),
                    ],
                ),
            ),
            want: settled(
                status(
                    SnapshotPhase::Failed,
                    "VolumeSnapshot cache-monday failed: quota exceeded",
                ),
                None,
            ),
        },
        Case {
            name: "someone else's VolumeSnapshot of that name: failed",
            given: (
                snapshot(None, true),
                volumes(
                    true,
                    [
                        Some(VolumeSnapshotState {
                            owned: false,
                            ..state("data-monday")
                        }),
                        None,
                    ],
                ),
            ),
            want: settled(
                status(
                    SnapshotPhase::Failed,
                    "VolumeSnapshot data-monday exists and does not belong to this snapshot",
                ),
                None,
            ),
        },
    ];
    for Case { name, given, want } in cases {
        assert_eq!(plan(&given.0, &given.1), want, "{name}");
    }
}

#[test]
fn a_volume_snapshot_object_and_its_state() {
    let mut sandbox = Sandbox::test("alice").volume("data");
    sandbox.metadata.namespace = Some("team-a".to_owned());
    let snap = snapshot(None, true);
    let volume = &volume_specs(&sandbox)[0];
    let object = volume_snapshot(&snap, &sandbox, volume, Some("fast"));
    let value = serde_json::to_value(&object).expect("json");
    assert_eq!(value["apiVersion"], "snapshot.storage.k8s.io/v1");
    assert_eq!(value["kind"], "VolumeSnapshot");
    assert_eq!(value["metadata"]["name"], "data-monday");
    assert_eq!(value["metadata"]["namespace"], "team-a");
    assert_eq!(
        value["spec"],
        json!({"source": {"persistentVolumeClaimName": "data-alice"}, "volumeSnapshotClassName": "fast"})
    );
    assert_eq!(
        value["metadata"]["labels"]["rouse.dev/snapshot-uid"],
        "uid-1"
    );
    assert_eq!(value["metadata"]["labels"]["rouse.dev/volume"], "data");
    assert_eq!(
        value["metadata"]["annotations"]["rouse.dev/snapshot"],
        "monday"
    );
    let owner = &value["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "SandboxSnapshot");
    assert_eq!(owner["uid"], "uid-1");
    assert_eq!(owner["controller"], true);
    let without_class = volume_snapshot(&snap, &sandbox, volume, None);
    assert!(
        without_class.data["spec"]
            .get("volumeSnapshotClassName")
            .is_none()
    );

    let mut seen = object.clone();
    seen.data["status"] = json!({
        "readyToUse": true,
        "creationTime": "2026-12-03T12:00:00Z",
        "restoreSize": "1Gi",
    });
    assert_eq!(
        VolumeSnapshotState::of(&seen, "uid-1"),
        VolumeSnapshotState {
            name: object.name_any(),
            owned: true,
            ready: true,
            created: Some("2026-12-03T12:00:00Z".parse().expect("time")),
            restore_size: Some(1 << 30),
            error: None,
        }
    );
    seen.data["status"] = json!({"readyToUse": false, "error": {"message": "no space"}});
    let failed = VolumeSnapshotState::of(&seen, "other-uid");
    assert!(!failed.owned);
    assert_eq!(failed.error.as_deref(), Some("no space"));
}
