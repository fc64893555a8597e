use jiff::Timestamp;

use super::{CHECKPOINTED, CheckpointOutcome};

#[test]
fn each_outcome_reads_back_and_maps_to_its_condition() {
    let at: Timestamp = "2026-12-03T12:00:00Z".parse().expect("timestamp");
    struct Case {
        name: &'static str,
        given: CheckpointOutcome,
        want: (&'static str, &'static str, &'static str),
    }
    let cases = [
        Case {
            name: "saved",
            given: CheckpointOutcome::Saved {
                taken_at: at,
                size_bytes: 3_000_000,
                duration_ms: 210,
            },
            want: ("True", "MemoryKept", "3000000 bytes saved in 210 ms"),
        },
        Case {
            name: "unsupported",
            given: CheckpointOutcome::Unsupported {
                at,
                message: "the process runtime cannot keep memory".to_owned(),
            },
            want: ("False", "CheckpointUnsupported", "cannot keep memory"),
        },
        Case {
            name: "failed",
            given: CheckpointOutcome::Failed {
                at,
                message: "runsc checkpoint failed: boom".to_owned(),
            },
            want: ("False", "CheckpointFailed", "boom; started fresh"),
        },
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    for Case { name, given, want } in cases {
        let path = dir.path().join(name);
        assert_eq!(CheckpointOutcome::read(&path), None, "{name}: none yet");
        given.write(&path);
        assert_eq!(
            CheckpointOutcome::read(&path).as_ref(),
            Some(&given),
            "{name}"
        );
        let condition = given.condition();
        assert_eq!(condition.type_, CHECKPOINTED, "{name}");
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            (want.0, want.1),
            "{name}"
        );
        assert!(
            condition.message.contains(want.2),
            "{name}: {}",
            condition.message
        );
        assert_eq!(condition.last_transition_time.0, at, "{name}");
    }
}
