use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rouse_shared::api::{
    LastSnapshot, SandboxSnapshot, SandboxSnapshotSpec, SandboxSnapshotStatus, SnapshotPhase,
};

use super::{BUSY_RETRY, MISSING_RETRY, SnapshotObserved, SnapshotPlan, Source, plan};
use crate::snapshot::record::SnapshotRecord;

fn at() -> Timestamp {
    "2026-12-03T12:00:00Z".parse().expect("timestamp")
}

fn snapshot(status: Option<SnapshotPhase>) -> SandboxSnapshot {
    let mut s = SandboxSnapshot::new(
        "snap",
        SandboxSnapshotSpec {
            sandbox_name: "box".to_owned(),
            include_memory: true,
        },
    );
    s.metadata.uid = Some("uid-1".to_owned());
    s.metadata.namespace = Some("default".to_owned());
    s.status = status.map(|phase| SandboxSnapshotStatus {
        phase: Some(phase),
        message: Some("before".to_owned()),
        ..SandboxSnapshotStatus::default()
    });
    s
}

fn record(uid: &str) -> SnapshotRecord {
    SnapshotRecord {
        uid: uid.to_owned(),
        sandbox: "box".to_owned(),
        taken_at: at(),
        size_bytes: 4096,
        provider: "local-gvisor".to_owned(),
        memory: true,
        volumes: vec!["work".to_owned()],
        pause_ms: Some(500),
        message: "memory and 1 volume".to_owned(),
    }
}

fn pending(message: &str, requeue: Option<std::time::Duration>, take: bool) -> SnapshotPlan {
    SnapshotPlan {
        take,
        status: SandboxSnapshotStatus {
            phase: Some(SnapshotPhase::Pending),
            message: Some(message.to_owned()),
            ..SandboxSnapshotStatus::default()
        },
        last_snapshot: None,
        requeue_after: requeue,
    }
}

#[test]
fn each_rule_of_the_snapshot_plan() {
    struct Case {
        name: &'static str,
        given: (SandboxSnapshot, Source, Option<SnapshotRecord>),
        want: SnapshotPlan,
    }
    let ready_status = SandboxSnapshotStatus {
        phase: Some(SnapshotPhase::Ready),
        taken_at: Some(Time(at())),
        size_bytes: Some(4096),
        provider: Some("local-gvisor".to_owned()),
        message: Some("memory and 1 volume".to_owned()),
    };
    let mut deleting = snapshot(None);
    deleting.metadata.deletion_timestamp = Some(Time(at()));
    let cases = [
        Case {
            name: "an available sandbox is snapshotted",
            given: (snapshot(None), Source::Available, None),
            want: pending("taking a snapshot of sandbox box", None, true),
        },
        Case {
            name: "a missing sandbox is waited for",
            given: (snapshot(None), Source::Missing, None),
            want: pending(
                "waiting for sandbox box to exist",
                Some(MISSING_RETRY),
                false,
            ),
        },
        Case {
            name: "a starting sandbox is waited for",
            given: (
                snapshot(Some(SnapshotPhase::Pending)),
                Source::Busy("it is starting".to_owned()),
                None,
            ),
            want: pending(
                "waiting for sandbox box: it is starting",
                Some(BUSY_RETRY),
                false,
            ),
        },
        Case {
            name: "data taken before a crash becomes the status",
            given: (
                snapshot(Some(SnapshotPhase::Pending)),
                Source::Available,
                Some(record("uid-1")),
            ),
            want: SnapshotPlan {
                status: ready_status.clone(),
                last_snapshot: Some(LastSnapshot {
                    name: "snap".to_owned(),
                    taken_at: Some(Time(at())),
                }),
                ..SnapshotPlan::default()
            },
        },
        Case {
            name: "data of another uid is not this snapshot's",
            given: (snapshot(None), Source::Available, Some(record("uid-0"))),
            want: pending("taking a snapshot of sandbox box", None, true),
        },
        Case {
            name: "a ready snapshot never changes",
            given: (
                snapshot(Some(SnapshotPhase::Ready)),
                Source::Missing,
                Some(record("uid-1")),
            ),
            want: SnapshotPlan {
                status: snapshot(Some(SnapshotPhase::Ready)).status.expect("set"),
                ..SnapshotPlan::default()
            },
        },
        Case {
            name: "a ready snapshot whose data vanished fails",
            given: (
                snapshot(Some(SnapshotPhase::Ready)),
                Source::Available,
                None,
            ),
            want: SnapshotPlan {
                status: SandboxSnapshotStatus {
                    phase: Some(SnapshotPhase::Failed),
                    message: Some(
                        "the snapshot's data is missing from the data directory".to_owned(),
                    ),
                    ..SandboxSnapshotStatus::default()
                },
                ..SnapshotPlan::default()
            },
        },
        Case {
            name: "a failed snapshot is not retaken",
            given: (
                snapshot(Some(SnapshotPhase::Failed)),
                Source::Available,
                None,
            ),
            want: SnapshotPlan {
                status: snapshot(Some(SnapshotPhase::Failed)).status.expect("set"),
                ..SnapshotPlan::default()
            },
        },
        Case {
            name: "a snapshot being deleted gets nothing",
            given: (deleting, Source::Available, None),
            want: SnapshotPlan::default(),
        },
    ];
    for Case { name, given, want } in cases {
        let (snapshot, source, record) = given;
        let got = plan(&snapshot, &SnapshotObserved { source, record });
        assert_eq!(got, want, "{name}");
    }
}
